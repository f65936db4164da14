// One serving replica simulated iteration by iteration: requests from a TrafficSource, KV
// blocks from a KvCache, iteration times from an IterationCostModel, scheduled as
// serving_scheduler.hpp says. Statistics are streamed (memory flat in the request count).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sim/time.hpp"
#include "workloads/serving_lora.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

// One iteration, for a trace writer.
struct IterationRecord {
  std::int64_t index = 0;
  Time start{};
  Time end{};
  BatchShape shape;
  IterationTime cost;
  double swap_s = 0;  // swap transfers charged to this iteration
  std::int64_t kv_used_blocks = 0;
  std::int64_t waiting = 0;
  std::int64_t running = 0;
};

// One request at its end (finished or rejected).
struct RequestRecord {
  Request request;
  bool rejected = false;
  Time first_scheduled{};  // start of the iteration that first ran it
  Time first_token{};      // end of the iteration that completed its prompt
  Time finish{};
  std::int32_t preemptions = 0;
  bool met_slo = false;
  Time received{};  // when the scheduler saw it: arrival + ReplicaOptions::request_overhead
  // KV offloading: when its first load from the host tier ended (its prefill could start); at
  // or before first_scheduled when it loaded nothing.
  Time kv_loaded{};
};

// Null by default: a run without hooks pays one branch per iteration and request.
struct ServingHooks {
  std::function<void(const IterationRecord&)> on_iteration;
  std::function<void(const RequestRecord&)> on_request;
};

struct ReplicaOptions {
  std::uint64_t seed = 1;            // speculative acceptance draws
  double kv_block_bytes = 0;         // one KV block over all the replica's GPUs (swap transfers)
  double host_link_bytes_per_s = 0;  // GPU <-> host rate for swap (PCIe); > 0 with swap preemption
  // KV offloading: the rate at which the replica's GPUs read pages another replica stored in a
  // pooled host tier (over the network); > 0 with a pooled tier. Its own pages come over the host link.
  double remote_kv_bytes_per_s = 0;
  // Multi-LoRA: one adapter's bytes over all the replica's GPUs (a load moves them over the host
  // link, after a storage read at SchedulerConfig::lora_load_bytes_per_s when not in host memory).
  double lora_adapter_bytes = 0;
  // Host time from a request's arrival (the client sends it) until the scheduler sees it: API
  // server, tokenization, the engine's request setup. In TTFT and end-to-end latency, not in
  // queueing (which starts at the scheduler), no GPU time.
  Time request_overhead{0};
  // The model's sliding window (ModelSpec::attention_window; 0: none): each batch carries it so
  // the cost model can price the windowed layers (BatchShape::window).
  std::int64_t attention_window = 0;
  ServingHooks hooks;
};

struct LatencySummary {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;  // seconds; percentiles within 0.5% (QuantileHistogram)
  std::int64_t count = 0;
};

// GPU time by part; the parts add up to the makespan.
struct GpuTimeSplit {
  double prefill_s = 0, decode_s = 0, comm_s = 0, overhead_s = 0, draft_s = 0;
  double swap_s = 0;  // KV swap transfers (blocking, as vLLM v0's swap)
  // LoRA: the adapters' GEMMs (IterationTime::lora_s), and adapter loads (blocking the
  // iteration, as vLLM's worker loads them before the forward pass).
  double lora_s = 0, lora_load_s = 0;
  // KV offloading: waiting for pages from the host tier with nothing else to run (a request's load
  // overlaps the others' iterations; ServingResult::kv_load_link_s is the loads' own time).
  double kv_load_s = 0;
  double idle_s = 0;  // no iteration running
  // Every part but idle: the parts do not overlap, so with idle_s they add up to the replica's time.
  double accounted_s() const {
    return prefill_s + decode_s + comm_s + overhead_s + draft_s + swap_s + lora_s + lora_load_s + kv_load_s;
  }
};

