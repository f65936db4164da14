#include "viz/timeline_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include "sim/error.hpp"
#include "viz/viewer.hpp"

namespace ctwin::viz {

// ---------------------------------------------------------------- colours
namespace {

struct KindColor {
  std::string_view kind;
  std::uint32_t color;
};

// Compute kinds warm, collectives cool, point-to-point green, housekeeping grey.
constexpr std::array<KindColor, 20> kKindTable{{
    {"gemm", rgba(230, 126, 34)},           {"attention", rgba(231, 76, 60)},   {"elementwise", rgba(241, 196, 15)},
    {"norm", rgba(205, 170, 110)},          {"embedding", rgba(190, 110, 180)}, {"loss", rgba(170, 80, 130)},
    {"optimizer", rgba(155, 89, 182)},      {"all_reduce", rgba(52, 152, 219)}, {"all_gather", rgba(26, 188, 156)},
    {"reduce_scatter", rgba(72, 120, 230)}, {"all_to_all", rgba(0, 170, 210)},  {"broadcast", rgba(100, 180, 255)},
    {"send", rgba(46, 204, 113)},           {"recv", rgba(39, 174, 96)},        {"send_recv", rgba(88, 214, 141)},
    {"memcpy", rgba(149, 165, 166)},        {"prefill", rgba(236, 112, 99)},    {"decode", rgba(93, 173, 226)},
    {"request", rgba(130, 224, 170)},       {"idle", rgba(90, 95, 105)},
}};

constexpr std::array<std::uint32_t, 10> kFallback{
    rgba(255, 159, 128), rgba(128, 222, 234), rgba(197, 225, 165), rgba(255, 204, 128), rgba(179, 157, 219),
    rgba(244, 143, 177), rgba(129, 212, 250), rgba(230, 238, 156), rgba(188, 170, 164), rgba(159, 168, 218),
};

std::uint32_t darken(std::uint32_t c, float f) {
  auto s = [f](std::uint8_t v) { return static_cast<std::uint8_t>(static_cast<float>(v) * f); };
  return rgba(s(red_of(c)), s(green_of(c)), s(blue_of(c)), static_cast<std::uint8_t>(c >> 24));
}

std::uint32_t blend(std::uint32_t a, std::uint32_t b, float t) {
  auto m = [t](std::uint8_t x, std::uint8_t y) {
    return static_cast<std::uint8_t>(std::lround(static_cast<float>(x) * (1 - t) + static_cast<float>(y) * t));
  };
  return rgba(m(red_of(a), red_of(b)), m(green_of(a), green_of(b)), m(blue_of(a), blue_of(b)));
}

std::array<std::string_view, kKindTable.size()> make_known_kinds() {
  std::array<std::string_view, kKindTable.size()> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = kKindTable[i].kind;
  return a;
}
const std::array<std::string_view, kKindTable.size()> kKnownKinds = make_known_kinds();

}  // namespace

std::uint32_t kind_color(std::string_view kind) {
  for (const auto& k : kKindTable) {
    if (k.kind == kind) return k.color;
  }
  std::uint32_t h = 2166136261u;  // FNV-1a: stable across runs and platforms
  for (char c : kind) h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  return kFallback[h % kFallback.size()];
}

std::span<const std::string_view> known_kinds() { return kKnownKinds; }

// ---------------------------------------------------------------- text
std::size_t format_time(double ps, char* buf, std::size_t size) {
  const double a = std::fabs(ps);
  const char* unit = "ps";
  double v = ps;
  if (a == 0) {
    return static_cast<std::size_t>(std::max(0, std::snprintf(buf, size, "0")));
  } else if (a < 1e3) {
    unit = "ps";
  } else if (a < 1e6) {
    v = ps / 1e3, unit = "ns";
  } else if (a < 1e9) {
    v = ps / 1e6, unit = "us";
  } else if (a < 1e12) {
    v = ps / 1e9, unit = "ms";
  } else {
    v = ps / 1e12, unit = "s";
  }
  int n = std::snprintf(buf, size, "%.4g %s", v, unit);
  return n < 0 ? 0 : std::min(static_cast<std::size_t>(n), size ? size - 1 : 0);
}

std::string format_time(double ps) {
  char buf[48];
  auto n = format_time(ps, buf, sizeof buf);
  return std::string(buf, n);
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 5) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.4g %s", bytes, kUnits[u]);
  return buf;
}

