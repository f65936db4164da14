// `ctwin run` on a serving scenario: one replica, or /serving/data_parallel_size replicas behind a
// round-robin split, under its traffic (docs/serving.md). With --trace: one replica's iterations,
// requests and counters (workloads/serving_trace.hpp); a routed fleet's or a disaggregated job's
// replica lifetimes, iterations, KV transfers and per-pool counters
// (workloads/serving_fleet_trace.hpp). A round-robin split (data_parallel_size > 1) has none.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "serving_fleet.hpp"
#include "serving_report.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sim/trace.hpp"
#include "workloads/serving_fleet_trace.hpp"
#include "workloads/serving_trace.hpp"

namespace ctwin {

int run_serving_scenario(const Scenario& sc, const ParsedArgs& p) {
  const ServingJob& job = serving_job(sc);
  const auto trace_path = p.get("--trace");
  if (trace_path) {
    const std::filesystem::path tp(*trace_path);
    if (tp.extension() != ".json" && tp.extension() != ".ctt") {
      throw InputError("", "--trace", "'" + *trace_path + "' has an unknown extension", "a .json or .ctt file name");
    }
    // The round-robin split runs its replicas apart (on threads): there is no fleet loop to observe.
    if (job.data_parallel_size > 1 && !job.fleet && !job.disaggregation) {
      throw InputError(sc.file, "/serving/data_parallel_size",
                       "is " + std::to_string(job.data_parallel_size) +
                           ", but --trace records one replica or a routed fleet, not a round-robin split",
                       "--set /serving/data_parallel_size=1 to trace one replica, or a /serving/router to trace "
                       "the fleet");
    }
    // Never overwrite what a user wrote without being asked; say so before simulating.
    check_output_path(tp, p.has("--force"), "--trace");
  }
  // Only a trace keeps per-request records: without --trace the hooks stay empty and memory flat.
  std::optional<ServingTraceCollector> collector;
  std::optional<FleetTraceCollector> fleet_collector;
  ServingHooks hooks;
  FleetHooks fleet_hooks;
  DisaggHooks disagg_hooks;
  if (trace_path && job.disaggregation) {
    disagg_hooks = fleet_collector.emplace(std::vector<std::string>{"prefill", "decode"})
                       .disagg_hooks(job.disaggregation->prefill_replicas, job.disaggregation->decode_replicas);
  } else if (trace_path && job.fleet) {
    std::vector<std::string> pools;
    for (const FleetPool& fp : job.fleet->pools) pools.push_back(fp.name);
    fleet_hooks = fleet_collector.emplace(std::move(pools)).fleet_hooks();
  } else if (trace_path) {
    hooks = collector.emplace(job.deployment.tp, job.deployment.pp).hooks();
  }
  ProgressLine progress("simulating");
  const ServingFleetRun fleet = run_serving_job(job, hooks, 0, fleet_hooks, disagg_hooks);
  const ServingRun& run = fleet.run;
  progress.clear();
  if (!run.capacity.refusal.empty()) {
    std::fprintf(stderr, "error: %s: the replica cannot run: %s\n", sc.file.c_str(), run.capacity.refusal.c_str());
    return kExitOutOfMemory;
  }
  if (collector) {
    write_trace_file(collector->build(run.result, run.capacity.num_gpu_blocks), *trace_path, p.has("--force"));
  } else if (fleet_collector && fleet.fleet) {
    write_trace_file(fleet_collector->build(*fleet.fleet), *trace_path, p.has("--force"));
  } else if (fleet_collector && fleet.disaggregated) {
    write_trace_file(fleet_collector->build(*fleet.disaggregated), *trace_path, p.has("--force"));
  }
  if (p.has("--json")) {
    std::printf("%s\n", serving_report_json(sc, fleet).dump(2).c_str());
  } else {
    std::fputs(serving_report_text(sc, fleet).c_str(), stdout);
    if (trace_path) std::printf("\n  trace written to %s\n", trace_path->c_str());
  }
  for (const auto& w : serving_warnings(sc, fleet)) std::fprintf(stderr, "ctwin: warning: %s\n", w.c_str());
  return kExitOk;
}

}  // namespace ctwin
