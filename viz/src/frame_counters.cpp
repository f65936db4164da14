// Drawing a counter track (memory per GPU) as bars of the column maximum.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::build_counter(std::uint32_t ci, float y, const View& v, const Canvas& c, DrawList& out) const {
  const auto& s = trace_.counters[ci].samples;
  const double maxv = counter_max_[ci];
  if (s.empty() || maxv <= 0) return;
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float top = rows_top(c), bottom = rows_bottom(c);
  const float ybase = std::min(y + kCounterHeight, bottom);
  if (ybase <= std::max(y, top)) return;
  constexpr float kColumn = 2;
  // idx: the last sample at or before the column's left edge (or -1).
  auto last_at_or_before = [&](std::size_t from, double t) {
    std::size_t k = from;
    for (int step = 0; step < 8 && k < s.size() && static_cast<double>(s[k].first) <= t; ++step) ++k;
    if (k < s.size() && static_cast<double>(s[k].first) <= t) {
      k = static_cast<std::size_t>(
          std::partition_point(s.begin() + static_cast<std::ptrdiff_t>(k), s.end(),
                               [t](const auto& p) { return static_cast<double>(p.first) <= t; }) -
          s.begin());
    }
    return k;  // number of samples at or before t
  };
  std::size_t n_before = last_at_or_before(0, v.time_at(c, xl));
  float run_x0 = xl, run_h = -1;
  auto flush = [&](float x_end) {
    if (run_h > 0) {
      out.rects.push_back(DrawRect{run_x0, std::max(ybase - run_h, top), x_end, ybase, palette::kCounterFill,
                                   ItemKind::counter, true, kNoIndex, 0, ci});
    }
  };
  for (float x = xl; x < xr; x += kColumn) {
    const double tb = v.time_at(c, std::min(x + kColumn, xr));
    double value = n_before ? s[n_before - 1].second : 0;
    const std::size_t n_end = last_at_or_before(n_before, tb);
    // Max over the samples inside the column: the first 16, then the last (bounded work).
    for (std::size_t k = n_before; k < n_end && k < n_before + 16; ++k) value = std::max(value, s[k].second);
    if (n_end > n_before) value = std::max(value, s[n_end - 1].second);
    n_before = n_end;
    const float h = std::round(static_cast<float>(std::clamp(value / maxv, 0.0, 1.0)) * (kCounterHeight - 2));
    if (h != run_h) {
      flush(x);
      run_x0 = x;
      run_h = h;
    }
  }
  flush(xr);
  if (y >= top && y + kCounterHeight <= bottom) {
    out.add_text(xl + 4, y + 1, palette::kText, xl, xr, counter_max_labels_[ci]);
  }
}

}  // namespace ctwin::viz
