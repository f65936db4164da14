// `ctwin run` on a serving scenario: one replica under its traffic (docs/serving.md).
#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "serving_report.hpp"
#include "sim/error.hpp"

namespace ctwin {

int run_serving_scenario(const Scenario& sc, const ParsedArgs& p) {
  const ServingJob& job = serving_job(sc);
  ProgressLine progress("simulating");
  const ServingRun run = run_serving_replica(job.deployment, job.scheduler, job.traffic);
  progress.clear();
  if (!run.capacity.refusal.empty()) {
    std::fprintf(stderr, "error: %s: the replica cannot run: %s\n", sc.file.c_str(), run.capacity.refusal.c_str());
    return kExitOutOfMemory;
  }
  if (p.has("--json")) {
    std::printf("%s\n", serving_report_json(sc, run).dump(2).c_str());
  } else {
    std::fputs(serving_report_text(sc, run).c_str(), stdout);
  }
  for (const auto& w : serving_warnings(sc, run)) std::fprintf(stderr, "ctwin: warning: %s\n", w.c_str());
  return kExitOk;
}

}  // namespace ctwin
