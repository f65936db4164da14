#include "workloads/serving_trace.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

namespace ctwin {

ServingTraceCollector::ServingTraceCollector(int tp, int pp) : tp_(std::max(1, tp)), pp_(std::max(1, pp)) {}

ServingHooks ServingTraceCollector::hooks() {
  ServingHooks h;
  h.on_iteration = [this](const IterationRecord& it) { record(it); };
  h.on_request = [this](const RequestRecord& r) { record(r); };
  return h;
}

void ServingTraceCollector::record(const IterationRecord& it) {
  iters_.push_back(Iter{it.start.ps, it.end.ps, it.shape.prefill_tokens, it.shape.decode_seqs, it.shape.decode_tokens,
                        it.kv_used_blocks, it.waiting, it.running});
}

void ServingTraceCollector::record(const RequestRecord& r) {
  reqs_.push_back(Req{r.request.id, r.request.arrival.ps, r.first_scheduled.ps, r.first_token.ps, r.finish.ps,
                      r.rejected, r.kv_loaded.ps});
}

std::vector<std::uint32_t> assign_slots(const std::vector<std::pair<std::int64_t, std::int64_t>>& intervals) {
  std::vector<std::uint32_t> slot(intervals.size());
  // Busy slots by the time they free, free slots lowest first.
  using Busy = std::pair<std::int64_t, std::uint32_t>;
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> idle;
  std::uint32_t slots = 0;
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    const auto [begin, end] = intervals[i];
    while (!busy.empty() && busy.top().first <= begin) {
      idle.push(busy.top().second);
      busy.pop();
    }
    std::uint32_t s = slots;
    if (idle.empty()) {
      ++slots;
    } else {
      s = idle.top();
      idle.pop();
    }
    slot[i] = s;
    busy.emplace(end, s);
  }
  return slot;
}

void sample_counter(TraceCounterTrack& c, std::int64_t t_ps, double v) {
  if (!c.samples.empty() && c.samples.back().second == v) return;
  if (!c.samples.empty() && c.samples.back().first == t_ps) {
    c.samples.back().second = v;
    return;
  }
  c.samples.emplace_back(t_ps, v);
}

const char* batch_kind(std::int64_t prefill_tokens, std::int64_t decode_seqs) {
  if (decode_seqs == 0) return "prefill";
  if (prefill_tokens == 0) return "decode";
  return "mixed";
}

