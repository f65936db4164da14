// Exposed against overlapped communication: per GPU (TraceLane::process), the union of its
// compute events' intervals; a communication event is overlapped where it meets that union
// and exposed elsewhere. Also the time shares of a merged run's kinds.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

bool is_comm_kind(std::string_view kind) {
  static constexpr std::array<std::string_view, 9> kComm{
      "all_reduce", "all_gather", "reduce_scatter", "reduce", "all_to_all", "broadcast", "send", "recv", "send_recv"};
  return std::find(kComm.begin(), kComm.end(), kind) != kComm.end();
}

namespace {

// Picoseconds of [a, b) covered by the sorted, disjoint intervals `busy`.
double covered(const std::vector<std::pair<std::int64_t, std::int64_t>>& busy, std::int64_t a, std::int64_t b) {
  auto it = std::partition_point(busy.begin(), busy.end(), [a](const auto& iv) { return iv.second <= a; });
  double sum = 0;
  for (; it != busy.end() && it->first < b; ++it)
    sum += static_cast<double>(std::min(b, it->second) - std::max(a, it->first));
  return sum;
}

}  // namespace

void TimelineModel::build_comm_overlap() {
  const auto& ev = trace_.events;
  comm_kind_.assign(trace_.strings.size(), 0);
  for (std::size_t s = 0; s < trace_.strings.size(); ++s) comm_kind_[s] = is_comm_kind(trace_.strings[s]) ? 1 : 0;
  std::uint32_t idle = kNoIndex;  // waiting is not compute
  for (std::size_t s = 0; s < trace_.strings.size(); ++s) {
    if (trace_.strings[s] == "idle") idle = static_cast<std::uint32_t>(s);
  }
  std::unordered_map<std::uint32_t, std::uint32_t> gpu_of_process;
  lane_gpu_.resize(trace_.lanes.size());
  for (std::uint32_t l = 0; l < trace_.lanes.size(); ++l) {
    auto [it, fresh] = gpu_of_process.emplace(trace_.lanes[l].process, static_cast<std::uint32_t>(gpu_busy_.size()));
    if (fresh) gpu_busy_.emplace_back();
    lane_gpu_[l] = it->second;
  }
  for (const auto& e : ev) {
    if (!comm_kind_[e.kind] && e.kind != idle && e.dur_ps > 0) {
      gpu_busy_[lane_gpu_[e.lane]].emplace_back(e.start_ps, e.start_ps + e.dur_ps);
    }
  }
  for (auto& busy : gpu_busy_) {
    std::sort(busy.begin(), busy.end());
    std::size_t n = 0;
    for (const auto& iv : busy) {
      if (n > 0 && iv.first <= busy[n - 1].second) {
        busy[n - 1].second = std::max(busy[n - 1].second, iv.second);
      } else {
        busy[n++] = iv;
      }
    }
    busy.resize(n);
  }
  comm_prefix_.assign(ev.size() + 1, 0);
  for (std::size_t i = 0; i < ev.size(); ++i)
    comm_prefix_[i + 1] = comm_prefix_[i] + (comm_kind_[ev[i].kind] ? ev[i].dur_ps : 0);
  comm_totals_ = {};
  for (std::uint32_t i = 0; i < ev.size(); ++i) {
    if (!comm_kind_[ev[i].kind]) continue;
    const double exposed = exposed_ps(i);
    comm_totals_.exposed_ps += exposed;
    comm_totals_.overlapped_ps += static_cast<double>(ev[i].dur_ps) - exposed;
  }
}

double TimelineModel::exposed_ps(std::uint32_t event) const {
  const TraceEvent& e = trace_.events[event];
  if (!comm_kind_[e.kind]) return 0;
  return static_cast<double>(e.dur_ps) - covered(gpu_busy_[lane_gpu_[e.lane]], e.start_ps, e.start_ps + e.dur_ps);
}

