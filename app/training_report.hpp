// The training report: JSON (stable keys, never renamed) and a readable table.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

nlohmann::ordered_json training_report_json(const Scenario& sc, const TrainingResult& r);
std::string training_report_text(const Scenario& sc, const TrainingResult& r);

}  // namespace ctwin
