#include "serving_fleet.hpp"

#include <stdexcept>

#include "workloads/serving_replicas.hpp"

namespace ctwin {

ServingFleetRun run_serving_job(const ServingJob& job, const ServingHooks& hooks, int threads) {
  ServingFleetRun f;
  f.replicas = job.data_parallel_size;
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
