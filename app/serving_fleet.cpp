#include "serving_fleet.hpp"

#include <stdexcept>

#include "workloads/serving_replicas.hpp"

namespace ctwin {

ServingFleetRun run_serving_job(const ServingJob& job, const ServingHooks& hooks, int threads) {
  ServingFleetRun f;
  f.replicas = job.data_parallel_size;
  if (job.disaggregation) {
    if (hooks.on_iteration || hooks.on_request)
      throw std::invalid_argument("run_serving_job: hooks observe one replica; a disaggregated job runs two pools");
    const DisaggregationSpec& s = *job.disaggregation;
    f.replicas = s.prefill_replicas + s.decode_replicas;
    DisaggregatedRun d = run_disaggregated(s, job.scheduler, job.scheduler, job.traffic);
    f.run.capacity = d.prefill_capacity.refusal.empty() ? d.decode_capacity : d.prefill_capacity;
    f.run.result = d.merged;
    f.disaggregated = std::move(d);
    return f;
  }
  if (job.fleet) {
    if (hooks.on_iteration || hooks.on_request)
      throw std::invalid_argument("run_serving_job: hooks observe one replica; a routed fleet runs several");
    FleetRun run = run_fleet(*job.fleet, job.traffic);
    f.replicas = 0;
    for (const FleetPool& p : job.fleet->pools) f.replicas += p.replicas;
    f.run.capacity = run.pools.front().capacity;
    for (const FleetPoolResult& p : run.pools)
      if (!p.capacity.refusal.empty()) f.run.capacity = p.capacity;
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
  return f;
}

}  // namespace ctwin
