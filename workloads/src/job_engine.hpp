// The job engine's pieces shared by its files (not an API): the step-time cache and the
// replication runner.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "workloads/job.hpp"

namespace ctwin {

// The per-step time split of one configuration (seconds per step; sums to eff_s).
struct StepSplit {
  double step_s = 0;  // step_fn(config)
  double eff_s = 0;   // step + data stall: the wall time a step takes
  double tokens = 0;  // tokens per step
  double productive_s = 0;
  double elastic_s = 0;
  double straggler_s = 0;
  double background_s = 0;
  double data_s = 0;
};

// step_fn's answers, one call per distinct configuration (over every replication that shares
// the cache), and the splits derived from them. per_step: the benchmark's baseline, which asks
// step_fn again for every step it runs.
struct JobStepCache {
  explicit JobStepCache(const StepTimeFn& f, bool per_step_ = false) : fn(f), per_step(per_step_) {}
  const StepTimeFn& fn;
  bool per_step = false;
  double step(const JobConfiguration& c);
  const StepSplit* split(const JobConfiguration& c) const;
  const StepSplit& put_split(const JobConfiguration& c, const StepSplit& s);
  std::size_t calls() const { return steps_.size(); }

 private:
  std::vector<std::pair<JobConfiguration, double>> steps_;
  std::vector<std::pair<JobConfiguration, std::unique_ptr<StepSplit>>> splits_;
};

void check_job_inputs(const JobSpec& spec, const JobInputs& in);
// One replication with a shared cache (no input checks).
JobResult run_replication(const JobSpec& spec, const JobInputs& in, JobStepCache& cache, int replication);
// 1 / the summed rate of the random causes that roll back work (not planned, not absorbed flaps)
// at the full job; infinity when none.
double job_mtbf_s(const JobSpec& spec, const JobInputs& in);

}  // namespace ctwin
