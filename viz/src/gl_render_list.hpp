// Drawing a frame's DrawList (built by TimelineModel::build_frame) with ImGui.
#pragma once

#include <imgui.h>

#include "viz/draw_list.hpp"

namespace ctwin::viz::gl {

// Rects, then lines (with arrow heads), then clipped texts, in the list's order.
void render_list(const DrawList& list, ImDrawList* dl);

}  // namespace ctwin::viz::gl
