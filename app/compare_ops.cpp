#include "compare_ops.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace ctwin {

namespace {

bool is_prefix_token(std::string_view tok) {
  // "mb12" or "L3": a letter prefix then at least one digit and nothing else.
  std::size_t i = 0;
  if (tok.starts_with("mb"))
    i = 2;
  else if (tok.starts_with("L"))
    i = 1;
  else
    return false;
  if (i == tok.size()) return false;
  return std::all_of(tok.begin() + static_cast<std::ptrdiff_t>(i), tok.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

using Key = std::pair<std::string, std::string>;  // (group name, kind)

std::map<Key, OpGroupTimes> group_ops(const Trace& t, OpGrouping grouping) {
  std::map<Key, OpGroupTimes> out;
  // Group names are computed once per interned name, not per event.
  std::vector<std::string> group_of(t.strings.size());
  std::vector<bool> done(t.strings.size(), false);
  for (const TraceEvent& e : t.events) {
    const std::string& kind = t.str(e.kind);
    if (grouping == OpGrouping::by_name && !done[e.name]) {
      group_of[e.name] = op_group_name(t.str(e.name));
      done[e.name] = true;
    }
    const TraceLane& lane = t.lanes.at(e.lane);
    OpGroupTimes& g =
        out[Key{grouping == OpGrouping::by_name ? group_of[e.name] : t.str(lane.process) + " " + kind, kind}];
    const double start_s = static_cast<double>(e.start_ps) * 1e-12;
    g.total_s += static_cast<double>(e.dur_ps) * 1e-12;
    ++g.count;
    if (!g.first_s || start_s < *g.first_s) {
      g.first_s = start_s;
      g.first_lane = t.str(lane.process) + " " + t.str(lane.thread);
    }
  }
  return out;
}

}  // namespace

std::string op_group_name(std::string_view event_name) {
  std::string_view rest = event_name;
  while (true) {
    const std::size_t sp = rest.find(' ');
    if (sp == std::string_view::npos || !is_prefix_token(rest.substr(0, sp))) break;
    rest.remove_prefix(sp + 1);
  }
  return std::string(rest);
}

std::vector<OpDiff> op_differences(const Trace& a, const Trace& b, std::size_t top, OpGrouping grouping) {
  const auto ga = group_ops(a, grouping);
  const auto gb = group_ops(b, grouping);
  std::map<Key, OpDiff> all;
  for (const auto& [k, g] : ga) all[k].a = g;
  for (const auto& [k, g] : gb) all[k].b = g;
  std::vector<OpDiff> out;
  for (auto& [k, d] : all) {
    d.name = k.first;
    d.kind = k.second;
    if (d.delta_s() != 0) out.push_back(std::move(d));
  }
  // std::map gave name order; a stable sort keeps it among equal changes.
  std::stable_sort(out.begin(), out.end(),
                   [](const OpDiff& x, const OpDiff& y) { return std::fabs(x.delta_s()) > std::fabs(y.delta_s()); });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace ctwin
