#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "host_resources.hpp"
#include "job_report.hpp"
#include "report_format.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sim/trace.hpp"
#include "training_report.hpp"
#include "workloads/run_estimate.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

// Why the run will not fit in `limit` bytes, what dominates, and what to do about it.
std::string memory_refusal(const RunEstimate& e, double limit, const std::string& limit_what, const TrainingConfig& cfg,
                           const TrainingOptions& opt) {
  std::string s = "the run needs an estimated " + human_bytes(static_cast<double>(e.host_bytes)) +
                  " of host memory, over the limit of " + human_bytes(limit) + " (" + limit_what +
                  "); refused before simulating\n";
  s += "  " + with_commas(e.ops) + " ops and " + with_commas(e.deps) + " dependencies of " +
       std::to_string(e.simulated_gpus) + " simulated GPUs" + (e.folded ? "" : " (every data-parallel replica)") +
       ": " + human_bytes(static_cast<double>(e.program_bytes)) + "\n";
  if (e.trace_host_bytes > 0) {
    s += "  " + with_commas(e.trace_events) + " trace events: " + human_bytes(static_cast<double>(e.trace_host_bytes)) +
         "\n";
  }
  s += "to fit:\n";
  const int dp = cfg.parallel.dp;
  if (!e.folded && dp > 1) {
    if (cfg.noise.active() || opt.flow_network) {
      s += std::string("  every replica is simulated because ") +
           (opt.flow_network ? "the network fidelity is flow" : "noise is on") +
           ": the analytical fidelity without noise folds them into one\n";
    } else {
      s += "  drop --no-fold: folded (one data-parallel replica of " + std::to_string(e.simulated_gpus / dp) +
           " GPUs stands for all " + std::to_string(dp) + ") it would need an estimated " +
           human_bytes(static_cast<double>(e.folded_host_bytes)) + "\n";
    }
  }
  if (e.trace_host_bytes > 0) {
    s += "  drop --trace: it would need " + human_bytes(static_cast<double>(e.program_bytes)) + "\n";
  }
  s += "  fewer micro-batches per replica (" + std::to_string(e.micro_batches) +
       " now): a smaller /training/global_batch or a larger /training/micro_batch; memory grows with them";
  return s;
}

}  // namespace