std::string format_flops(double flops) {
  static constexpr const char* kUnits[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  int u = 0;
  while (std::fabs(flops) >= 1000 && u < 6) flops /= 1000, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g %s", flops, kUnits[u]);
  return buf;
}

// ---------------------------------------------------------------- draw lists
void DrawList::clear() {
  rects.clear();
  lines.clear();
  texts.clear();
  text.clear();
}

void DrawList::reserve(std::size_t r, std::size_t l, std::size_t t, std::size_t chars) {
  rects.reserve(r);
  lines.reserve(l);
  texts.reserve(t);
  text.reserve(chars);
}

void DrawList::add_text(float x, float y, std::uint32_t color, float clip_x0, float clip_x1, std::string_view s) {
  texts.push_back(DrawText{x, y, color, clip_x0, clip_x1, static_cast<std::uint32_t>(text.size()),
                           static_cast<std::uint32_t>(s.size())});
  text.append(s);
}

// ---------------------------------------------------------------- view
void zoom_around(View& v, const Canvas& c, float x, double factor) {
  const double t = v.time_at(c, x);
  v.ps_per_px = std::clamp(v.ps_per_px * factor, 1e-3, 1e15);
  v.t0_ps = t - (x - c.x - kLabelWidth) * v.ps_per_px;
}

void show_range(View& v, const Canvas& c, double t0_ps, double t1_ps) {
  if (t1_ps <= t0_ps) t1_ps = t0_ps + 1;
  v.t0_ps = t0_ps;
  v.ps_per_px = std::max(1e-3, (t1_ps - t0_ps) / std::max(1.0f, c.w - kLabelWidth));
}

// ---------------------------------------------------------------- model
TimelineModel::TimelineModel(Trace trace, const ProgressFn& progress) : trace_(std::move(trace)) {
  auto report = [&](double f, const char* stage) {
    if (progress) progress(f, stage);
  };
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
  name_match_.assign(ns, 0);

  report(0.7, "grouping lanes");
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
  for (const auto& a : trace_.arrows) arrow_max_span_ = std::max(arrow_max_span_, std::abs(a.to_ps - a.from_ps));

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

  report(0.8, "building the overview");
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
  report(0.9, "building utilization lanes");
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
  scratch_.reserve(nl);
  cursors_.reserve(nl);
  layout();
  report(1, "ready");
}

std::span<const TraceEvent> TimelineModel::lane_events(std::uint32_t lane) const {
  return std::span<const TraceEvent>(trace_.events.data() + lane_begin_[lane],
                                     lane_begin_[lane + 1] - lane_begin_[lane]);
}

namespace {
// First index in [a, b) whose start is >= t.
std::size_t first_starting_at(const std::vector<TraceEvent>& ev, std::size_t a, std::size_t b, double t) {
  auto it =
      std::partition_point(ev.begin() + static_cast<std::ptrdiff_t>(a), ev.begin() + static_cast<std::ptrdiff_t>(b),
                           [t](const TraceEvent& e) { return static_cast<double>(e.start_ps) < t; });
  return static_cast<std::size_t>(it - ev.begin());
}

// Same, for t not smaller than at the previous call with this cursor: gallops forward from
// the cursor, so a left-to-right sweep touches memory near the previous answer.
std::size_t first_starting_at_from(const std::vector<TraceEvent>& ev, std::size_t& cursor, std::size_t b, double t) {
  std::size_t lo = cursor, step = 1;
  if (lo >= b || static_cast<double>(ev[lo].start_ps) >= t) return lo;
  while (lo + step < b && static_cast<double>(ev[lo + step].start_ps) < t) {
    lo += step;
    step *= 2;
  }
  cursor = first_starting_at(ev, lo + 1, std::min(lo + step, b), t);
  return cursor;
}
}  // namespace

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

std::size_t TimelineModel::set_search(std::string_view needle) {
  search_ = needle;
  matches_.clear();
  std::fill(name_match_.begin(), name_match_.end(), 0);
  if (needle.empty()) return 0;
  bool any = false;
  for (std::size_t s = 0; s < trace_.strings.size(); ++s) {
    name_match_[s] = trace_.strings[s].find(needle) != std::string::npos;
    any = any || name_match_[s];
  }
  if (!any) return 0;
  const auto& ev = trace_.events;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (name_match_[ev[i].name]) matches_.push_back(static_cast<std::uint32_t>(i));
  }
  std::stable_sort(matches_.begin(), matches_.end(), [&ev](std::uint32_t a, std::uint32_t b) {
    return std::tie(ev[a].start_ps, ev[a].lane) < std::tie(ev[b].start_ps, ev[b].lane);
  });
  return matches_.size();
}

