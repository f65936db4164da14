// Utilization: the whole-run overview the minimap shows, the per-group busy-time grid the
// summary row of a collapsed group reads when zoomed out, and drawing both.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::build_overview() {
  const auto nl = static_cast<std::uint32_t>(trace_.lanes.size());
  overview_.assign(kMinimapBins, 0.f);
  std::uint32_t busy_lanes = 0;
  const double span = static_cast<double>(end_ps_ - begin_ps_);
  for (std::uint32_t l = 0; l < nl; ++l) {
    if (lane_begin_[l + 1] == lane_begin_[l]) continue;
    ++busy_lanes;
    double prev = busy_before(l, static_cast<double>(begin_ps_));
    for (int b = 0; b < kMinimapBins; ++b) {
      const double t = static_cast<double>(begin_ps_) + span * (b + 1) / kMinimapBins;
      const double cur = busy_before(l, t);
      overview_[b] += static_cast<float>((cur - prev) / (span / kMinimapBins));
      prev = cur;
    }
  }
  if (busy_lanes) {
    for (auto& v : overview_) v = std::clamp(v / static_cast<float>(busy_lanes), 0.f, 1.f);
  }
}

void TimelineModel::build_utilization_grid() {
  const auto& ev = trace_.events;
  const double span = static_cast<double>(end_ps_ - begin_ps_);
  // Per-group busy time on a fixed grid (a prefix sum), for utilization lanes at low zoom.
  summary_bins_ = static_cast<std::size_t>(
      std::clamp<std::size_t>((std::size_t{1} << 24) / std::max<std::size_t>(1, groups_.size()), 1024, 262144));
  bin_ps_ = span / static_cast<double>(summary_bins_);
  group_busy_.assign(groups_.size(), std::vector<double>(summary_bins_ + 1, 0.0));
  for (std::size_t i = 0; i < ev.size(); ++i) {
    auto& bins = group_busy_[lane_group_[ev[i].lane]];
    const double s = static_cast<double>(ev[i].start_ps - begin_ps_) / bin_ps_;
    const double f = static_cast<double>(ev[i].start_ps + ev[i].dur_ps - begin_ps_) / bin_ps_;
    const auto b0 = static_cast<std::size_t>(std::min(s, static_cast<double>(summary_bins_ - 1)));
    const auto b1 = static_cast<std::size_t>(std::min(f, static_cast<double>(summary_bins_ - 1)));
    if (b0 == b1) {
      bins[b0 + 1] += (f - s) * bin_ps_;
      continue;
    }
    bins[b0 + 1] += (static_cast<double>(b0 + 1) - s) * bin_ps_;
    for (std::size_t b = b0 + 1; b < b1; ++b) bins[b + 1] += bin_ps_;
    bins[b1 + 1] += (f - static_cast<double>(b1)) * bin_ps_;
  }
  for (auto& bins : group_busy_) {
    for (std::size_t b = 1; b <= summary_bins_; ++b) bins[b] += bins[b - 1];
  }
}

