// The serving report: JSON (stable keys, never renamed; issue 14 lists the minimum) and a
// readable table, from one replica's run.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {

using ServingRun = ServingReplicaRun;

// Suspicious outcomes worth a line on stderr: rejected requests, preemptions, a replica that
// never drained its queue (overloaded), a KV cache that fits fewer than one max_model_len request.
std::vector<std::string> serving_warnings(const Scenario& sc, const ServingRun& run);

nlohmann::ordered_json serving_report_json(const Scenario& sc, const ServingRun& run);
std::string serving_report_text(const Scenario& sc, const ServingRun& run);

}  // namespace ctwin