std::uint32_t TimelineModel::next_match(double t, bool forward) const {
  if (matches_.empty()) return kNoIndex;
  const auto& ev = trace_.events;
  if (forward) {
    auto it = std::partition_point(matches_.begin(), matches_.end(),
                                   [&](std::uint32_t i) { return static_cast<double>(ev[i].start_ps) <= t; });
    return it == matches_.end() ? matches_.front() : *it;
  }
  auto it = std::partition_point(matches_.begin(), matches_.end(),
                                 [&](std::uint32_t i) { return static_cast<double>(ev[i].start_ps) < t; });
  return it == matches_.begin() ? matches_.back() : *(it - 1);
}

double TimelineModel::minimap_time_at(const Canvas& c, float x) const {
  const double f = (x - c.x - kLabelWidth) / std::max(1.0f, c.w - kLabelWidth);
  return static_cast<double>(begin_ps_) + f * static_cast<double>(end_ps_ - begin_ps_);
}

float TimelineModel::minimap_x_at(const Canvas& c, double t) const {
  const double f = (t - static_cast<double>(begin_ps_)) / static_cast<double>(end_ps_ - begin_ps_);
  return static_cast<float>(c.x + kLabelWidth + f * std::max(1.0f, c.w - kLabelWidth));
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

// ---------------------------------------------------------------- frame building
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
  // Tick step: the smallest 1, 2 or 5 x 10^k picoseconds at least 90 pixels apart.
  double step = 1;
  if (const double target = 90 * v.ps_per_px; target > 1) {
    const double p = std::pow(10.0, std::floor(std::log10(target)));
    const double m = target / p;
    step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  const double first_tick = std::ceil(t0 / step) * step;
  for (double t = first_tick; t <= t1; t += step) {
    const float x = std::floor(v.x_at(c, t));
    out.rects.push_back(DrawRect{x, top, x + 1, bottom, palette::kGrid, ItemKind::background});
  }

  for (std::uint32_t r = row_begin; r < row_end; ++r) {
    const Row& row = rows_[r];
    const float y = row_y(v, c, r);
    if (row.kind == RowKind::lane)
      build_lane(row.index, y, v, c, opt, out);
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
  // Tick labels in the unit of the step, with as many digits as the time needs.
  const char* unit = "ps";
  double div = 1;
  if (step >= 1e12)
    unit = "s", div = 1e12;
  else if (step >= 1e9)
    unit = "ms", div = 1e9;
  else if (step >= 1e6)
    unit = "us", div = 1e6;
  else if (step >= 1e3)
    unit = "ns", div = 1e3;
  char buf[64];
  for (double t = first_tick; t <= t1; t += step) {
    const float x = std::floor(v.x_at(c, t));
    out.rects.push_back(DrawRect{x, c.y + kAxisHeight - 7, x + 1, c.y + kAxisHeight, palette::kText, ItemKind::axis});
    const double shown = std::fabs(t) < step * 1e-6 ? 0.0 : t / div;  // no "-0"
    int n = std::snprintf(buf, sizeof buf, "%.0f %s", shown, unit);
    if (n > 0) out.add_text(x + 3, c.y + 4, palette::kText, xl, xr, std::string_view(buf, static_cast<std::size_t>(n)));
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

void TimelineModel::build_lane(std::uint32_t lane, float y, const View& v, const Canvas& c, const FrameOptions&,
                               DrawList& out) const {
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
      out.rects.push_back(DrawRect{cx0, y0, cx1, y1, color(e), ItemKind::event, true, idx, 1, lane});
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
      // Colour of the longest of up to 8 evenly spaced members: deterministic, O(1).
      std::size_t pick = first;
      for (std::uint32_t s = 1; s < 8 && s < count; ++s) {
        const std::size_t m = first + static_cast<std::size_t>(count) * s / 8;
        if (ev[m].dur_ps > ev[pick].dur_ps) pick = m;
      }
      out.rects.push_back(DrawRect{cx0, y0, std::max(cx1, cx0 + 1), y1, darken(color(ev[pick]), 0.8f), ItemKind::merged,
                                   true, static_cast<std::uint32_t>(first), count, lane});
    }
    i = j;
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

std::vector<Canvas> canvas_layout(int width, int height, bool compare) {
  const float w = std::max(kLabelWidth + 64, static_cast<float>(width) - kSidePanelWidth);
  const float h = std::max(kAxisHeight + kMinimapHeight + 8, static_cast<float>(height) - kToolbarHeight);
  if (!compare) return {Canvas{0, kToolbarHeight, w, h}};
  const float half = std::floor(h / 2);
  return {Canvas{0, kToolbarHeight, w, half}, Canvas{0, kToolbarHeight + half, w, h - half}};
}

}  // namespace ctwin::viz
