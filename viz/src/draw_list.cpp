#include "viz/draw_list.hpp"

namespace ctwin::viz {

void DrawList::clear() {
  rects.clear();
  lines.clear();
  texts.clear();
  text.clear();
}

void DrawList::add_text(float x, float y, std::uint32_t color, float clip_x0, float clip_x1, std::string_view s) {
  texts.push_back(DrawText{x, y, color, clip_x0, clip_x1, static_cast<std::uint32_t>(text.size()),
                           static_cast<std::uint32_t>(s.size())});
  text.append(s);
}

}  // namespace ctwin::viz
