// Where a trace is drawn on the screen (a Canvas) and which part of it is shown (a View),
// and how the window is divided into canvases.
#pragma once

#include <vector>

#include "viz/layout_metrics.hpp"

namespace ctwin::viz {

struct Canvas {
  float x = 0, y = 0, w = 0, h = 0;
};

struct View {
  double t0_ps = 0;      // time at the left edge of the event area
  double ps_per_px = 1;  // zoom
  float scroll_y = 0;    // pixels of rows scrolled off the top

  double time_at(const Canvas& c, float x) const { return t0_ps + (x - c.x - kLabelWidth) * ps_per_px; }
  float x_at(const Canvas& c, double t_ps) const {
    return static_cast<float>(c.x + kLabelWidth + (t_ps - t0_ps) / ps_per_px);
  }
  // The time shown at the right edge of the event area.
  double t1_ps(const Canvas& c) const { return t0_ps + (c.w - kLabelWidth) * ps_per_px; }
};

// Zoom by `factor` (< 1 zooms in) keeping the time under `x` where it is.
void zoom_around(View& v, const Canvas& c, float x, double factor);
// Show [t0, t1) across the event area.
void show_range(View& v, const Canvas& c, double t0_ps, double t1_ps);

// The canvas rectangles of the window layout (left of the side panel, under the toolbar):
// one trace, or two stacked for --compare.
std::vector<Canvas> canvas_layout(int width, int height, bool compare);

}  // namespace ctwin::viz