struct ServingResult {
  std::int64_t arrived_requests = 0;
  std::int64_t completed_requests = 0;
  std::int64_t rejected_requests = 0;
  std::int64_t iterations = 0;
  std::int64_t input_tokens = 0;             // prompts of completed requests
  std::int64_t output_tokens = 0;            // outputs of completed requests
  std::int64_t prefill_tokens_computed = 0;  // includes recomputation, excludes prefix hits
  // Makespan: time 0 to the end of the last iteration; rates are over it.
  double makespan_s = 0;
  LatencySummary ttft_s, tpot_s, e2e_s, queueing_s;  // tpot over requests with >= 2 tokens
  double requests_per_s = 0, input_tokens_per_s = 0, output_tokens_per_s = 0;
  // Completed requests meeting every SLO of their class, per second of makespan; attainment:
  // their share of completed + rejected requests.
  double goodput_requests_per_s = 0;
  double slo_attainment = 0;
  double kv_peak_utilization = 0;  // used / all GPU blocks, after scheduling an iteration
  double kv_mean_utilization = 0;  // time-weighted over the makespan
  std::int64_t preemptions_recompute = 0;
  std::int64_t preemptions_swap = 0;
  std::int64_t swapped_blocks = 0;  // out and in
  double prefix_hit_rate = 0;       // hit tokens / looked-up prompt tokens (KvCacheStats)
  double kv_load_link_s = 0;        // KV offloading: the loads' transfer time, summed
  KvCacheStats kv_stats;
  LoraStats lora;  // all zero without LoRA
  GpuTimeSplit gpu_time;
};

// What a replica reports to a router: its queues and KV blocks in use as scheduled for the
// iteration in progress (idle: nothing queued, the blocks held now).
struct ReplicaLoad {
  std::int64_t waiting = 0;
  std::int64_t running = 0;
  std::int64_t kv_used_blocks = 0;
  std::int64_t kv_blocks = 0;
};

// One replica advanced a step at a time by a driver (a fleet's event loop, serving_fleet_sim.hpp):
// simulate_replica is `while (step()) {}` then finish(), and gives the same result. Its clock
// starts at `start` (a replica added or restarted later); requests come from `source`, which a
// driver may keep feeding (an arrival is admitted at the first step at or after it). `reference`
// runs simulate_replica_reference's loop (as does speculative decoding).
class SteppableReplica {
 public:
  SteppableReplica(TrafficSource& source, KvCache& kv, const IterationCostModel& cost, const SchedulerConfig& config,
                   const ReplicaOptions& options, Time start = Time{0}, bool reference = false);
  ~SteppableReplica();
  SteppableReplica(SteppableReplica&&) noexcept;
  SteppableReplica& operator=(SteppableReplica&&) noexcept;

  Time now() const;   // the end of its last iteration (or of its last jump to an arrival)
  bool busy() const;  // requests admitted and not finished
  // Admits the arrivals up to now(), then runs one iteration (busy) or jumps to the source's
  // next arrival (idle); false, doing nothing, when idle and the source knows no arrival.
  bool step();
  ReplicaLoad load() const;
  // Idle (not busy): its clock moves on to t, as idle time; busy or already past t: nothing.
  // For a request handed over after its arrival (a retry), which must not start before then.
  void idle_until(Time t);
  // A crash: the admitted, unfinished requests (service order), dropped; step no more after it.
  std::vector<Request> abort();
  ServingResult finish();  // the result up to now(); call once, last

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The replica, fast: decode steps advance every running request through running sums and a heap
// of the steps at which each needs a KV block or finishes (O(log n) per event, not per token).
// With speculative decoding (random per-request advances) it runs the reference loop.
ServingResult simulate_replica(TrafficSource& source, KvCache& kv, const IterationCostModel& cost,
                               const SchedulerConfig& config, const ReplicaOptions& options = {});
// The same replica advancing every request every iteration: the baseline for tests and
// `ctwin bench serving`; identical results.
ServingResult simulate_replica_reference(TrafficSource& source, KvCache& kv, const IterationCostModel& cost,
                                         const SchedulerConfig& config, const ReplicaOptions& options = {});

}  // namespace ctwin