void TimelineModel::build_summary(const Group& g, std::uint32_t gi, float y, const View& v, const Canvas& c,
                                  DrawList& out) const {
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float top = rows_top(c), bottom = rows_bottom(c);
  const float ybase = std::min(y + kLaneHeight, bottom);
  if (ybase <= std::max(y, top) || g.lanes.empty()) return;
  // Busy time of each lane at the left edge of the current column, carried to the next.
  scratch_.resize(g.lanes.size());
  cursors_.resize(g.lanes.size());
  double ta = v.time_at(c, xl);
  for (std::size_t k = 0; k < g.lanes.size() && kSummaryColumnPx * v.ps_per_px < 16 * bin_ps_; ++k) {
    const auto [first, last] = visible_range(g.lanes[k], ta, ta);
    cursors_[k] = first;
    scratch_[k] = busy_before(g.lanes[k], ta, cursors_[k]);
  }
  float run_x0 = xl, run_h = -1;
  auto flush = [&](float x_end) {
    if (run_h > 0) {
      out.rects.push_back(DrawRect{run_x0, std::max(ybase - run_h, top), x_end, ybase, palette::kSummaryFill,
                                   ItemKind::summary, true, kNoIndex, 0, gi});
    }
  };
  const double lanes = static_cast<double>(g.lanes.size());
  // Zoomed out (a column spans 16 grid bins or more) the precomputed grid answers in O(1)
  // per column, interpolating inside a bin; zoomed in, the lanes are swept exactly.
  const bool use_grid = kSummaryColumnPx * v.ps_per_px >= 16 * bin_ps_;
  const auto& grid = group_busy_[gi];
  auto grid_busy = [&](double t) {
    const double x =
        std::clamp((t - static_cast<double>(begin_ps_)) / bin_ps_, 0.0, static_cast<double>(summary_bins_));
    const auto i = std::min(static_cast<std::size_t>(x), summary_bins_ - 1);
    return grid[i] + (x - static_cast<double>(i)) * (grid[i + 1] - grid[i]);
  };
  double grid_prev = use_grid ? grid_busy(ta) : 0;
  for (float x = xl; x < xr; x += kSummaryColumnPx) {
    const float xn = std::min(x + kSummaryColumnPx, xr);
    const double tb = v.time_at(c, xn);
    double busy = 0;
    if (use_grid) {
      const double cur = grid_busy(tb);
      busy = cur - grid_prev;
      grid_prev = cur;
    } else {
      for (std::size_t k = 0; k < g.lanes.size(); ++k) {
        const double cur = busy_before(g.lanes[k], tb, cursors_[k]);
        busy += cur - scratch_[k];
        scratch_[k] = cur;
      }
    }
    const double util = std::clamp(busy / (lanes * (tb - ta)), 0.0, 1.0);
    const float h = std::round(static_cast<float>(util) * kLaneHeight);
    if (h != run_h) {
      flush(x);
      run_x0 = x;
      run_h = h;
    }
    ta = tb;
  }
  flush(xr);
}

void TimelineModel::build_minimap(const View& v, const Canvas& c, DrawList& out) const {
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float y0 = rows_bottom(c), y1 = c.y + c.h;
  out.rects.push_back(DrawRect{c.x, y0, xr, y1, palette::kAxisBackground, ItemKind::minimap});
  out.add_text(c.x + 4, y0 + 11, palette::kDimText, c.x, xl, "overview");
  const float w = xr - xl, h = y1 - y0 - 6;
  constexpr float kColumn = 2;
  float run_x0 = xl, run_h = -1;
  auto flush = [&](float x_end) {
    if (run_h > 0) {
      out.rects.push_back(DrawRect{run_x0, y1 - 3 - run_h, x_end, y1 - 3, palette::kMinimapFill, ItemKind::minimap});
    }
  };
  for (float x = xl; x < xr; x += kColumn) {
    const int b0 = static_cast<int>((x - xl) / w * kMinimapBins);
    const int b1 = std::max(b0 + 1, static_cast<int>((x + kColumn - xl) / w * kMinimapBins));
    float u = 0;
    for (int bb = b0; bb < b1 && bb < kMinimapBins; ++bb) u = std::max(u, overview_[bb]);
    const float hh = std::round(u * h);
    if (hh != run_h) {
      flush(x);
      run_x0 = x;
      run_h = hh;
    }
  }
  flush(xr);
  const float wx0 = std::clamp(minimap_x_at(c, v.t0_ps), xl, xr);
  const float wx1 = std::clamp(minimap_x_at(c, v.t1_ps(c)), xl, xr);
  out.rects.push_back(
      DrawRect{wx0, y0 + 1, std::max(wx1, wx0 + 2), y1 - 1, palette::kMinimapWindow, ItemKind::minimap});
  out.rects.push_back(DrawRect{wx0, y0 + 1, std::max(wx1, wx0 + 2), y1 - 1, palette::kText, ItemKind::minimap, false});
}

double TimelineModel::minimap_time_at(const Canvas& c, float x) const {
  const double f = (x - c.x - kLabelWidth) / std::max(1.0f, c.w - kLabelWidth);
  return static_cast<double>(begin_ps_) + f * static_cast<double>(end_ps_ - begin_ps_);
}

float TimelineModel::minimap_x_at(const Canvas& c, double t) const {
  const double f = (t - static_cast<double>(begin_ps_)) / static_cast<double>(end_ps_ - begin_ps_);
  return static_cast<float>(c.x + kLabelWidth + f * std::max(1.0f, c.w - kLabelWidth));
}

}  // namespace ctwin::viz
