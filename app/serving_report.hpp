// The serving report: JSON (stable keys, never renamed; issue 14 lists the minimum) and a
// readable table, from a fleet's run (one replica, or data_parallel_size behind a round-robin
// split: serving_fleet.hpp). Per-replica figures (/replica, /kv_cache, /memory_per_gpu) are one
// replica's; counts, rates, latencies and /gpu_time_s the fleet's (summed); /fleet/gpus is every replica's GPUs, which
// /throughput/output_tokens_per_s_per_gpu divides by.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "serving_fleet.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {

using ServingRun = ServingReplicaRun;

// Suspicious outcomes worth a line on stderr: rejected requests, preemptions, a replica that
// never drained its queue (overloaded), a KV cache that fits fewer than one max_model_len request.
std::vector<std::string> serving_warnings(const Scenario& sc, const ServingFleetRun& run);

nlohmann::ordered_json serving_report_json(const Scenario& sc, const ServingFleetRun& run);
std::string serving_report_text(const Scenario& sc, const ServingFleetRun& run);

}  // namespace ctwin
