#include "realrun_job.hpp"

#include "scenario.hpp"
#include "sim/error.hpp"

namespace ctwin {

RealrunSetup prepare_realrun(const RealrunRequest& req) {
  std::vector<Override> overrides;
  for (const auto& s : req.sets) overrides.push_back(parse_override(s));
  const std::string& path = req.scenario_path;
  const Scenario sc = load_scenario(path, overrides);
  if (sc.kind != JobKind::training) {
    throw InputError(path, "/kind", "'serving': realrun measures training steps", "a training scenario");
  }
  const TrainingJob& tj = training_job(sc);

  RealrunSetup s;
  realrun::RealrunJob& job = s.job;
  job.backend = req.backend;
  job.created_by = req.created_by;
  job.scenario_file = path;
  // The scenario as run: the file with the --set overrides applied, for validate to re-simulate.
  job.scenario = parse_json(read_input_file(path, path, "", "a readable scenario JSON file"), path);
  for (const auto& ov : overrides) apply_override(job.scenario, ov, path);
  job.model = tj.model;
  job.training = tj.training;
  job.cluster = sc.cluster;
  job.options = training_options(sc);
  job.config = sc.realrun;
  if (req.repeats >= 0) job.config.repeats = req.repeats;
  if (req.warmup >= 0) job.config.warmup = req.warmup;
  if (req.timeout_s > 0) job.config.timeout_s = req.timeout_s;

  s.plan = realrun::plan_realrun(job);
  if (req.ranks != 0 && req.ranks != s.plan.ranks) {
    throw InputError("", "--ranks",
                     std::to_string(req.ranks) + " for a layout of " + std::to_string(s.plan.ranks) + " GPUs",
                     "the layout's GPU count (set /training/parallelism to change it)");
  }
  return s;
}

}  // namespace ctwin
