// One frame of the viewer: take finished loads, fit the view once, handle input, build each
// pane's DrawList, draw them, then the panels.
#include <algorithm>
#include <chrono>
#include <exception>

#include "gl_render_list.hpp"
#include "viewer_app.hpp"

namespace ctwin::viz::gl {

void App::frame(int w, int h) {
  for (int p = 0; p < n_panes; ++p) {
    Pane& pane = panes[p];
    if (!pane.get() && pane.loader && pane.loader->done()) {
      try {
        pane.model = pane.loader->take();
        if (!fold.empty()) pane.model->set_fold(fold);
      } catch (const std::exception& e) {
        error = e.what();
        pane.loader.reset();
      }
    }
  }
  if (!loaded()) {
    loading_panel(w, h);
    return;
  }
  const std::vector<Canvas> cs = canvas_layout(w, h, n_panes == 2);
  if (!fitted) {
    fitted = true;
    if (initial_range)
      show_range(view, cs[0], initial_range->first, initial_range->second);
    else
      fit(cs);
  }
  if (interactive) handle_input(cs);
  const auto t0 = std::chrono::steady_clock::now();
  for (int p = 0; p < n_panes; ++p) {
    View pv = view;
    pv.scroll_y = panes[p].scroll_y;
    FrameOptions opt;
    if (sel_pane == p) opt.selected_event = sel_event;
    if (hover_pane == p) opt.hovered_event = hover.event;
    if (drag == Drag::range && drag_pane == p) {
      opt.range_x0 = std::min(drag_start.x, ImGui::GetIO().MousePos.x);
      opt.range_x1 = std::max(drag_start.x, ImGui::GetIO().MousePos.x);
    }
    if (n_panes == 2) opt.title = p == 0 ? "A (top)" : "B (bottom)";
    panes[p].get()->build_frame(pv, cs[p], opt, panes[p].list);
  }
  build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ImDrawList* bg = ImGui::GetBackgroundDrawList();
  for (int p = 0; p < n_panes; ++p) render_list(panes[p].list, bg);
  toolbar(w);
  side_panel(w, h);
  if (interactive) tooltip();
}

}  // namespace ctwin::viz::gl
