// Lanes into groups (TraceLane::group, in order of first appearance) with their counter
// tracks and labels, and the rows those groups are drawn in as they are folded and unfolded.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

  // A group taller than any screen (a serving trace's request slots: one lane per request in
  // the replica at once) starts collapsed into its utilization row; a click opens it.
  for (auto& g : groups_) g.collapsed = g.lanes.size() > kAutoCollapseLanes;

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
  // Counters of a GPU whose lanes are folded into another's are not drawn either.
  std::vector<std::uint8_t> proc_hidden(trace_.strings.size(), 0);
  for (std::uint32_t l = 0; l < trace_.lanes.size(); ++l) {
    if (fold_count(l) == 0) proc_hidden[trace_.lanes[l].process] = 1;
  }
  for (std::uint32_t g = 0; g < groups_.size(); ++g) {
    const Group& grp = groups_[g];
    add(RowKind::group_header, g, kGroupHeaderHeight);
    if (grp.collapsed) {
      auto r = add(RowKind::summary, g, kLanePitch);
      for (auto l : grp.lanes) lane_row_[l] = r;
      continue;
    }
    std::vector<std::uint8_t> counter_done(grp.counters.size(), 0);
    for (std::size_t c = 0; c < grp.counters.size(); ++c)
      counter_done[c] = proc_hidden[trace_.counters[grp.counters[c]].process];
    for (std::size_t k = 0; k < grp.lanes.size(); ++k) {
      const auto l = grp.lanes[k];
      if (fold_count(l) != 0) lane_row_[l] = add(RowKind::lane, l, kLanePitch);
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
  for (std::uint32_t l = 0; l < fold_rep_.size(); ++l) {
    if (lane_row_[l] == kNoIndex) lane_row_[l] = lane_row_[fold_rep_[l]];
  }
  content_height_ = y;
}

bool parse_fold_dims(std::string_view list, std::vector<std::string>& out, std::string& bad) {
  std::vector<std::string> dims;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string d(list.substr(at, comma - at));
    if (d != "tp" && d != "pp" && d != "dp" && d != "cp" && d != "ep" && d != "none") {
      bad = d;
      return false;
    }
    if (d != "none") dims.push_back(d);
    at = comma + 1;
  }
  out.insert(out.end(), dims.begin(), dims.end());
  return true;
}

std::size_t TimelineModel::set_fold(std::span<const std::string> dims) {
  const auto nl = static_cast<std::uint32_t>(trace_.lanes.size());
  fold_count_.clear();
  fold_rep_.clear();
  auto figure = [&](std::string_view key) {
    for (const auto& [k, v] : trace_.summary) {
      if (k == key) return static_cast<std::int64_t>(v);
    }
    return std::int64_t{0};
  };
  // The rank's coordinate in each dimension: (rank / stride) % size; EP is carved from
  // consecutive DP ranks, so its coordinate is the DP coordinate modulo the EP size.
  static constexpr std::array<std::string_view, 4> kDims{"tp", "cp", "dp", "pp"};
  std::array<std::int64_t, 4> size{}, stride{};
  bool layout_known = true;
  for (std::size_t d = 0; d < kDims.size(); ++d) {
    size[d] = figure(std::string(kDims[d]) + "_size");
    stride[d] = figure(std::string(kDims[d]) + "_stride");
    layout_known = layout_known && size[d] > 0 && stride[d] > 0;
  }
  const std::int64_t ep = std::max<std::int64_t>(1, figure("ep_size"));
  auto folds = [&](std::string_view d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  std::size_t hidden = 0;
  if (layout_known && !dims.empty()) {
    // Key: the stream (thread) and the coordinates with the folded ones zeroed.
    std::map<std::array<std::int64_t, 6>, std::vector<std::uint32_t>> classes;
    std::vector<std::uint8_t> is_rep(nl, 0);
    for (std::uint32_t l = 0; l < nl; ++l) {
      std::array<std::int64_t, 6> key{};
      key[0] = trace_.lanes[l].thread;
      bool rep = true;
      for (std::size_t d = 0; d < kDims.size(); ++d) {
        std::int64_t c = (static_cast<std::int64_t>(trace_.lanes[l].pid) / stride[d]) % size[d];
        if (kDims[d] == "dp" && !folds("dp") && folds("ep")) {
          rep = rep && c % ep == 0;
          c -= c % ep;
        } else if (folds(kDims[d])) {
          rep = rep && c == 0;
          c = 0;
        }
        key[1 + d] = c;
      }
      is_rep[l] = rep ? 1 : 0;
      classes[key].push_back(l);
    }
    fold_count_.assign(nl, 0);
    fold_rep_.resize(nl);
    for (const auto& [key, lanes] : classes) {
      auto it = std::find_if(lanes.begin(), lanes.end(), [&](std::uint32_t l) { return is_rep[l] != 0; });
      const std::uint32_t rep = it == lanes.end() ? lanes.front() : *it;
      for (auto l : lanes) fold_rep_[l] = rep;
      fold_count_[rep] = static_cast<std::uint32_t>(lanes.size());
      hidden += lanes.size() - 1;
    }
  }
  for (std::uint32_t l = 0; l < nl; ++l) {
    const auto& ln = trace_.lanes[l];
    const std::string& th = trace_.str(ln.thread);
    std::string label = th.empty() ? trace_.str(ln.process) : trace_.str(ln.process) + " / " + th;
    if (fold_count(l) > 1) label += "  x" + std::to_string(fold_count(l));
    lane_labels_[l] = std::move(label);
  }
  layout();
  return hidden;
}

std::size_t TimelineModel::visible_lanes() const {
  std::size_t n = 0;
  for (std::uint32_t l = 0; l < trace_.lanes.size(); ++l) n += fold_count(l) != 0 ? 1 : 0;
  return n;
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
