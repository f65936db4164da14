// The per-lane index of a trace: validation, (lane, start) order, lane offsets, longest event
// and busy-time prefix sums; and the queries on it: a lane's events, the visible range, and
// busy time before a point.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>

#include "lane_search.hpp"
#include "sim/error.hpp"
#include "viz/timeline_model.hpp"

namespace ctwin::viz {

void TimelineModel::index_events(const ProgressFn& report) {
  auto& ev = trace_.events;
  const auto nl = static_cast<std::uint32_t>(trace_.lanes.size());
  const auto ns = static_cast<std::uint32_t>(trace_.strings.size());
  report(0, "checking order");
  bool sorted = true;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (e.lane >= nl || e.name >= ns || e.kind >= ns) {
      throw InputError("", "/events/" + std::to_string(i), "refers to a lane or string that the trace does not have");
    }
    if (e.dur_ps < 0) throw InputError("", "/events/" + std::to_string(i), "negative duration");
    if (i && std::tie(ev[i - 1].lane, ev[i - 1].start_ps) > std::tie(e.lane, e.start_ps)) sorted = false;
  }
  for (const auto& a : trace_.arrows) {
    if (a.from_lane >= nl || a.to_lane >= nl) throw InputError("", "/arrows", "arrow refers to a lane out of range");
  }
  const bool arrows_sorted =
      std::is_sorted(trace_.arrows.begin(), trace_.arrows.end(),
                     [](const TraceArrow& a, const TraceArrow& b) { return a.from_ps < b.from_ps; });
  if (!sorted || !arrows_sorted) {
    report(0.1, "sorting events");
    canonicalize(trace_);
  }
  report(0.4, "indexing lanes");
  lane_begin_.assign(nl + 1, 0);
  lane_max_dur_.assign(nl, 0);
  busy_prefix_.resize(ev.size() + 1);
  busy_prefix_[0] = 0;
  std::vector<std::uint8_t> kind_seen(ns, 0);
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    ++lane_begin_[e.lane + 1];
    lane_max_dur_[e.lane] = std::max(lane_max_dur_[e.lane], e.dur_ps);
    busy_prefix_[i + 1] = busy_prefix_[i] + e.dur_ps;
    lo = std::min(lo, e.start_ps);
    hi = std::max(hi, e.start_ps + e.dur_ps);
    if (!kind_seen[e.kind]) {
      kind_seen[e.kind] = 1;
      kinds_.push_back(e.kind);
    }
  }
  for (std::uint32_t l = 0; l < nl; ++l) lane_begin_[l + 1] += lane_begin_[l];
  for (const auto& c : trace_.counters) {
    if (c.process >= ns || c.name >= ns) throw InputError("", "/counters", "refers to a string out of range");
    if (!c.samples.empty()) {
      lo = std::min(lo, c.samples.front().first);
      hi = std::max(hi, c.samples.back().first);
    }
  }
  if (lo > hi) lo = 0, hi = 1'000'000;  // nothing ran: show one microsecond
  if (hi <= lo) hi = lo + 1000;
  begin_ps_ = lo;
  end_ps_ = hi;
  kind_colors_.resize(ns);
  for (std::uint32_t s = 0; s < ns; ++s) kind_colors_[s] = kind_color(trace_.strings[s]);
  for (const auto& a : trace_.arrows) arrow_max_span_ = std::max(arrow_max_span_, std::abs(a.to_ps - a.from_ps));
}

std::span<const TraceEvent> TimelineModel::lane_events(std::uint32_t lane) const {
  return std::span<const TraceEvent>(trace_.events.data() + lane_begin_[lane],
                                     lane_begin_[lane + 1] - lane_begin_[lane]);
}

std::pair<std::size_t, std::size_t> TimelineModel::visible_range(std::uint32_t lane, double t0, double t1) const {
  const auto& ev = trace_.events;
  const std::size_t a0 = lane_begin_[lane], b0 = lane_begin_[lane + 1];
  // Nothing starting before t0 - (longest event) can reach t0.
  std::size_t a = first_starting_at(ev, a0, b0, t0 - static_cast<double>(lane_max_dur_[lane]));
  const std::size_t b = first_starting_at(ev, a, b0, t1);
  while (a < b && static_cast<double>(ev[a].start_ps + ev[a].dur_ps) <= t0 && ev[a].start_ps < t0) ++a;
  return {a, b};
}

double TimelineModel::busy_before(std::uint32_t lane, double t) const {
  std::size_t cursor = lane_begin_[lane];
  return busy_before(lane, t, cursor);
}

double TimelineModel::busy_before(std::uint32_t lane, double t, std::size_t& cursor) const {
  const auto& ev = trace_.events;
  const std::size_t a = lane_begin_[lane];
  const std::size_t k = first_starting_at_from(ev, cursor, lane_begin_[lane + 1], t);
  double busy = static_cast<double>(busy_prefix_[k] - busy_prefix_[a]);
  if (k > a) {
    const double over = static_cast<double>(ev[k - 1].start_ps + ev[k - 1].dur_ps) - t;
    if (over > 0) busy -= over;
  }
  return busy;
}

}  // namespace ctwin::viz
