// A serving replica's trace (`ctwin run --trace` on a serving scenario): the collector takes the
// replica loop's hooks (serving_sim.hpp) and builds a sim/trace.hpp Trace after the run.
//
// What it shows:
//   - iterations: process "replica", one lane per GPU (tp * pp, "gpu k", or "stage s / gpu k"
//     with pipeline parallelism); every iteration is one event on each lane, kind "prefill",
//     "decode" or "mixed", named by its batch ("prefill 512 tok + decode 31 seq"), so names stay
//     few however long the run;
//   - requests: process "requests", spans per request named "req ID", kinds "queued" (arrival to
//     the start of its first iteration), "prefill" (to the end of the iteration completing its
//     prompt, chunks and preemptions included) and "decode" (to its last token), "rejected" (a
//     zero-length mark at arrival). Each request takes the lowest 'slot' lane free at its arrival
//     (interval partitioning), so the lanes are as many as requests ever in the replica at once,
//     not as many as requests;
//   - counters on the replica: queue_length (waiting), running, kv_blocks_used, batch_tokens
//     (0 while idle), sampled at each iteration's start and kept only where they change;
//   - the summary: the report's headline figures (latency percentiles, throughput, goodput, KV
//     use, preemptions, where the GPU time went).
//
// Memory: the collector keeps a small record per iteration and per request (about 100 bytes
// each), so unlike a run without --trace it grows with the run's length.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/trace.hpp"
#include "workloads/serving_sim.hpp"

namespace ctwin {

class ServingTraceCollector {
 public:
  // The replica's GPUs: tp * pp lanes.
  ServingTraceCollector(int tp, int pp);

  // Hooks that record into this collector (which must outlive the run).
  ServingHooks hooks();
  void record(const IterationRecord& it);
  void record(const RequestRecord& r);

  // The trace of what was recorded, canonical (the same run gives the same trace);
  // `kv_total_blocks` > 0 adds a kv_utilization counter (used / all GPU blocks).
  Trace build(const ServingResult& result, std::int64_t kv_total_blocks = 0) const;

 private:
  struct Iter {
    std::int64_t start_ps, end_ps, prefill_tokens, decode_seqs, decode_tokens, kv_used, waiting, running;
  };
  struct Req {
    std::int64_t id, arrival_ps, first_scheduled_ps, first_token_ps, finish_ps;
    bool rejected;
    std::int64_t kv_loaded_ps;  // the end of its load from the host tier of KV (<= first_scheduled_ps: none)
  };
  int tp_, pp_;
  std::vector<Iter> iters_;
  std::vector<Req> reqs_;
};

// Slot lanes by interval partitioning: intervals [begin, end) in order of begin, each given the
// lowest slot free at its begin (a slot frees at its interval's end). Returns each interval's
// slot; the slots used are as many as intervals ever overlap at once.
std::vector<std::uint32_t> assign_slots(const std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

// A counter sample kept only where the value changes (a later value at the same time replaces the
// earlier); shared by the single-replica and the fleet traces.
void sample_counter(TraceCounterTrack& c, std::int64_t t_ps, double v);
// An iteration's name by what it runs: "prefill", "decode" or "mixed".
const char* batch_kind(std::int64_t prefill_tokens, std::int64_t decode_seqs);

}  // namespace ctwin
