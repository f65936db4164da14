// Assembling a frame: backgrounds, grid, the rows' contents (frame_lanes.cpp,
// utilization.cpp, frame_counters.cpp, frame_arrows.cpp), labels, the time axis, the minimap
// and the selection, hover and drag overlays.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::build_frame(const View& v, const Canvas& c, const FrameOptions& opt, DrawList& out) const {
  out.clear();
  const float xl = c.x + kLabelWidth, xr = c.x + c.w;
  const float top = rows_top(c), bottom = rows_bottom(c);
  out.rects.push_back(DrawRect{c.x, c.y, xr, c.y + c.h, palette::kBackground, ItemKind::background});

  // Visible rows: binary search the first, stop past the bottom.
  const float ry0 = v.scroll_y;
  auto first = std::partition_point(rows_.begin(), rows_.end(), [ry0](const Row& r) { return r.y + r.h <= ry0; });
  const auto row_begin = static_cast<std::uint32_t>(first - rows_.begin());
  std::uint32_t row_end = row_begin;
  while (row_end < rows_.size() && row_y(v, c, row_end) < bottom) ++row_end;

  for (std::uint32_t r = row_begin; r < row_end; ++r) {
    const Row& row = rows_[r];
    const float y = row_y(v, c, r);
    const float y0 = std::max(y, top);
    if (row.kind == RowKind::group_header) {
      out.rects.push_back(DrawRect{c.x, y0, xr, std::min(bottom, y + kGroupHeaderHeight), palette::kGroupHeader,
                                   ItemKind::group_header, true, kNoIndex, 0, row.index});
    } else {
      const float h = row.kind == RowKind::counter ? kCounterHeight : kLaneHeight;
      out.rects.push_back(
          DrawRect{xl, y0, xr, std::min(bottom, y + h), palette::kLaneBackground, ItemKind::background});
    }
  }

  // Grid lines at the axis ticks, under the events.
  const double t0 = v.t0_ps, t1 = v.t1_ps(c);
  // Tick step: the smallest nice step (axis_tick_step_ps) at least 90 pixels apart.
  const double step = axis_tick_step_ps(90 * v.ps_per_px);
  const double first_tick = std::ceil(t0 / step) * step;
  for (double t = first_tick; t <= t1; t += step) {
    const float x = std::floor(v.x_at(c, t));
    out.rects.push_back(DrawRect{x, top, x + 1, bottom, palette::kGrid, ItemKind::background});
  }

  for (std::uint32_t r = row_begin; r < row_end; ++r) {
    const Row& row = rows_[r];
    const float y = row_y(v, c, r);
    if (row.kind == RowKind::lane)
      build_lane(row.index, y, v, c, out);
    else if (row.kind == RowKind::summary)
      build_summary(groups_[row.index], row.index, y, v, c, out);
    else if (row.kind == RowKind::counter && opt.counters)
      build_counter(row.index, y, v, c, out);
  }
  if (opt.arrows) build_arrows(v, c, opt, out);

  // Label column over everything on the left; then names.
  out.rects.push_back(DrawRect{c.x, top, xl, bottom, palette::kLabelBackground, ItemKind::background});
  for (std::uint32_t r = row_begin; r < row_end; ++r) {
    const Row& row = rows_[r];
    const float y = row_y(v, c, r);
    if (row.kind == RowKind::group_header) {
      out.rects.push_back(DrawRect{c.x, std::max(y, top), xl, std::min(bottom, y + kGroupHeaderHeight),
                                   palette::kGroupHeader, ItemKind::group_header, true, kNoIndex, 0, row.index});
    }
    if (y < top || y + 14 > bottom) continue;
    if (row.kind == RowKind::group_header) {
      out.add_text(c.x + 4, y + 3, palette::kText, c.x, xr, groups_[row.index].collapsed ? "[+]" : "[-]");
      out.add_text(c.x + 30, y + 3, palette::kText, c.x, xr, group_labels_[row.index]);
    } else if (row.kind == RowKind::lane) {
      out.add_text(c.x + 12, y + 2, palette::kText, c.x, xl - 2, lane_labels_[row.index]);
    } else if (row.kind == RowKind::summary) {
      out.add_text(c.x + 12, y + 2, palette::kDimText, c.x, xl - 2, "utilization");
    } else {
      out.add_text(c.x + 12, y + 2, palette::kDimText, c.x, xl - 2, counter_labels_[row.index]);
    }
  }

  // Axis on top.
  out.rects.push_back(DrawRect{c.x, c.y, xr, c.y + kAxisHeight, palette::kAxisBackground, ItemKind::axis});
  // Tick labels in the unit of the step (clock time from a minute up).
  char buf[64];
  for (double t = first_tick; t <= t1; t += step) {
    const float x = std::floor(v.x_at(c, t));
    out.rects.push_back(DrawRect{x, c.y + kAxisHeight - 7, x + 1, c.y + kAxisHeight, palette::kText, ItemKind::axis});
    const std::size_t n = axis_tick_label(t, step, buf, sizeof buf);
    out.add_text(x + 3, c.y + 4, palette::kText, xl, xr, std::string_view(buf, n));
  }
  if (!opt.title.empty()) {
    out.add_text(c.x + 4, c.y + 4, palette::kText, c.x, xl - 2, opt.title);
  } else {
    int n = std::snprintf(buf, sizeof buf, "view ");
    n += static_cast<int>(format_time(t1 - t0, buf + n, sizeof buf - static_cast<std::size_t>(n)));
    out.add_text(c.x + 4, c.y + 4, palette::kDimText, c.x, xl, std::string_view(buf, static_cast<std::size_t>(n)));
  }

  if (opt.minimap) build_minimap(v, c, out);

  // Overlays: drag-selection, hovered and selected event outlines.
  if (opt.range_x1 > opt.range_x0) {
    out.rects.push_back(DrawRect{std::max(opt.range_x0, xl), top, std::min(opt.range_x1, xr), bottom,
                                 palette::kRangeSelect, ItemKind::overlay});
  }
  auto outline = [&](std::uint32_t ei, std::uint32_t color) {
    if (ei >= trace_.events.size()) return;
    const auto& e = trace_.events[ei];
    const std::uint32_t r = lane_row_[e.lane];
    if (r == kNoIndex || rows_[r].kind != RowKind::lane) return;
    const float y = row_y(v, c, r);
    if (y < top || y + kLaneHeight > bottom) return;
    float x0 = v.x_at(c, static_cast<double>(e.start_ps));
    float x1 = std::max(x0 + 1, v.x_at(c, static_cast<double>(e.start_ps + e.dur_ps)));
    if (x1 < xl || x0 > xr) return;
    out.rects.push_back(
        DrawRect{std::max(x0, xl), y, std::min(x1, xr), y + kLaneHeight, color, ItemKind::overlay, false, ei, 1});
  };
  outline(opt.hovered_event, palette::kHover);
  outline(opt.selected_event, palette::kSelection);
}

}  // namespace ctwin::viz
