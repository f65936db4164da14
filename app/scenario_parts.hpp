// The parts of a scenario, each read by its own file (app/scenario_*.cpp); app/scenario.cpp
// assembles them. Internal to app/.
#pragma once

#include <optional>
#include <string>

#include "scenario.hpp"
#include "sim/json_reader.hpp"

namespace ctwin {

// scenario_catalog.cpp: the builtin catalogs with /catalog/gpus and /catalog/models merged on.
struct ScenarioCatalogs {
  CatalogEntries gpus;
  CatalogEntries models;
};
ScenarioCatalogs read_catalogs(const JsonObject& top);

// scenario_cluster.cpp: /profile (a shipped name, or {"file": PATH} relative to the scenario).
std::optional<Profile> read_profile(const JsonObject& top);
// scenario_cluster.cpp: /cluster, inline or from /cluster/file, its link figures from `profile`
// where given; deprecated keys append their warnings to `warnings`.
ClusterSpec read_cluster(const JsonObject& top, const CatalogEntries& gpus, const std::optional<Profile>& profile,
                         std::vector<std::string>* warnings = nullptr);

// scenario_model.cpp: /model. A string model is first rewritten as {"preset": NAME}.
void normalise_model(Json& root);
ModelSpec read_model(const Json& root, const std::string& file, const CatalogEntries& models);

// scenario_training.cpp: /training, its layout checked against the model and cluster; with
// auto_layout (/training/parallelism is "auto") the layout is left at all 1, dp = GPUs, unchecked.
TrainingConfig read_training(const JsonObject& o, const ModelSpec& m, const ClusterSpec& cl, bool auto_layout = false);

// scenario_network.cpp: /network into sc.fidelity and sc.collectives.
void read_network(const JsonObject& top, Scenario& sc);

// scenario_job.cpp: the job /kind names.
// scenario_fleet.cpp: /serving/router, /serving/pools, /serving/failures (none given: nullopt).
std::optional<FleetSpec> read_serving_fleet(const JsonObject& top, const ServingJob& job,
                                            const ScenarioCatalogs& catalogs, const Scenario& sc);
Job read_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs, const Scenario& sc);

}  // namespace ctwin
