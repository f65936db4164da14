// `ctwin run` on a serving scenario: one replica, or /serving/data_parallel_size replicas behind a
// round-robin split, under its traffic (docs/serving.md), and with --trace (one replica only)
// its iterations, requests and counters (workloads/serving_trace.hpp).
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
    // A trace shows one engine's iterations; several replicas' would interleave on one timeline.
    if (job.data_parallel_size > 1) {
      throw InputError(sc.file, "/serving/data_parallel_size",
                       "is " + std::to_string(job.data_parallel_size) + ", but --trace records one replica",
                       "no --trace for a fleet, or --set /serving/data_parallel_size=1 to trace one replica");
    }
    if (job.disaggregation) {
      throw InputError(sc.file, "/serving/disaggregation", "is set, but --trace records one replica",
                       "no --trace for a disaggregated job");
    }
    if (job.fleet) {
      throw InputError(sc.file, "/serving",
                       "sets a routed fleet (router, pools or failures), but --trace records one replica",
                       "no --trace for a routed fleet");
    }
    // Never overwrite what a user wrote without being asked; say so before simulating.
    check_output_path(tp, p.has("--force"), "--trace");
  }
  // Only a trace keeps per-request records: without --trace the hooks stay empty and memory flat.
  std::optional<ServingTraceCollector> collector;
  ServingHooks hooks;
  if (trace_path) hooks = collector.emplace(job.deployment.tp, job.deployment.pp).hooks();
  ProgressLine progress("simulating");
  const ServingFleetRun fleet = run_serving_job(job, hooks);
  const ServingRun& run = fleet.run;
  progress.clear();
  if (!run.capacity.refusal.empty()) {
    std::fprintf(stderr, "error: %s: the replica cannot run: %s\n", sc.file.c_str(), run.capacity.refusal.c_str());
    return kExitOutOfMemory;
  }
  if (collector) {
    write_trace_file(collector->build(run.result, run.capacity.num_gpu_blocks), *trace_path, p.has("--force"));
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
