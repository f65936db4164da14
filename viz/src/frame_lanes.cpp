// Drawing a lane's events: the visible range, and runs of events too narrow to see folded
// into one item, drawn as a stacked bar of their kinds' time shares. Communication ops are
// faded where compute overlaps them and saturated, with a red band on top, where exposed.
#include <algorithm>
#include <cstdint>

#include "color_ops.hpp"
#include "lane_search.hpp"
#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::build_lane(std::uint32_t lane, float y, const View& v, const Canvas& c, DrawList& out) const {
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float top = rows_top(c), bottom = rows_bottom(c);
  const float y0 = std::max(y, top), y1 = std::min(y + kLaneHeight, bottom);
  if (y1 <= y0) return;
  const bool text_ok = y >= top && y + kLaneHeight <= bottom;
  const bool searching = !search_.empty();
  const auto& ev = trace_.events;
  const double t0 = v.t0_ps, t1 = v.t1_ps(c);
  auto [i, b] = visible_range(lane, t0, t1);
  auto xs = [&](const TraceEvent& e) { return v.x_at(c, static_cast<double>(e.start_ps)); };
  auto xe = [&](const TraceEvent& e) { return v.x_at(c, static_cast<double>(e.start_ps + e.dur_ps)); };
  auto color = [&](const TraceEvent& e) {
    std::uint32_t col = kind_colors_[e.kind];
    if (searching && !name_match_[e.name]) col = blend(col, palette::kLaneBackground, 0.7f);
    return col;
  };
  while (i < b) {
    const TraceEvent& e = ev[i];
    const float x0 = xs(e), x1 = xe(e);
    if (x1 - x0 >= kMinVisiblePx) {
      const float cx0 = std::max(x0, xl), cx1 = std::min(x1, xr);
      const auto idx = static_cast<std::uint32_t>(i);
      if (is_comm(e)) {
        // Communication: the whole op faded (overlapped), its exposed parts saturated with a
        // red band along the top.
        out.rects.push_back(DrawRect{cx0, y0, cx1, y1, fade(color(e)), ItemKind::event, true, idx, 1, lane});
        parts_.clear();
        exposed_parts(idx, parts_);
        for (const auto& [pa, pb] : parts_) {
          const float px0 = std::max(static_cast<float>(v.x_at(c, pa)), cx0);
          const float px1 = std::min(static_cast<float>(v.x_at(c, pb)), cx1);
          if (px1 <= px0) continue;
          out.rects.push_back(
              DrawRect{px0, y0, std::max(px1, px0 + 1), y1, color(e), ItemKind::exposed, true, idx, 0, lane});
          const float band = std::min(y0 + kExposedBandPx, y1);
          out.rects.push_back(DrawRect{px0, y0, std::max(px1, px0 + 1), band, palette::kExposedBand, ItemKind::exposed,
                                       true, idx, 0, lane});
        }
      } else {
        out.rects.push_back(DrawRect{cx0, y0, cx1, y1, color(e), ItemKind::event, true, idx, 1, lane});
      }
      if (searching && name_matches(e.name)) {
        out.rects.push_back(DrawRect{cx0, y0, cx1, y1, palette::kSearchHit, ItemKind::overlay, false, idx, 1, lane});
      }
      if (text_ok && cx1 - cx0 >= kLabelMinPx) {
        out.add_text(cx0 + 3, y + 2, rgba(16, 16, 16), cx0 + 1, cx1 - 1, trace_.strings[e.name]);
      }
      ++i;
      continue;
    }
    // A run of narrow events: jump with binary search to the first event that starts at
    // least kMinVisiblePx after the run's end; only the last of the jumped-over events can
    // be wide (events of a lane do not overlap), and it is left out to be drawn on its own.
    const std::size_t first = i;
    float run_x1 = std::max(x1, x0 + 1);
    std::size_t j = i + 1;
    for (;;) {
      std::size_t cursor = j;  // gallop: the answer is usually a few events ahead
      const std::size_t k0 = first_starting_at_from(ev, cursor, b, v.time_at(c, run_x1 + kMinVisiblePx));
      std::size_t k = k0;
      bool wide = false;
      if (k > j && xe(ev[k - 1]) - xs(ev[k - 1]) >= kMinVisiblePx) {
        --k;
        wide = true;
      }
      if (k == j) break;
      run_x1 = std::max(run_x1, xe(ev[k - 1]));
      j = k;
      if (wide || run_x1 >= xr || run_x1 - x0 >= kMaxFoldPx) break;
    }
    const auto count = static_cast<std::uint32_t>(j - first);
    const float cx0 = std::max(x0, xl), cx1 = std::min(run_x1, xr);
    if (count == 1) {
      out.rects.push_back(DrawRect{cx0, y0, std::max(cx1, cx0 + 1), y1, color(e), ItemKind::event, true,
                                   static_cast<std::uint32_t>(first), 1, lane});
    } else {
      // A stacked bar: each kind's summed time over the run's time span, largest at the
      // bottom, so the column reads as a stacked bar of time shares (the rest is idle).
      const auto first_idx = static_cast<std::uint32_t>(first);
      out.rects.push_back(DrawRect{cx0, y0, std::max(cx1, cx0 + 1), y1, palette::kLaneBackground, ItemKind::merged,
                                   true, first_idx, count, lane});
      time_shares(first, j, shares_);
      const double span_ps =
          std::max(1.0, static_cast<double>(ev[j - 1].start_ps + ev[j - 1].dur_ps - ev[first].start_ps));
      const double full = static_cast<double>(kLaneHeight);
      double acc = 0;
      for (const KindShare& k : shares_) {
        const double f = std::min(k.ps / span_ps, 1.0 - acc);
        if (f <= 0) break;
        const auto yb = static_cast<float>(y + full * (1 - acc)), yt = static_cast<float>(y + full * (1 - acc - f));
        acc += f;
        const float sy0 = std::max(yt, y0), sy1 = std::min(yb, y1);
        if (sy1 <= sy0) continue;
        std::uint32_t col = kind_colors_[k.kind];
        if (searching) col = blend(col, palette::kLaneBackground, 0.7f);
        out.rects.push_back(
            DrawRect{cx0, sy0, std::max(cx1, cx0 + 1), sy1, col, ItemKind::share, true, first_idx, 0, k.kind});
      }
    }
    i = j;
  }
}

}  // namespace ctwin::viz
