// The training report: JSON (stable keys, never renamed) and a readable table.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// What the run should tell its user besides the figures: memory within the scenario's
// /training/memory_margin of the GPU's capacity, or out of memory. `ctwin run` prints each on
// stderr and --json lists them under "warnings".
std::vector<std::string> training_warnings(const Scenario& sc, const TrainingResult& r);

nlohmann::ordered_json training_report_json(const Scenario& sc, const TrainingResult& r);
std::string training_report_text(const Scenario& sc, const TrainingResult& r);

}  // namespace ctwin
