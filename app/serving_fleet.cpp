#include "serving_fleet.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "workloads/serving_replicas.hpp"

namespace ctwin {
namespace {

// The autoscaler's input for one pool from what the fleet's tick saw (serving_autoscaler.hpp):
// per-replica metrics summed over the serving replicas; ttft_p99_s the interval's p99;
// gpu_utilization each serving replica's iteration time over the interval, summed. Requests the
// router holds for a cold start are in flight (scale to zero's activity).
AutoscalerInput autoscaler_input(AutoscaleMetric metric, const FleetPoolMetrics& m, double interval_s) {
  AutoscalerInput in;
  in.ready = m.serving;
  in.total = m.serving + m.starting;
  in.in_flight = m.outstanding + m.held;
  switch (metric) {
    case AutoscaleMetric::queue_length:
      if (m.serving > 0) in.metric = static_cast<double>(m.waiting);
      break;
    case AutoscaleMetric::running_requests:
      if (m.serving > 0) in.metric = static_cast<double>(m.running);
      break;
    case AutoscaleMetric::kv_utilization:
      if (m.serving > 0) in.metric = m.kv_utilization * m.serving;
      break;
    case AutoscaleMetric::ttft_p99_s:
      in.metric = m.ttft_p99_s;
      break;
    case AutoscaleMetric::gpu_utilization:
      if (m.serving > 0 && interval_s > 0) in.metric = m.busy_s / interval_s;
      break;
  }
  return in;
}

// /serving/autoscaling and /serving/admission on the fleet: each pool starts within [min, max]
// replicas, an added one serves after the cold start of its weights (or a warm-pool start), and
// one Autoscaler per pool decides every sync period. Made per run: the autoscalers keep state.
FleetSpec with_fleet_policies(const ServingJob& job, FleetSpec spec) {
  if (job.admission) spec.admission = *job.admission;
  if (!job.autoscaling) return spec;
  const ServingAutoscaling& a = *job.autoscaling;
  struct State {
    std::vector<Autoscaler> scalers;
    std::vector<WarmPool> warm;
  };
  auto st = std::make_shared<State>();
  for (FleetPool& p : spec.pools) {
    p.replicas = std::clamp(p.replicas, a.hpa.min_replicas, a.hpa.max_replicas);
    p.cold_start_s = cold_start_s(a.start, replica_weight_bytes(p.deployment));
    st->scalers.emplace_back(a.hpa);
    st->warm.emplace_back(a.warm_pool, p.cold_start_s, a.start.warm_start_s);
  }
  spec.control.interval_s = a.hpa.sync_period_s;
  spec.control.hold_when_empty = a.hpa.min_replicas == 0;
  spec.control.desired = [st, metric = a.hpa.metric](const FleetMetrics& m) {
    std::vector<int> want;
    for (std::size_t p = 0; p < m.pools.size(); ++p)
      want.push_back(
          st->scalers[p].recommend(seconds(m.t_s), autoscaler_input(metric, m.pools[p], m.interval_s)).replicas);
    return want;
  };
  if (a.warm_pool > 0) {
    spec.control.start_s = [st](int pool, double t_s) {
      return (st->warm[static_cast<std::size_t>(pool)].start(seconds(t_s)) - seconds(t_s)).seconds();
    };
  }
  return spec;
}

}  // namespace

ServingFleetRun run_serving_job(const ServingJob& job, const ServingHooks& hooks, int threads,
                                const FleetHooks& fleet_hooks, const DisaggHooks& disagg_hooks) {
  ServingFleetRun f;
  f.replicas = job.data_parallel_size;
  if (job.disaggregation) {
    if (hooks.on_iteration || hooks.on_request)
      throw std::invalid_argument("run_serving_job: hooks observe one replica; a disaggregated job runs two pools");
    const DisaggregationSpec& s = *job.disaggregation;
    f.replicas = s.prefill_replicas + s.decode_replicas;
    DisaggregatedRun d =
        run_disaggregated(s, job.scheduler, job.scheduler, job.traffic, ServingLoop::fast, disagg_hooks);
    f.run.capacity = d.prefill_capacity.refusal.empty() ? d.decode_capacity : d.prefill_capacity;
    f.run.result = d.merged;
    f.disaggregated = std::move(d);
    return f;
  }
  if (job.fleet) {
    if (hooks.on_iteration || hooks.on_request)
      throw std::invalid_argument("run_serving_job: hooks observe one replica; a routed fleet runs several");
    FleetSpec spec = with_fleet_policies(job, *job.fleet);
    spec.hooks = fleet_hooks;
    FleetRun run = run_fleet(spec, job.traffic);
    f.replicas = 0;
    for (const FleetPool& p : spec.pools) f.replicas += p.replicas;
    f.run.capacity = run.pools.front().capacity;
    for (const FleetPoolResult& p : run.pools) {
      if (!p.capacity.refusal.empty()) f.run.capacity = p.capacity;
      add_host_tier_stats(f.run.offload, p.offload);
    }
    f.run.result = run.merged;
    f.fleet = std::move(run);
    return f;
  }
  if (f.replicas == 1) {
    f.run = run_serving_replica(job.deployment, job.scheduler, job.traffic, hooks);
    return f;
  }
  if (hooks.on_iteration || hooks.on_request)
    throw std::invalid_argument("run_serving_job: hooks observe one replica; this job runs several");
  ServingReplicasRun fleet =
      run_serving_replicas(job.deployment, job.scheduler, job.traffic, f.replicas, ServingLoop::fast, threads);
  f.run.capacity = std::move(fleet.capacity);
  f.run.result = std::move(fleet.merged);
  f.run.offload = fleet.offload;
  return f;
}

}  // namespace ctwin
