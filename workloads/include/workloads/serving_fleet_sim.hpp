// A coupled serving fleet (issue 18): pools of replicas (each pool its own deployment and
// scheduler, so A100 and H100 pools mix) behind one router, simulated in one discrete-event
// loop. Each arrival is routed at its arrival time with what the router knows then; replicas
// step (serving_sim.hpp's SteppableReplica) in time order between arrivals, ties by replica id.
// Lifecycle events (add, drain, crash, restart) and a periodic control tick (the autoscaler's
// hook) act on the loop. Statistics are streamed: memory is flat in the request count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/names.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_admission.hpp"
#include "workloads/serving_memory.hpp"
#include "workloads/serving_replicas.hpp"
#include "workloads/serving_router.hpp"

namespace ctwin {

struct FleetPool {
  std::string name;
  ServingDeployment deployment;
  SchedulerConfig scheduler;
  int replicas = 1;         // at t = 0, serving at once
  double cold_start_s = 0;  // a replica added later serves this long after it is added
  // Tests: an iteration cost and a KV block count in place of the deployment's (null, 0: the
  // deployment's ServingCostModel and kv_capacity).
  std::shared_ptr<const IterationCostModel> cost;
  std::int64_t gpu_blocks = 0;
  std::int64_t offload_blocks = 0;  // with gpu_blocks: the host tier of KV (0: none)
  // The report's price of one of the pool's GPUs for an hour (< 0: the GPU's catalog price).
  // The simulation does not read it.
  double gpu_hour_usd = -1;
};

enum class FleetEventKind : std::uint8_t { add, drain, crash };
inline constexpr auto fleet_event_kind_names = make_names<FleetEventKind>(
    {{FleetEventKind::add, "add"}, {FleetEventKind::drain, "drain"}, {FleetEventKind::crash, "crash"}});

// add: one more replica in `pool` (replica ignored), serving from t_s + the pool's cold_start_s.
// drain: the replica takes no new request, finishes those it holds, then goes away.
// crash: the replica loses what it holds (retried or lost, FleetSpec::retry), and restarts
// empty (no cached prefix) restart_s later (< 0: never). A crash lands at the replica's first
// iteration boundary at or after t_s (an iteration lasts tens of milliseconds).
// `replica` is the index in its pool, in the order replicas were made (0 .. replicas - 1 first).
struct FleetEvent {
  double t_s = 0;
  FleetEventKind kind = FleetEventKind::crash;
  int pool = 0;
  int replica = 0;
  double restart_s = -1;
};

enum class RetryPolicy : std::uint8_t { retry, lose };
inline constexpr auto retry_policy_names =
    make_names<RetryPolicy>({{RetryPolicy::retry, "retry"}, {RetryPolicy::lose, "lose"}});

// What the control tick sees, per pool.
struct FleetPoolMetrics {
  int serving = 0;   // taking requests
  int starting = 0;  // added, in their cold start
  int draining = 0;
  int down = 0;                  // crashed, waiting to restart
  std::int64_t outstanding = 0;  // the router's count over the pool
  std::int64_t waiting = 0;      // reported, summed
  std::int64_t running = 0;      // reported, summed
  double kv_utilization = 0;     // reported, mean over the serving replicas
  std::int64_t arrivals = 0;     // routed to the pool since the last tick
  // Nearest-rank p99 of the TTFTs of the pool's requests whose first token came since the last
  // tick (recorded by now); nullopt: none.
  std::optional<double> ttft_p99_s;
  // Seconds the pool's serving replicas spent in iterations they began since the last tick
  // (an iteration that straddles the tick counts in full where it began): gpu_utilization is
  // busy_s / interval_s per replica.
  double busy_s = 0;
  std::int64_t held = 0;  // requests the router holds for a cold start (the fleet's, every pool)
};
struct FleetMetrics {
  double t_s = 0;
  double interval_s = 0;
  std::vector<FleetPoolMetrics> pools;
};

// The autoscaler's hook: every interval_s, desired(metrics) returns the replicas wanted per pool
// (serving + starting + down; one entry per pool, or empty for no change). More than the pool
// has adds replicas (cold start); fewer drains the newest serving or starting ones.
struct FleetControl {
  double interval_s = 0;  // 0: no tick
  std::function<std::vector<int>(const FleetMetrics&)> desired;
  // Seconds from a control-made add at t_s until that replica serves (a warm pool's start); null:
  // the pool's cold_start_s.
  std::function<double(int pool, double t_s)> start_s;
  // Scale from zero, as Knative's activator: a request that no replica can take (none serving)
  // is held at the router, not refused, and a pool with no replica at all (serving, starting or
  // down) gets one at once, without waiting for the tick; the held requests are routed, in
  // arrival order, the moment a replica serves. false: such a request is unrouted.
  bool hold_when_empty = false;
};

// Random crashes: each replica, while it serves or drains, crashes after an exponential time of
// mean mtbf_hours (a Poisson process per replica; a restart draws afresh), drawn from (seed,
// replica id, incarnation) so a run is deterministic. A crashed replica restarts, empty,
// restart_s later (< 0: the pool's cold_start_s); a draining one does not come back. Crashes
// stop being drawn once the traffic is over (nothing left to arrive, run or retry).
struct RandomFailures {
  double mtbf_hours = 0;  // 0: none
  double restart_s = -1;
  std::uint64_t seed = 0;
};

// A replica's state in the fleet loop (gone: drained to its end, or crashed for good).
enum class FleetReplicaState : std::uint8_t { starting, serving, draining, down, gone };

// Observers of the fleet loop (serving_fleet_trace.hpp records a trace from them). All empty by
// default: with or without them the FleetRun is the same bit for bit. `replica` is the fleet
// replica id (pools in order, then added replicas); each replica's calls come in its time order.
struct FleetHooks {
  // The replica entered `state` at t (made: serving at 0, or starting when added).
  std::function<void(int replica, int pool, FleetReplicaState state, Time t)> on_state;
  std::function<void(int replica, const IterationRecord&)> on_iteration;
  // The router sent a request to `replica` at t (-1: no replica took it).
  std::function<void(int replica, const Request&, Time t)> on_route;
  // The replica crashed at t (on_state then says down or gone).
  std::function<void(int replica, Time t)> on_crash;
};

struct FleetSpec {
  std::vector<FleetPool> pools;
  RouterSpec router;
  std::vector<FleetEvent> events;
  RetryPolicy retry = RetryPolicy::retry;
  int max_retries = 1;  // a request lost more often than this is lost for good
  FleetControl control;
  // Admission control of every arrival before routing (retries are not checked again). The view:
  // queued = requests routed but not running (replicas' inboxes and waiting queues; the router
  // holds none), estimated_wait_s = queued / the fleet's completion rate over the last
  // ttft_window_s (completions recorded by now; none yet: 0, no estimate).
  std::optional<AdmissionSpec> admission;
  FleetHooks hooks;
  RandomFailures random_failures;
};

// What a pool held, in replica-seconds by state, from each replica's add (t = 0 for the first
// ones) to its end (drained, crashed for good, or the run's end). A replica is paid for while
// it starts, serves, drains and while it is down waiting to restart in place: the restart keeps
// its node and GPUs (a pod restart), so a rented GPU is billed through it.
struct ReplicaSeconds {
  double starting_s = 0, serving_s = 0, draining_s = 0, down_s = 0;
  double billed_s() const { return starting_s + serving_s + draining_s + down_s; }
};

struct FleetPoolResult {
  std::string name;
  KvCapacity capacity;
  int replicas_made = 0;             // every replica the pool had, added ones included
  std::vector<std::int64_t> routed;  // requests the router sent to each (retries included)
  ServingResult merged;              // over the pool's replicas (merge_serving_results)
  ReplicaSeconds replica_s;
  std::int64_t crashes = 0;  // scheduled and random
  // KV offloading: the pool's host tier, or its replicas' tiers summed (every incarnation's; a
  // restarted replica's tier starts empty, a pooled one outlives the replicas).
  KvHostTierStats offload;
};

// One control tick, for the report's timeline: what the hook saw and what it asked for.
struct FleetTick {
  double t_s = 0;
  std::vector<FleetPoolMetrics> pools;
  std::vector<int> desired;  // per pool (empty: no change asked)
};

struct FleetRun {
  std::string refusal;  // a pool that cannot hold its weights refuses the fleet
  std::vector<FleetPoolResult> pools;
  ServingResult merged;       // the fleet's; arrived_requests counts the traffic's requests once
  RouterStats router;         // routed: by fleet replica id (pools in order, then added replicas)
  std::int64_t retried = 0;   // requests routed again after a crash
  std::int64_t lost = 0;      // lost to a crash (policy lose, or out of retries)
  std::int64_t unrouted = 0;  // no replica took them (all down, draining or starting)
  std::int64_t crashes = 0;
  std::int64_t random_crashes = 0;  // of crashes, those RandomFailures drew
  std::int64_t control_ticks = 0;
  double end_s = 0;  // the run's end: the last replica's clock or lifecycle event
  // FleetControl::hold_when_empty: requests the router held until a replica started, and their
  // TTFT (from arrival; the first token after the cold start).
  std::int64_t held = 0;
  LatencySummary held_ttft_s;
  std::vector<FleetTick> timeline;  // one row per control tick
  // With FleetSpec::admission: accepted and rejected arrivals by reason and class. The rejected
  // ones are in merged.rejected_requests (and count against SLO attainment).
  std::optional<AdmissionCounters> admission;
};

// What the fleet needs to know of its traffic besides the requests.
struct FleetTraffic {
  std::uint64_t seed = 0;                // the replicas' own draws (speculative acceptance)
  std::int64_t session_group_base = -1;  // the first prefix group that is a session (-1: none)
  std::int32_t session_turns = 1;
};

// The fleet behind its router fed by make_traffic(traffic), run to the end of the traffic.
// Throws std::invalid_argument for an invalid spec (no pool, a pool without replicas, an event
// naming a missing pool or replica). With one pool, the round-robin router and no events, it
// gives run_serving_replicas' result bit for bit.
FleetRun run_fleet(const FleetSpec& spec, const TrafficSpec& traffic, ServingLoop loop = ServingLoop::fast);
// The same fed by a given stream (closed-loop sources included).
FleetRun run_fleet(const FleetSpec& spec, TrafficSource& stream, const FleetTraffic& info,
                   ServingLoop loop = ServingLoop::fast);

}  // namespace ctwin