int cmd_run(const Args& args) {
  const std::string usage =
      "usage: ctwin run SCENARIO.json [--json] [--trace OUT.json|OUT.ctt] [--set /pointer=value]... [--fail-on-oom]\n"
      "                 [--max-memory BYTES]\n\n"
      "Simulates the scenario and prints a report. Training: step time, tokens/s, TFLOP/s per GPU, MFU,\n"
      "where the time goes and memory per GPU. Serving (/kind \"serving\"): TTFT, TPOT and end-to-end\n"
      "latency percentiles, throughput, goodput, KV-cache use and preemptions (docs/serving.md).\n"
      "Keys are documented in docs/scenarios.md.\n"
      "Warnings (memory within /training/memory_margin of capacity, out of memory) go to stderr.\n"
      "Before simulating, the run's host memory and trace size are estimated (docs/resource-limits.md):\n"
      "a run that would not fit in memory, or a trace that would not fit on its file system, is refused.\n"
      "Exit status: 0 done, 2 bad input or a run refused for its size, 3 with --fail-on-oom when the layout does not "
      "fit in memory.";
  auto p =
      parse_args(args, usage,
                 {{"--json", "", "print the machine-readable report on stdout"},
                  {"--trace", "FILE", "write a trace: .json (Chrome/Perfetto) or .ctt (ClusterTwin binary)"},
                  {"--set", "/POINTER=VALUE", "override a scenario key, e.g. --set /training/parallelism/tp=2", true},
                  {"--no-fold", "", "simulate every data-parallel replica instead of one representative"},
                  {"--whole-step", "",
                   "simulate every micro-batch instead of three short runs and the steady period (same figures)"},
                  {"--force", "", "overwrite an existing trace file"},
                  {"--max-memory", "BYTES",
                   "refuse a run whose estimated host memory exceeds this (8G, 512M; default 90% of MemAvailable)"},
                  {"--fail-on-oom", "", "exit with status 3 (after the report) when the peak stage does not fit"}});
  if (!p) return kExitOk;
  if (p->positional.size() != 1) {
    throw InputError("", "SCENARIO", "expected exactly one scenario file", "ctwin run SCENARIO.json");
  }
  // The host memory a run may take: --max-memory, or 90% of what the kernel says is available.
  double memory_limit = std::numeric_limits<double>::infinity();
  std::string limit_what = "--max-memory";
  if (p->has("--max-memory")) {
    memory_limit = p->bytes("--max-memory", 0);
    if (memory_limit < 1) {
      throw InputError("", "--max-memory", "'" + *p->get("--max-memory") + "' is no memory at all",
                       "a byte count such as 512M or 8G");
    }
  } else if (const auto avail = host_available_memory()) {
    memory_limit = 0.9 * static_cast<double>(*avail);
    limit_what = "90% of MemAvailable; --max-memory to change";
  }
  std::vector<Override> overrides;
  for (const auto& s : p->all("--set")) overrides.push_back(parse_override(s));
  const Scenario sc = load_scenario(p->positional[0], overrides);
  if (sc.kind == JobKind::serving) return run_serving_scenario(sc, *p);

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
  opt.fold_micro_batches = !p->has("--whole-step");
  opt.trace = trace_path.has_value();
  ProgressLine progress("simulating");
  opt.progress = [&progress](double f) { progress.update(f); };
  const Cluster cluster = build_cluster(sc.cluster);
  const TrainingJob& job = training_job(sc);
  // What the run will take, known before it runs: refuse what cannot fit rather than die in it.
  const RunEstimate est = estimate_training_run(job.model, job.training, cluster, opt, /*count_events=*/false);
  if (static_cast<double>(est.host_bytes) > memory_limit) {
    progress.clear();
    std::fprintf(stderr, "error: %s\n", memory_refusal(est, memory_limit, limit_what, job.training, opt).c_str());
    return kExitBadInput;
  }
  std::uint64_t trace_bytes = 0;
  if (trace_path) {
    trace_bytes =
        std::filesystem::path(*trace_path).extension() == ".json" ? est.trace_bytes_json : est.trace_bytes_ctt;
    const auto free = free_space_for(*trace_path);
    if (free && trace_bytes > *free) {
      progress.clear();
      std::string fix = "write it where there is room";
      if (std::filesystem::path(*trace_path).extension() == ".json") {
        fix += ", as .ctt (an estimated " + human_bytes(static_cast<double>(est.trace_bytes_ctt)) + ")";
      }
      if (!est.folded && job.training.parallel.dp > 1) fix += ", drop --no-fold";
      fix += ", or fewer micro-batches (" + with_commas(est.trace_events) + " trace events now)";
      std::fprintf(stderr,
                   "error: --trace: the trace needs an estimated %s but the file system of '%s' has %s free; "
                   "refused before simulating\nto fit: %s\n",
                   human_bytes(static_cast<double>(trace_bytes)).c_str(), trace_path->c_str(),
                   human_bytes(static_cast<double>(*free)).c_str(), fix.c_str());
      return kExitBadInput;
    }
  }
  TrainingResult r = simulate_training(job.model, job.training, cluster, opt);
  progress.clear();
  // /job: the whole job around the step (docs/jobs.md); its timeline is the trace, the step in it.
  std::optional<JobReport> job_report;
  if (job.job) {
    ProgressLine job_progress("job");
    job_report = run_scenario_job(sc, r, [&job_progress](int done, int total) {
      job_progress.update(static_cast<double>(done) / total,
                          std::to_string(done) + "/" + std::to_string(total) + " replications");
    });
    job_progress.clear();
  }
  if (trace_path) {
    if (job_report) {
      write_trace_file(job_trace(sc, *job_report, &r.trace), *trace_path, p->has("--force"));
    } else {
      write_trace_file(r.trace, *trace_path, p->has("--force"));
    }
  }
  if (p->has("--json")) {
    auto j = training_report_json(sc, r);
    if (job_report) j["job"] = job_report_json(sc, *job_report);
    j["resources"] = {{"host_bytes_estimate", est.host_bytes},
                      {"simulated_gpus", est.simulated_gpus},
                      {"ops", est.ops},
                      {"trace_bytes_estimate", trace_bytes}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(training_report_text(sc, r).c_str(), stdout);
    std::printf("  host memory: an estimated %s of the %s allowed%s\n",
                human_bytes(static_cast<double>(est.host_bytes)).c_str(),
                std::isfinite(memory_limit) ? human_bytes(memory_limit).c_str() : "unlimited",
                trace_path ? (", trace an estimated " + human_bytes(static_cast<double>(trace_bytes))).c_str() : "");
    if (trace_path) std::printf("\n  trace written to %s\n", trace_path->c_str());
    if (job_report) std::fputs(job_report_text(sc, *job_report).c_str(), stdout);
  }
  for (const auto& w : training_warnings(sc, r)) std::fprintf(stderr, "ctwin: warning: %s\n", w.c_str());
  if (p->has("--fail-on-oom") && r.memory.oom) return kExitOutOfMemory;
  return kExitOk;
}

}  // namespace ctwin
