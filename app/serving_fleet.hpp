// A scenario's serving job run as it asks: one replica, or /serving/data_parallel_size identical
// replicas behind a round-robin split (workloads/serving_replicas.hpp), merged exactly into one
// fleet result. Every command that simulates a serving scenario (`ctwin run`, `ctwin validate`,
// `ctwin sweep`) should run it through here, so a fleet is never silently simulated as one
// replica under the whole fleet's traffic.
#pragma once

#include <optional>
#include "scenario.hpp"

#include "workloads/serving_disagg.hpp"
#include "workloads/serving_fleet_sim.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {

struct ServingFleetRun {
  int replicas = 1;  // /serving/data_parallel_size
  // capacity: one replica's (all are identical; its refusal refuses the fleet); result: the
  // fleet's (merge_serving_results: counts and tokens summed, makespan the longest, rates over
  // it), for one replica exactly run_serving_replica's.
  ServingReplicaRun run;
  // /serving/disaggregation: both pools' run; `run` then holds the user's view (its result the
  // merged one, its capacity the decode replica's, or a refusing pool's), `replicas` both pools'.
  std::optional<DisaggregatedRun> disaggregated;
  // /serving/router, /serving/pools or /serving/failures: the coupled fleet's run; `run` then
  // holds the fleet's merged result and the first pool's capacity (or a refusing pool's).
  std::optional<FleetRun> fleet;
};

// One replica: run_serving_replica(deployment, scheduler, traffic, hooks), bit for bit. More:
// run_serving_replicas on `threads` threads (0: one per hardware thread, at most one per
// replica; the result does not depend on it); hooks must then be empty (they would see every
// replica's events interleaved): std::invalid_argument otherwise. A disaggregated job runs
// run_disaggregated (both pools with /serving's scheduler keys), hooks empty too.
// A routed fleet's run tells `fleet_hooks`, a disaggregated one's `disagg_hooks` (a fleet trace).
ServingFleetRun run_serving_job(const ServingJob& job, const ServingHooks& hooks = {}, int threads = 0,
                                const FleetHooks& fleet_hooks = {}, const DisaggHooks& disagg_hooks = {});

}  // namespace ctwin
