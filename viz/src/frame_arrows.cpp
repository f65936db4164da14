// Drawing the dependency arrows between lanes, all of them or, when crowded, only those of
// the selected and hovered ops.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::build_arrows(const View& v, const Canvas& c, const FrameOptions& opt, DrawList& out) const {
  constexpr std::size_t kMaxScanned = 50000;
  const auto& arrows = trace_.arrows;
  if (arrows.empty()) return;
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float top = rows_top(c), bottom = rows_bottom(c);
  const double t0 = v.t0_ps, t1 = v.t1_ps(c);
  const auto first = std::partition_point(arrows.begin(), arrows.end(), [&](const TraceArrow& a) {
    return static_cast<double>(a.from_ps) < t0 - static_cast<double>(arrow_max_span_);
  });
  // An arrow is drawn when both ends are on screen, in rows of different lanes.
  auto place = [&](const TraceArrow& a, DrawLine& l) {
    if (std::max(a.from_ps, a.to_ps) < t0) return false;
    const std::uint32_t rf = lane_row_[a.from_lane], rt = lane_row_[a.to_lane];
    if (rf == rt || rf == kNoIndex || rt == kNoIndex) return false;
    l.y0 = row_y(v, c, rf) + kLaneHeight / 2;
    l.y1 = row_y(v, c, rt) + kLaneHeight / 2;
    l.x0 = v.x_at(c, static_cast<double>(a.from_ps));
    l.x1 = v.x_at(c, static_cast<double>(a.to_ps));
    return l.y0 >= top && l.y0 <= bottom && l.y1 >= top && l.y1 <= bottom && l.x0 >= xl && l.x0 <= xr && l.x1 >= xl &&
           l.x1 <= xr;
  };
  std::size_t visible = 0, scanned = 0;
  DrawLine l{0, 0, 0, 0, palette::kArrow, 1.2f, true};
  for (auto it = first; it != arrows.end() && static_cast<double>(it->from_ps) <= t1 && scanned < kMaxScanned;
       ++it, ++scanned) {
    visible += place(*it, l);
  }
  // Crowded (more than kArrowBudget on screen): only the arrows of the selected or hovered op.
  const bool crowded = visible > kArrowBudget || scanned >= kMaxScanned;
  auto touches = [&](const TraceArrow& a, std::uint32_t ei) {
    if (ei >= trace_.events.size()) return false;
    const auto& e = trace_.events[ei];
    auto within = [&](std::int64_t t) { return t >= e.start_ps && t <= e.start_ps + e.dur_ps; };
    return (a.from_lane == e.lane && within(a.from_ps)) || (a.to_lane == e.lane && within(a.to_ps));
  };
  if (crowded && opt.selected_event == kNoIndex && opt.hovered_event == kNoIndex) return;
  scanned = 0;
  for (auto it = first; it != arrows.end() && static_cast<double>(it->from_ps) <= t1 && scanned < kMaxScanned;
       ++it, ++scanned) {
    if (crowded && !touches(*it, opt.selected_event) && !touches(*it, opt.hovered_event)) continue;
    if (place(*it, l)) out.lines.push_back(l);
  }
}

}  // namespace ctwin::viz