void TimelineModel::exposed_parts(std::uint32_t event, std::vector<std::pair<double, double>>& out) const {
  const TraceEvent& e = trace_.events[event];
  if (!comm_kind_[e.kind]) return;
  const auto& busy = gpu_busy_[lane_gpu_[e.lane]];
  const std::int64_t a = e.start_ps, b = e.start_ps + e.dur_ps;
  auto it = std::partition_point(busy.begin(), busy.end(), [a](const auto& iv) { return iv.second <= a; });
  std::int64_t cur = a;
  for (; it != busy.end() && it->first < b; ++it) {
    if (it->first > cur) out.emplace_back(static_cast<double>(cur), static_cast<double>(it->first));
    cur = std::max(cur, it->second);
  }
  if (cur < b) out.emplace_back(static_cast<double>(cur), static_cast<double>(b));
}

std::vector<std::pair<std::string, double>> TimelineModel::summary_rows() const {
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& kv : trace_.summary) {
    const std::string& k = kv.first;
    if (k.size() > 7 && k.compare(k.size() - 7, 7, "_stride") == 0) continue;
    rows.push_back(kv);
  }
  std::vector<std::uint8_t> has_events(gpu_busy_.size(), 0);
  for (std::uint32_t l = 0; l < trace_.lanes.size(); ++l) {
    if (lane_begin_[l + 1] > lane_begin_[l]) has_events[lane_gpu_[l]] = 1;
  }
  const auto gpus = static_cast<double>(std::count(has_events.begin(), has_events.end(), 1));
  if (gpus > 0 && comm_totals_.exposed_ps + comm_totals_.overlapped_ps > 0) {
    rows.emplace_back("trace_exposed_comm_s", comm_totals_.exposed_ps / gpus * 1e-12);
    rows.emplace_back("trace_overlapped_comm_s", comm_totals_.overlapped_ps / gpus * 1e-12);
  }
  return rows;
}

void TimelineModel::time_shares(std::size_t first, std::size_t last, std::vector<KindShare>& out) const {
  out.clear();
  if (last <= first) return;
  const auto& ev = trace_.events;
  auto add = [&out](std::uint32_t kind, double ps) {
    auto it = std::find_if(out.begin(), out.end(), [kind](const KindShare& k) { return k.kind == kind; });
    if (it == out.end()) {
      out.push_back(KindShare{kind, ps});
    } else {
      it->ps += ps;
    }
  };
  if (last - first <= kShareExactMax) {
    for (std::size_t i = first; i < last; ++i) add(ev[i].kind, static_cast<double>(ev[i].dur_ps));
  } else {
    // Two entries, exact in time from prefix sums: compute and communication, each named by
    // the kind with the most time among kShareSamples evenly spaced members.
    const auto comm = static_cast<double>(comm_prefix_[last] - comm_prefix_[first]);
    const auto all = static_cast<double>(busy_prefix_[last] - busy_prefix_[first]);
    std::uint32_t kind[2] = {kNoIndex, kNoIndex};  // compute, comm
    double best[2] = {-1, -1};
    const std::size_t n = last - first;
    for (std::size_t s = 0; s < kShareSamples; ++s) {
      const TraceEvent& e = ev[first + n * s / kShareSamples];
      const int c = comm_kind_[e.kind];
      if (static_cast<double>(e.dur_ps) > best[c]) best[c] = static_cast<double>(e.dur_ps), kind[c] = e.kind;
    }
    // A category no sample fell in takes the first member of it found by a scan (rare).
    for (int c = 0; c < 2; ++c) {
      const double ps = c == 1 ? comm : all - comm;
      if (ps <= 0) continue;
      for (std::size_t i = first; kind[c] == kNoIndex && i < last; ++i) {
        if (comm_kind_[ev[i].kind] == c) kind[c] = ev[i].kind;
      }
      add(kind[c], ps);
    }
  }
  // Largest first, ties in first-seen order; an insertion sort: a handful of kinds, and
  // std::stable_sort would allocate per call.
  for (std::size_t a = 1; a < out.size(); ++a) {
    for (std::size_t z = a; z > 0 && out[z].ps > out[z - 1].ps; --z) std::swap(out[z], out[z - 1]);
  }
}

}  // namespace ctwin::viz
