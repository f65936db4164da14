// A serving fleet's trace (`ctwin run --trace` on a routed fleet or a disaggregated job): the
// collector takes the fleet loop's hooks (serving_fleet_sim.hpp's FleetHooks, or
// serving_disagg.hpp's DisaggHooks) and builds a sim/trace.hpp Trace after the run.
//
// What it shows, per pool (process NAME, group "pool NAME"; the viewer labels a lane "NAME / #K"):
//   - a lifecycle lane per replica ("#K", K its index in the pool) with spans "starting"
//     (added, in its cold start), "serving", "draining", "down" (crashed, until its restart),
//     and a zero-length "crash" mark; a replica that is gone (drained to its end, crashed for
//     good) has no span after it. Open spans end at the run's end (the last time recorded);
//   - an iteration lane ("#K iterations") for the first FleetTraceOptions::
//     iteration_replicas replicas by fleet id (pools in order, then added ones): one event per
//     iteration, named and kinded as serving_trace.hpp's ("prefill 512 tok + decode 31 seq",
//     "prefill" / "decode" / "mixed"). Bounded so a 100-replica, hour-long fleet stays a trace
//     the viewer opens; the lifecycle lanes and counters cover every replica;
//   - counters, exact at their change points: serving, starting, draining, down (replicas in
//     each state), and desired (the autoscaler's count at each control tick, with one);
//   - counters over fixed intervals of counter_interval_s (sample at b * interval describes
//     [b * interval, (b + 1) * interval)): arrivals_per_s (requests the router sent to the pool
//     in it, retries included, / the interval), queue_length (the waiting requests of the pool's
//     serving and draining replicas, each as its last iteration started before the interval's
//     end reported) and kv_utilization (their KV blocks in use / their blocks, the same way);
// and for the fleet (process "fleet"): an "autoscaler" lane with a zero-length "scale_up" or
// "scale_down" mark per pool at each tick whose desired count differs from what it had ("pool
// decode: 2 -> 4"), above the pools; for a disaggregated job a "kv transfers" group with one span per KV
// transfer ("prefill 0 -> decode 1", kind "kv_transfer") on interval-partitioned "link" lanes,
// and an arrow from the prefill replica's lifecycle lane at the transfer's start to the decode
// replica's at its end.
//
// Memory: a record per state change, per transfer, per traced iteration, and per replica and
// interval; the untraced replicas' iterations only update the interval they fall in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace.hpp"
#include "workloads/serving_disagg.hpp"
#include "workloads/serving_fleet_sim.hpp"

namespace ctwin {

struct FleetTraceOptions {
  int iteration_replicas = 16;    // replicas (lowest fleet ids) whose iterations get a lane
  double counter_interval_s = 1;  // the interval of arrivals_per_s, queue_length, kv_utilization
};

class FleetTraceCollector {
 public:
  // The pools' names, in the fleet's order.
  explicit FleetTraceCollector(std::vector<std::string> pools, FleetTraceOptions opt = {});

  // Hooks that record into this collector (which must outlive the run). For a disaggregated
  // run the pools are {"prefill", "decode"} and both pools' replicas serve from 0.
  FleetHooks fleet_hooks();
  DisaggHooks disagg_hooks(int prefill_replicas, int decode_replicas);

  void state(int replica, int pool, FleetReplicaState s, Time t);
  void iteration(int replica, const IterationRecord& it);
  void routed(int replica, Time t);
  void crash(int replica, Time t);
  void transfer(int from, int to, Time start, Time end);

  // The trace of what was recorded, canonical (the same run gives the same trace).
  // `kv_blocks` per pool: one replica's GPU blocks (0: no kv_utilization counter);
  // `ticks`: the control ticks (FleetRun::timeline); `summary`: the run's headline figures.
  Trace build(const std::vector<std::int64_t>& kv_blocks, const std::vector<FleetTick>& ticks,
              std::vector<std::pair<std::string, double>> summary) const;
  Trace build(const FleetRun& run) const;
  Trace build(const DisaggregatedRun& run) const;

 private:
  struct StateRec {
    std::int64_t t_ps;
    std::int64_t seq;
    int replica;
    FleetReplicaState s;
  };
  struct Iter {
    std::int64_t start_ps, end_ps, prefill_tokens, decode_seqs;
  };
  struct Bin {  // a replica's last report within interval `bin`
    std::int64_t bin, waiting, kv_used;
    bool alive;
  };
  struct Replica {
    int pool = -1;
    std::vector<Iter> iters;  // traced replicas only
    std::vector<Bin> bins;
    std::vector<std::int64_t> crashes_ps;
  };
  struct Transfer {
    int from, to;
    std::int64_t start_ps, end_ps;
  };
  Replica& replica(int id);
  void report(Replica& r, std::int64_t t_ps, std::int64_t waiting, std::int64_t kv_used, bool alive);
  std::int64_t bin_of(std::int64_t t_ps) const;

  std::vector<std::string> pool_names_;
  FleetTraceOptions opt_;
  std::int64_t interval_ps_;
  std::vector<Replica> replicas_;
  std::vector<StateRec> states_;
  std::vector<std::vector<std::int64_t>> arrivals_;  // per pool, per interval
  std::vector<Transfer> transfers_;
  std::int64_t end_ps_ = 0;   // the latest time recorded
  int prefill_replicas_ = 0;  // disaggregated: the decode pool's fleet ids start here
};

}  // namespace ctwin
