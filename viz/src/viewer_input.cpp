// Mouse, keyboard and navigation: zoom, pan, drag-selection, the minimap, selection, group
// folding, and jumping to search matches.
#include <algorithm>
#include <cmath>

#include "gl_context.hpp"
#include "viewer_app.hpp"

namespace ctwin::viz::gl {

void App::fit(const std::vector<Canvas>& cs) {
  double lo = 1e300, hi = -1e300;
  for (int p = 0; p < n_panes; ++p) {
    lo = std::min(lo, static_cast<double>(panes[p].get()->begin_ps()));
    hi = std::max(hi, static_cast<double>(panes[p].get()->end_ps()));
  }
  const double pad = (hi - lo) * 0.01;
  show_range(view, cs[0], lo - pad, hi + pad);
}

void App::clamp_scroll(const std::vector<Canvas>& cs) {
  for (int p = 0; p < n_panes; ++p) {
    const float visible = TimelineModel::rows_bottom(cs[p]) - TimelineModel::rows_top(cs[p]);
    panes[p].scroll_y = std::clamp(panes[p].scroll_y, 0.f, std::max(0.f, panes[p].get()->content_height() - visible));
  }
}

void App::jump_to_match(bool forward, const std::vector<Canvas>& cs) {
  const int p = sel_pane >= 0 ? sel_pane : 0;
  TimelineModel* m = panes[p].get();
  const double centre = view.t0_ps + (view.t1_ps(cs[p]) - view.t0_ps) / 2;
  double t = centre;
  if (sel_pane == p && sel_event != kNoIndex) t = static_cast<double>(m->trace().events[sel_event].start_ps);
  const std::uint32_t e = m->next_match(t, forward);
  if (e == kNoIndex) return;
  sel_pane = p;
  sel_event = e;
  const auto& ev = m->trace().events[e];
  const double span = view.t1_ps(cs[p]) - view.t0_ps;
  if (static_cast<double>(ev.dur_ps) > span * 0.8) {
    show_range(view, cs[p], static_cast<double>(ev.start_ps) - ev.dur_ps * 0.1,
               static_cast<double>(ev.start_ps + ev.dur_ps) + ev.dur_ps * 0.1);
  } else {
    view.t0_ps = static_cast<double>(ev.start_ps) + ev.dur_ps / 2.0 - span / 2;
  }
  // Bring its lane into view.
  const std::uint32_t r = m->row_of_lane(ev.lane);
  if (r != kNoIndex) {
    const float visible = TimelineModel::rows_bottom(cs[p]) - TimelineModel::rows_top(cs[p]);
    const float y = m->rows()[r].y;
    if (y < panes[p].scroll_y || y + kLanePitch > panes[p].scroll_y + visible) panes[p].scroll_y = y - visible / 3;
  }
}

void App::handle_input(const std::vector<Canvas>& cs) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  int p = -1;
  for (int i = 0; i < n_panes; ++i) {
    const Canvas& c = cs[i];
    if (mouse.x >= c.x && mouse.x < c.x + c.w && mouse.y >= c.y && mouse.y < c.y + c.h) p = i;
  }
  const bool over_canvas = p >= 0 && !io.WantCaptureMouse;
  hover_pane = -1;
  hover = Hit{};
  if (over_canvas) {
    const Canvas& c = cs[p];
    View pv = view;
    pv.scroll_y = panes[p].scroll_y;
    TimelineModel* m = panes[p].get();
    const float xl = c.x + kLabelWidth;
    const bool in_minimap = mouse.y >= TimelineModel::rows_bottom(c);
    if (io.MouseWheel != 0) {
      if (io.KeyShift || mouse.x < xl) {
        panes[p].scroll_y -= io.MouseWheel * 3 * kLanePitch;
      } else {
        zoom_around(view, c, std::max(mouse.x, xl), std::pow(0.8, io.MouseWheel));
      }
    }
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
      drag_pane = p;
      drag_start = mouse;
      drag_t0 = view.t0_ps;
      drag_scroll = panes[p].scroll_y;
      drag = in_minimap ? Drag::minimap : Drag::pan;
    }
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
      drag_pane = p;
      drag_start = mouse;
      drag = Drag::range;
    }
    if (drag == Drag::none) {
      hover = m->hit_test(pv, c, mouse.x, mouse.y);
      hover_pane = p;
    }
  }
  if (drag != Drag::none) {
    const Canvas& c = cs[drag_pane];
    TimelineModel* m = panes[drag_pane].get();
    const float dx = mouse.x - drag_start.x, dy = mouse.y - drag_start.y;
    if (drag == Drag::pan && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      view.t0_ps = drag_t0 - dx * view.ps_per_px;
      panes[drag_pane].scroll_y = drag_scroll - dy;
    } else if (drag == Drag::minimap && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      const double span = view.t1_ps(c) - view.t0_ps;
      view.t0_ps = m->minimap_time_at(c, mouse.x) - span / 2;
    }
    if (drag == Drag::pan && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
      if (std::fabs(dx) < 3 && std::fabs(dy) < 3) {  // a click: select, or toggle a group
        View pv = view;
        pv.scroll_y = panes[drag_pane].scroll_y;
        const Hit h = m->hit_test(pv, c, mouse.x, mouse.y);
        if (h.row_index != kNoIndex && (h.row_kind == RowKind::group_header || h.row_kind == RowKind::summary)) {
          m->set_collapsed(h.row_index, !m->groups()[h.row_index].collapsed);
        } else {
          sel_pane = h.event != kNoIndex ? drag_pane : -1;
          sel_event = h.event;
        }
      }
      drag = Drag::none;
    } else if (drag == Drag::minimap && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
      drag = Drag::none;
    } else if (drag == Drag::range && ImGui::IsMouseReleased(ImGuiMouseButton_Right)) {
      const float x0 = std::max(std::min(drag_start.x, mouse.x), c.x + kLabelWidth);
      const float x1 = std::max(drag_start.x, mouse.x);
      if (x1 - x0 > 4) show_range(view, c, view.time_at(c, x0), view.time_at(c, x1));
      drag = Drag::none;
    }
  }
  // Keyboard shortcuts (not while typing in the search box).
  if (!io.WantCaptureKeyboard) {
    const Canvas& c = cs[0];
    const float mid = c.x + kLabelWidth + (c.w - kLabelWidth) / 2;
    const double span = view.t1_ps(c) - view.t0_ps;
    if (ImGui::IsKeyPressed(GLFW_KEY_W) || ImGui::IsKeyPressed(GLFW_KEY_EQUAL)) zoom_around(view, c, mid, 0.7);
    if (ImGui::IsKeyPressed(GLFW_KEY_S) || ImGui::IsKeyPressed(GLFW_KEY_MINUS)) zoom_around(view, c, mid, 1 / 0.7);
    if (ImGui::IsKeyPressed(GLFW_KEY_A) || ImGui::IsKeyPressed(GLFW_KEY_LEFT)) view.t0_ps -= span * 0.15;
    if (ImGui::IsKeyPressed(GLFW_KEY_D) || ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) view.t0_ps += span * 0.15;
    if (ImGui::IsKeyPressed(GLFW_KEY_F) && !io.KeyCtrl) fit(cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) fit(cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_UP)) panes[0].scroll_y -= kLanePitch * 3, panes[1].scroll_y -= kLanePitch * 3;
    if (ImGui::IsKeyPressed(GLFW_KEY_DOWN)) panes[0].scroll_y += kLanePitch * 3, panes[1].scroll_y += kLanePitch * 3;
    if (ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP)) panes[0].scroll_y -= c.h * 0.8f, panes[1].scroll_y -= c.h * 0.8f;
    if (ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN)) panes[0].scroll_y += c.h * 0.8f, panes[1].scroll_y += c.h * 0.8f;
    if (ImGui::IsKeyPressed(GLFW_KEY_Z) && sel_event != kNoIndex) {
      const auto& e = panes[sel_pane].get()->trace().events[sel_event];
      const double pad = std::max(1.0, e.dur_ps * 0.1);
      show_range(view, c, static_cast<double>(e.start_ps) - pad, static_cast<double>(e.start_ps + e.dur_ps) + pad);
    }
    if (ImGui::IsKeyPressed(GLFW_KEY_C)) {
      for (int i = 0; i < n_panes; ++i) {
        TimelineModel* m = panes[i].get();
        const bool any_open =
            std::any_of(m->groups().begin(), m->groups().end(), [](const Group& g) { return !g.collapsed; });
        m->set_all_collapsed(any_open);
      }
    }
    if (ImGui::IsKeyPressed(GLFW_KEY_N)) jump_to_match(!io.KeyShift, cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE)) sel_event = kNoIndex, sel_pane = -1;
    if (ImGui::IsKeyPressed(GLFW_KEY_SLASH) || (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F))) focus_search = true;
  }
  clamp_scroll(cs);
}

}  // namespace ctwin::viz::gl
