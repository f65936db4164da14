// The viewer's state and one frame of UI, shared by the window (viewer_window.cpp) and the
// screenshot path (viewer_offscreen.cpp). Its methods live in viewer_app.cpp (the frame),
// viewer_input.cpp (mouse, keyboard and navigation) and viewer_panels.cpp (toolbar, side
// panel, tooltip, loading panel).
#pragma once

#include <imgui.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "viz/timeline_model.hpp"
#include "viz/trace_loader.hpp"

namespace ctwin::viz::gl {

struct Pane {
  std::string name;
  std::unique_ptr<TraceLoader> loader;
  std::unique_ptr<TimelineModel> model;  // set when loaded
  TimelineModel* borrowed = nullptr;     // the screenshot path renders caller's models
  float scroll_y = 0;
  DrawList list;
  TimelineModel* get() { return borrowed ? borrowed : model.get(); }
};

// The window's state and one frame of UI; shared by the window and the screenshot path.
class App {
 public:
  std::array<Pane, 2> panes;
  int n_panes = 1;
  View view;
  bool fitted = false;
  std::optional<std::pair<double, double>> initial_range;
  std::vector<std::string> fold;  // applied to each model as it finishes loading
  bool interactive = true;
  std::string error;  // a load failure, reported after the window closes

  void frame(int w, int h);

 private:
  int sel_pane = -1;
  std::uint32_t sel_event = kNoIndex;
  int hover_pane = -1;
  Hit hover;
  enum class Drag { none, pan, range, minimap } drag = Drag::none;
  int drag_pane = 0;
  ImVec2 drag_start{};
  double drag_t0 = 0;
  float drag_scroll = 0;
  char search[128] = {};
  bool focus_search = false;
  std::size_t match_count = 0;
  double build_ms = 0;

  bool loaded() {
    for (int p = 0; p < n_panes; ++p) {
      if (!panes[p].get()) return false;
    }
    return true;
  }
  void fit(const std::vector<Canvas>& cs);
  void clamp_scroll(const std::vector<Canvas>& cs);
  void handle_input(const std::vector<Canvas>& cs);
  void jump_to_match(bool forward, const std::vector<Canvas>& cs);
  void toolbar(int w);
  void side_panel(int w, int h);
  void tooltip();
  void loading_panel(int w, int h);
};

}  // namespace ctwin::viz::gl
