// Zooming, panning to a range, and the window's division into canvases.
#include "viz/view.hpp"

#include <algorithm>
#include <cmath>

namespace ctwin::viz {

void zoom_around(View& v, const Canvas& c, float x, double factor) {
  const double t = v.time_at(c, x);
  v.ps_per_px = std::clamp(v.ps_per_px * factor, 1e-3, 1e15);
  v.t0_ps = t - (x - c.x - kLabelWidth) * v.ps_per_px;
}

void show_range(View& v, const Canvas& c, double t0_ps, double t1_ps) {
  if (t1_ps <= t0_ps) t1_ps = t0_ps + 1;
  v.t0_ps = t0_ps;
  v.ps_per_px = std::max(1e-3, (t1_ps - t0_ps) / std::max(1.0f, c.w - kLabelWidth));
}

std::vector<Canvas> canvas_layout(int width, int height, bool compare) {
  const float w = std::max(kLabelWidth + 64, static_cast<float>(width) - kSidePanelWidth);
  const float h = std::max(kAxisHeight + kMinimapHeight + 8, static_cast<float>(height) - kToolbarHeight);
  if (!compare) return {Canvas{0, kToolbarHeight, w, h}};
  const float half = std::floor(h / 2);
  return {Canvas{0, kToolbarHeight, w, half}, Canvas{0, kToolbarHeight + half, w, h - half}};
}

}  // namespace ctwin::viz
