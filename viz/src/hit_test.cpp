// What is under the cursor: the row, and the op (or folded run of ops) at a pixel.
#include <cstdint>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

std::uint32_t TimelineModel::event_at(std::uint32_t lane, double t, double tol) const {
  const auto [a, b] = visible_range(lane, t - tol, t + tol);
  std::uint32_t best = kNoIndex;
  double best_d = 0;
  for (std::size_t i = a; i < b; ++i) {
    const auto& e = trace_.events[i];
    const double s = static_cast<double>(e.start_ps), f = s + static_cast<double>(e.dur_ps);
    const double d = t < s ? s - t : (t > f ? t - f : 0);
    if (d <= tol && (best == kNoIndex || d < best_d || (d == 0 && best_d == 0))) {
      best = static_cast<std::uint32_t>(i);
      best_d = d;
    }
  }
  return best;
}

Hit TimelineModel::hit_test(const View& v, const Canvas& c, float x, float y) const {
  Hit h;
  const Row* r = row_at(v, c, y);
  if (!r) return h;
  h.row_kind = r->kind;
  h.row_index = r->index;
  if (r->kind != RowKind::lane || x < c.x + kLabelWidth || x >= c.x + c.w) return h;
  if (y - row_y(v, c, static_cast<std::uint32_t>(r - rows_.data())) >= kLaneHeight) return h;  // the gap
  const double t = v.time_at(c, x);
  const double tol = kMinVisiblePx * v.ps_per_px;
  h.event = event_at(r->index, t, tol);
  if (h.event != kNoIndex) {
    const auto [a, b] = visible_range(r->index, t - tol, t + tol);
    h.count = static_cast<std::uint32_t>(b - a);
  }
  return h;
}

}  // namespace ctwin::viz
