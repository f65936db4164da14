// Lanes into groups (TraceLane::group, in order of first appearance) with their counter
// tracks and labels, and the rows those groups are drawn in as they are folded and unfolded.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::group_lanes() {
  const auto nl = static_cast<std::uint32_t>(trace_.lanes.size());
  // Groups in order of first appearance; counters join the group of their process.
  std::unordered_map<std::uint32_t, std::uint32_t> group_of_name;
  lane_group_.resize(nl);
  for (std::uint32_t l = 0; l < nl; ++l) {
    auto [it, fresh] = group_of_name.emplace(trace_.lanes[l].group, static_cast<std::uint32_t>(groups_.size()));
    if (fresh) groups_.push_back(Group{trace_.lanes[l].group, {}, {}, false});
    groups_[it->second].lanes.push_back(l);
    lane_group_[l] = it->second;
  }
  counter_max_.resize(trace_.counters.size());
  for (std::uint32_t ci = 0; ci < trace_.counters.size(); ++ci) {
    const auto& c = trace_.counters[ci];
    double m = 0;
    for (const auto& s : c.samples) m = std::max(m, s.second);
    counter_max_[ci] = m;
    std::uint32_t g = kNoIndex;
    for (std::uint32_t l = 0; l < nl && g == kNoIndex; ++l) {
      if (trace_.lanes[l].process == c.process) g = lane_group_[l];
    }
    if (g == kNoIndex) {
      const std::uint32_t name = trace_.intern("counters");
      auto [it, fresh] = group_of_name.emplace(name, static_cast<std::uint32_t>(groups_.size()));
      if (fresh) groups_.push_back(Group{name, {}, {}, false});
      g = it->second;
    }
    groups_[g].counters.push_back(ci);
  }

  // Labels, once: drawing copies them into the frame's reused text buffer.
  for (std::uint32_t l = 0; l < nl; ++l) {
    const auto& ln = trace_.lanes[l];
    const std::string& th = trace_.str(ln.thread);
    lane_labels_.push_back(th.empty() ? trace_.str(ln.process) : trace_.str(ln.process) + " / " + th);
  }
  for (std::uint32_t g = 0; g < groups_.size(); ++g) {
    const std::string& n = trace_.str(groups_[g].name);
    group_labels_.push_back((n.empty() ? std::string("(ungrouped)") : n) + "  (" +
                            std::to_string(groups_[g].lanes.size()) + " lanes)");
  }
  for (std::uint32_t ci = 0; ci < trace_.counters.size(); ++ci) {
    const auto& c = trace_.counters[ci];
    const std::string& name = trace_.str(c.name);
    const bool bytes = name.find("bytes") != std::string::npos || name.find("memory") != std::string::npos;
    char value[48];
    std::snprintf(value, sizeof value, "%.4g", counter_max_[ci]);
    std::string shown = name;
    if (shown == "memory_bytes") shown = "memory";
    counter_labels_.push_back(trace_.str(c.process) + " " + shown);
    counter_max_labels_.push_back("max " + (bytes ? format_bytes(counter_max_[ci]) : std::string(value)));
  }
}

void TimelineModel::layout() {
  rows_.clear();
  lane_row_.assign(trace_.lanes.size(), kNoIndex);
  float y = 0;
  auto add = [&](RowKind k, std::uint32_t i, float h) {
    rows_.push_back(Row{k, i, y, h});
    y += h;
    return static_cast<std::uint32_t>(rows_.size() - 1);
  };
  for (std::uint32_t g = 0; g < groups_.size(); ++g) {
    const Group& grp = groups_[g];
    add(RowKind::group_header, g, kGroupHeaderHeight);
    if (grp.collapsed) {
      auto r = add(RowKind::summary, g, kLanePitch);
      for (auto l : grp.lanes) lane_row_[l] = r;
      continue;
    }
    std::vector<std::uint8_t> counter_done(grp.counters.size(), 0);
    for (std::size_t k = 0; k < grp.lanes.size(); ++k) {
      const auto l = grp.lanes[k];
      lane_row_[l] = add(RowKind::lane, l, kLanePitch);
      const auto proc = trace_.lanes[l].process;
      const bool last_of_process = k + 1 == grp.lanes.size() || trace_.lanes[grp.lanes[k + 1]].process != proc;
      if (!last_of_process) continue;
      for (std::size_t c = 0; c < grp.counters.size(); ++c) {
        if (!counter_done[c] && trace_.counters[grp.counters[c]].process == proc) {
          counter_done[c] = 1;
          add(RowKind::counter, grp.counters[c], kCounterPitch);
        }
      }
    }
    for (std::size_t c = 0; c < grp.counters.size(); ++c) {
      if (!counter_done[c]) add(RowKind::counter, grp.counters[c], kCounterPitch);
    }
  }
  content_height_ = y;
}

void TimelineModel::set_collapsed(std::uint32_t group, bool collapsed) {
  if (group >= groups_.size() || groups_[group].collapsed == collapsed) return;
  groups_[group].collapsed = collapsed;
  layout();
}

void TimelineModel::set_all_collapsed(bool collapsed) {
  for (auto& g : groups_) g.collapsed = collapsed;
  layout();
}

float TimelineModel::row_y(const View& v, const Canvas& c, std::uint32_t row) const {
  return rows_top(c) + rows_[row].y - v.scroll_y;
}

const Row* TimelineModel::row_at(const View& v, const Canvas& c, float y) const {
  if (y < rows_top(c) || y >= rows_bottom(c)) return nullptr;
  const float ry = y - rows_top(c) + v.scroll_y;
  auto it = std::partition_point(rows_.begin(), rows_.end(), [ry](const Row& r) { return r.y + r.h <= ry; });
  if (it == rows_.end() || ry < it->y) return nullptr;
  return &*it;
}

}  // namespace ctwin::viz
