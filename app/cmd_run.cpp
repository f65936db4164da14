#include <cstdio>
#include <filesystem>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sim/trace.hpp"
#include "training_report.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

int cmd_run(const Args& args) {
  const std::string usage =
      "usage: ctwin run SCENARIO.json [--json] [--trace OUT.json|OUT.ctt] [--set /pointer=value]... [--fail-on-oom]\n\n"
      "Simulates the scenario and prints a report: step time, tokens/s, TFLOP/s per GPU, MFU,\n"
      "where the time goes and memory per GPU. Keys are documented in docs/scenarios.md.\n"
      "Warnings (memory within /training/memory_margin of capacity, out of memory) go to stderr.\n"
      "Exit status: 0 done, 2 bad input, 3 with --fail-on-oom when the layout does not fit in memory.";
  auto p =
      parse_args(args, usage,
                 {{"--json", "", "print the machine-readable report on stdout"},
                  {"--trace", "FILE", "write a trace: .json (Chrome/Perfetto) or .ctt (ClusterTwin binary)"},
                  {"--set", "/POINTER=VALUE", "override a scenario key, e.g. --set /training/parallelism/tp=2", true},
                  {"--no-fold", "", "simulate every data-parallel replica instead of one representative"},
                  {"--force", "", "overwrite an existing trace file"},
                  {"--fail-on-oom", "", "exit with status 3 (after the report) when the peak stage does not fit"}});
  if (!p) return kExitOk;
  if (p->positional.size() != 1) {
    throw InputError("", "SCENARIO", "expected exactly one scenario file", "ctwin run SCENARIO.json");
  }
  std::vector<Override> overrides;
  for (const auto& s : p->all("--set")) overrides.push_back(parse_override(s));
  const Scenario sc = load_scenario(p->positional[0], overrides);

  const auto trace_path = p->get("--trace");
  if (trace_path) {
    const std::filesystem::path tp(*trace_path);
    if (tp.extension() != ".json" && tp.extension() != ".ctt") {
      throw InputError("", "--trace", "'" + *trace_path + "' has an unknown extension", "a .json or .ctt file name");
    }
    // Never overwrite what a user wrote without being asked; say so before simulating.
    check_output_path(tp, p->has("--force"), "--trace");
  }
  TrainingOptions opt = training_options(sc);
  opt.fold = !p->has("--no-fold");
  opt.trace = trace_path.has_value();
  ProgressLine progress("simulating");
  opt.progress = [&progress](double f) { progress.update(f); };
  const Cluster cluster = build_cluster(sc.cluster);
  TrainingResult r = simulate_training(training_job(sc).model, training_job(sc).training, cluster, opt);
  progress.clear();
  if (trace_path) write_trace_file(r.trace, *trace_path, p->has("--force"));
  if (p->has("--json")) {
    std::printf("%s\n", training_report_json(sc, r).dump(2).c_str());
  } else {
    std::fputs(training_report_text(sc, r).c_str(), stdout);
    if (trace_path) std::printf("\n  trace written to %s\n", trace_path->c_str());
  }
  for (const auto& w : training_warnings(sc, r)) std::fprintf(stderr, "ctwin: warning: %s\n", w.c_str());
  if (p->has("--fail-on-oom") && r.memory.oom) return kExitOutOfMemory;
  return kExitOk;
}

}  // namespace ctwin
