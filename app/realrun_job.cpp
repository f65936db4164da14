#include "realrun_job.hpp"

#include "scenario.hpp"
#include "sim/error.hpp"

namespace ctwin {

RealrunSetup prepare_realrun(const RealrunRequest& req) {
  std::vector<Override> overrides;
  for (const auto& s : req.sets) overrides.push_back(parse_override(s));
  const std::string& path = req.scenario_path;
  const Scenario sc = load_scenario(path, overrides);

  RealrunSetup s;
  realrun::RealrunJob& job = s.job;
  job.backend = req.backend;
  job.created_by = req.created_by;
  job.scenario_file = path;
  // The scenario as run: the file with the --set overrides applied, for validate to re-simulate.
  job.scenario = parse_json(read_input_file(path, path, "", "a readable scenario JSON file"), path);
  for (const auto& ov : overrides) apply_override(job.scenario, ov, path);
  job.cluster = sc.cluster;
  job.config = sc.realrun;
  if (sc.kind == JobKind::serving) {
    const ServingJob& sj = serving_job(sc);
    job.model = sj.model;
    job.serving = realrun::ServingReplayJob{sj.deployment, sj.scheduler};
  } else {
    const TrainingJob& tj = training_job(sc);
    job.model = tj.model;
    job.training = tj.training;
    job.options = training_options(sc);
  }
  if (req.repeats >= 0) job.config.repeats = req.repeats;
  if (req.warmup >= 0) job.config.warmup = req.warmup;
  if (req.timeout_s > 0) job.config.timeout_s = req.timeout_s;

  s.plan = realrun::plan_realrun(job);
  if (req.ranks != 0 && req.ranks != s.plan.ranks) {
    throw InputError(
        "", "--ranks", std::to_string(req.ranks) + " for a layout of " + std::to_string(s.plan.ranks) + " GPUs",
        sc.kind == JobKind::serving ? "the replica's GPU count (set /serving/tensor_parallel_size to change it)"
                                    : "the layout's GPU count (set /training/parallelism to change it)");
  }
  return s;
}

}  // namespace ctwin
