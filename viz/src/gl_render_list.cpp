// Turning a DrawList's rectangles, lines and texts into ImDrawList calls.
#include "gl_render_list.hpp"

#include <cmath>
#include <cstdint>
#include <string_view>

#include "viz/colors.hpp"

namespace ctwin::viz::gl {

namespace {
ImU32 im(std::uint32_t c) { return static_cast<ImU32>(c); }
}  // namespace

void render_list(const DrawList& list, ImDrawList* dl) {
  for (const auto& r : list.rects) {
    if (r.filled) {
      // A 1-pixel gap at the right of wide ops keeps back-to-back ops apart.
      const float x1 = r.kind == ItemKind::event && r.x1 - r.x0 >= 6 ? r.x1 - 1 : r.x1;
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(x1, r.y1), im(r.color));
    } else {
      dl->AddRect(ImVec2(r.x0 + 0.5f, r.y0 + 0.5f), ImVec2(r.x1 - 0.5f, r.y1 - 0.5f), im(r.color), 0, 0,
                  r.kind == ItemKind::overlay && r.color == palette::kSelection ? 2.f : 1.f);
    }
  }
  for (const auto& l : list.lines) {
    dl->AddLine(ImVec2(l.x0, l.y0), ImVec2(l.x1, l.y1), im(l.color), l.thickness);
    if (l.arrow_head) {
      const float dx = l.x1 - l.x0, dy = l.y1 - l.y0;
      const float len = std::sqrt(dx * dx + dy * dy);
      if (len > 1) {
        const float ux = dx / len, uy = dy / len;
        const ImVec2 tip(l.x1, l.y1);
        dl->AddTriangleFilled(tip, ImVec2(l.x1 - 7 * ux - 3.5f * uy, l.y1 - 7 * uy + 3.5f * ux),
                              ImVec2(l.x1 - 7 * ux + 3.5f * uy, l.y1 - 7 * uy - 3.5f * ux), im(l.color));
      }
    }
  }
  ImFont* font = ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  for (const auto& t : list.texts) {
    const std::string_view s = list.text_of(t);
    const ImVec4 clip(t.clip_x0, t.y - 2, t.clip_x1, t.y + size + 2);
    dl->AddText(font, size, ImVec2(t.x, t.y), im(t.color), s.data(), s.data() + s.size(), 0, &clip);
  }
}

}  // namespace ctwin::viz::gl