Trace ServingTraceCollector::build(const ServingResult& res, std::int64_t kv_total_blocks) const {
  Trace tr;
  constexpr std::uint32_t kReplicaPid = 0, kRequestsPid = 1;
  const int gpus = tp_ * pp_;
  std::vector<std::uint32_t> gpu_lane(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus; ++g) {
    const std::string thread =
        pp_ > 1 ? "stage " + std::to_string(g / tp_) + " / gpu " + std::to_string(g) : "gpu " + std::to_string(g);
    gpu_lane[static_cast<std::size_t>(g)] =
        tr.add_lane("replica", thread, "replica", kReplicaPid, static_cast<std::uint32_t>(g));
  }
  // Iterations: one event per GPU lane, named by the batch (names bounded by the batch limits).
  tr.events.reserve(iters_.size() * static_cast<std::size_t>(gpus) + reqs_.size() * 3);
  auto counter = [&](const char* name) {
    TraceCounterTrack c;
    c.process = tr.intern("replica");
    c.pid = kReplicaPid;
    c.name = tr.intern(name);
    return c;
  };
  TraceCounterTrack queue = counter("queue_length"), running = counter("running"), kv = counter("kv_blocks_used"),
                    batch = counter("batch_tokens"), kv_util = counter("kv_utilization");
  // Batch names by (prefill tokens, decode sequences), built once each.
  std::unordered_map<std::uint64_t, std::uint32_t> batch_name;
  std::int64_t prev_end = 0;
  for (const Iter& it : iters_) {
    const std::uint64_t key =
        static_cast<std::uint64_t>(it.prefill_tokens) << 32 ^ static_cast<std::uint64_t>(it.decode_seqs);
    auto [name, fresh] = batch_name.try_emplace(key, 0);
    if (fresh) {
      name->second = tr.intern("prefill " + std::to_string(it.prefill_tokens) + " tok + decode " +
                               std::to_string(it.decode_seqs) + " seq");
    }
    TraceEvent e;
    e.start_ps = it.start_ps;
    e.dur_ps = it.end_ps - it.start_ps;
    e.name = name->second;
    e.kind = tr.intern(batch_kind(it.prefill_tokens, it.decode_seqs));
    for (const auto lane : gpu_lane) {
      e.lane = lane;
      tr.events.push_back(e);
    }
    if (it.start_ps > prev_end) sample_counter(batch, prev_end, 0);  // idle between iterations
    sample_counter(queue, it.start_ps, static_cast<double>(it.waiting));
    sample_counter(running, it.start_ps, static_cast<double>(it.running));
    sample_counter(kv, it.start_ps, static_cast<double>(it.kv_used));
    sample_counter(batch, it.start_ps, static_cast<double>(it.prefill_tokens + it.decode_tokens));
    if (kv_total_blocks > 0)
      sample_counter(kv_util, it.start_ps, static_cast<double>(it.kv_used) / static_cast<double>(kv_total_blocks));
    prev_end = it.end_ps;
  }
  if (!iters_.empty()) sample_counter(batch, prev_end, 0);
  for (auto* c : {&queue, &running, &kv, &batch}) tr.counters.push_back(std::move(*c));
  if (kv_total_blocks > 0) tr.counters.push_back(std::move(kv_util));

  // Requests in arrival order, each on the lowest slot free at its arrival.
  std::vector<const Req*> order;
  order.reserve(reqs_.size());
  for (const Req& r : reqs_) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const Req* a, const Req* b) {
    return a->arrival_ps != b->arrival_ps ? a->arrival_ps < b->arrival_ps : a->id < b->id;
  });
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  spans.reserve(order.size());
  for (const Req* r : order) spans.emplace_back(r->arrival_ps, r->rejected ? r->arrival_ps : r->finish_ps);
  const std::vector<std::uint32_t> slot = assign_slots(spans);
  std::vector<std::uint32_t> slot_lane;
  const std::uint32_t k_queued = tr.intern("queued"), k_prefill = tr.intern("prefill"), k_decode = tr.intern("decode"),
                      k_rejected = tr.intern("rejected");
  std::optional<std::uint32_t> k_kv_load;  // interned only when a request loaded KV (KV offloading)
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Req& r = *order[i];
    while (slot_lane.size() <= slot[i]) {
      const auto s = static_cast<std::uint32_t>(slot_lane.size());
      slot_lane.push_back(tr.add_lane("requests", "slot " + std::to_string(s), "requests", kRequestsPid, s));
    }
    TraceEvent e;
    e.lane = slot_lane[slot[i]];
    e.name = tr.intern("req " + std::to_string(r.id));
    auto span = [&](std::int64_t a, std::int64_t b, std::uint32_t kind) {
      if (b <= a) return;
      e.start_ps = a;
      e.dur_ps = b - a;
      e.kind = kind;
      tr.events.push_back(e);
    };
    if (r.rejected) {
      e.start_ps = r.arrival_ps;
      e.dur_ps = 0;
      e.kind = k_rejected;
      tr.events.push_back(e);
      continue;
    }
    // Admitted, it may first wait for its KV from the host tier (KV offloading), then prefill.
    const std::int64_t loaded = std::max(r.kv_loaded_ps, r.first_scheduled_ps);
    span(r.arrival_ps, r.first_scheduled_ps, k_queued);
    if (loaded > r.first_scheduled_ps) {
      if (!k_kv_load) k_kv_load = tr.intern("kv_load");
      span(r.first_scheduled_ps, loaded, *k_kv_load);
    }
    span(loaded, r.first_token_ps, k_prefill);
    span(r.first_token_ps, r.finish_ps, k_decode);
  }
  canonicalize(tr);

  const std::int64_t preemptions = res.preemptions_recompute + res.preemptions_swap;
  tr.summary = {{"makespan_s", res.makespan_s},
                {"ttft_p50_s", res.ttft_s.p50},
                {"ttft_p99_s", res.ttft_s.p99},
                {"tpot_p50_s", res.tpot_s.p50},
                {"tpot_p99_s", res.tpot_s.p99},
                {"e2e_p50_s", res.e2e_s.p50},
                {"e2e_p99_s", res.e2e_s.p99},
                {"queueing_p50_s", res.queueing_s.p50},
                {"requests_per_second", res.requests_per_s},
                {"output_tokens_per_second", res.output_tokens_per_s},
                {"goodput_requests_per_second", res.goodput_requests_per_s},
                {"slo_attainment", res.slo_attainment},
                {"kv_peak_utilization", res.kv_peak_utilization},
                {"kv_mean_utilization", res.kv_mean_utilization},
                {"completed_requests", static_cast<double>(res.completed_requests)},
                {"rejected_requests", static_cast<double>(res.rejected_requests)},
                {"preemptions", static_cast<double>(preemptions)},
                {"iterations", static_cast<double>(res.iterations)},
                {"gpu_prefill_s", res.gpu_time.prefill_s},
                {"gpu_decode_s", res.gpu_time.decode_s},
                {"gpu_comm_s", res.gpu_time.comm_s},
                {"gpu_overhead_s", res.gpu_time.overhead_s},
                {"gpu_idle_s", res.gpu_time.idle_s}};
  return tr;
}

}  // namespace ctwin
