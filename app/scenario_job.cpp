// The job a scenario runs, by /kind: "training" (the default) reads /model and /training;
// "serving" is named but not built yet. The serving loader will sit beside read_training_job.
#include <memory>

#include "scenario_parts.hpp"
#include "sim/error.hpp"

namespace ctwin {
namespace {

TrainingJob read_training_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs,
                              const Scenario& sc) {
  TrainingJob job;
  job.model = read_model(root, top.file(), catalogs.models);
  job.training = read_training(top.object("training"), job.model, sc.cluster);
  job.training.seed = sc.seed;
  return job;
}

}  // namespace

Job read_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs, const Scenario& sc) {
  switch (sc.kind) {
    case JobKind::training:
      return read_training_job(top, root, catalogs, sc);
    case JobKind::serving:
      break;
  }
  top.fail("kind", "found \"serving\": serving scenarios are not built yet",
           "\"training\" (or leave /kind out; serving comes with its own loader)");
}

const TrainingJob& training_job(const Scenario& sc) {
  if (const auto* t = std::get_if<TrainingJob>(&sc.job)) return *t;
  throw InputError(sc.file, "/kind", std::string("found \"") + job_kind_names.name(sc.kind) + "\"",
                   "\"training\" for this command");
}

TrainingOptions training_options(const Scenario& sc) {
  TrainingOptions opt;
  opt.flow_network = sc.fidelity == NetworkFidelity::flow;
  opt.collectives = sc.collectives;
  if (sc.profile) {
    const Dtype dtype = training_job(sc).training.precision.compute;
    opt.cost_model = std::make_shared<RooflineCostModel>(compute_model(*sc.profile, sc.cluster.gpu, dtype));
  }
  return opt;
}

}  // namespace ctwin
