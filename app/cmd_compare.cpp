// `ctwin compare A.json [B.json]`: simulates two scenarios of the same kind (or one with two
// sets of overrides) and prints them side by side with the change of each figure, explained by
// the breakdown's terms (app/compare_report.hpp, docs/compare.md).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "compare_ops.hpp"
#include "compare_report.hpp"
#include "scenario.hpp"
#include "serving_fleet.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sim/trace.hpp"
#include "workloads/serving_trace.hpp"

namespace ctwin {

namespace {

// One side of the comparison: its scenario, where it came from, and its trace when asked for.
struct Side {
  Scenario sc;
  std::string label;  // "FILE --set /p=v ..."
  std::optional<std::string> trace_path;
};

// --set's overrides first, then the side's own (`own_flag`: --set-a or --set-b), so a side's own
// value wins where both name a key.
Side load_side(const std::string& path, const std::vector<std::string>& common, const std::vector<std::string>& own,
               const std::string& own_flag, std::optional<std::string> trace_path) {
  std::vector<Override> overrides;
  std::string label = path;
  for (const auto& s : common) {
    overrides.push_back(parse_override(s));
    label += " --set " + s;
  }
  for (const auto& s : own) {
    overrides.push_back(parse_override(s));
    label += " " + own_flag + " " + s;
  }
  return Side{load_scenario(path, overrides), label, std::move(trace_path)};
}

void check_trace_flag(const std::optional<std::string>& path, const char* flag, bool force) {
  if (!path) return;
  const std::filesystem::path tp(*path);
  if (tp.extension() != ".json" && tp.extension() != ".ctt") {
    throw InputError("", flag, "'" + *path + "' has an unknown extension", "a .json or .ctt file name");
  }
  check_output_path(tp, force, flag);
}

TrainingResult run_training(const Side& s, bool trace) {
  TrainingOptions opt = training_options(s.sc);
  opt.trace = trace;
  ProgressLine progress("simulating " + s.sc.name);
  opt.progress = [&progress](double f) { progress.update(f); };
  const Cluster cluster = build_cluster(s.sc.cluster);
  const TrainingJob& job = training_job(s.sc);
  return simulate_training(job.model, job.training, cluster, opt);
}

// nullopt (after a message) when the replica cannot hold its weights.
std::optional<ServingFleetRun> run_serving(const Side& s, bool trace, Trace* out) {
  const ServingJob& job = serving_job(s.sc);
  if (trace && job.data_parallel_size > 1) {
    throw InputError(s.sc.file, "/serving/data_parallel_size",
                     "is " + std::to_string(job.data_parallel_size) + ": a fleet's replicas cannot share one trace",
                     "1 with --ops, --trace-a or --trace-b, or no trace flag");
  }
  std::optional<ServingTraceCollector> collector;
  ServingHooks hooks;
  if (trace) hooks = collector.emplace(job.deployment.tp, job.deployment.pp).hooks();
  ProgressLine progress("simulating " + s.sc.name);
  ServingFleetRun fleet = run_serving_job(job, hooks);
  progress.clear();
  const ServingRun& run = fleet.run;
  if (!run.capacity.refusal.empty()) {
    std::fprintf(stderr, "error: %s: the replica cannot run: %s\n", s.sc.file.c_str(), run.capacity.refusal.c_str());
    return std::nullopt;
  }
  if (collector && out) *out = collector->build(run.result, run.capacity.num_gpu_blocks);
  return fleet;
}

}  // namespace

int cmd_compare(const Args& args) {
  const std::string usage =
      "usage: ctwin compare A.json [B.json] [--set /p=v]... [--set-a /p=v]... [--set-b /p=v]... [--json]\n"
      "                     [--ops] [--trace-a OUT.ctt] [--trace-b OUT.ctt] [--top N] [--force]\n\n"
      "Simulates two scenarios of the same kind (training or serving) and prints their reports side by\n"
      "side with the change of each figure, then explains it: for training, by term of GPU 0's breakdown\n"
      "(which communication became exposed, how the bubble moved; the terms' changes add up to the step\n"
      "time's) and by memory term. With one file, B is A with --set-b's overrides (A with --set-a's).\n"
      "--set applies to both. With --ops or a trace flag both runs are traced and the ops whose total\n"
      "time changed most are listed with their first occurrence in each trace, for\n"
      "'ctwin view A.ctt --compare B.ctt --range ...' (docs/compare.md).\n"
      "Exit status: 0 done, 2 bad input (different kinds, a bad file or key), 3 a serving replica that "
      "cannot hold its weights.";
  auto p = parse_args(args, usage,
                      {{"--set", "/POINTER=VALUE", "override a key of both scenarios", true},
                       {"--set-a", "/POINTER=VALUE", "override a key of A only", true},
                       {"--set-b", "/POINTER=VALUE", "override a key of B only, e.g. --set-b /network/algo=ring", true},
                       {"--json", "", "print {\"a\": report, \"b\": report, \"diff\": {...}, \"explanation\": [...]}"},
                       {"--ops", "", "trace both runs and list the ops whose total time changed most"},
                       {"--trace-a", "FILE", "write A's trace (.ctt or .json); implies --ops"},
                       {"--trace-b", "FILE", "write B's trace (.ctt or .json); implies --ops"},
                       {"--top", "N", "how many ops --ops lists (default 8)"},
                       {"--force", "", "overwrite existing trace files"}});
  if (!p) return kExitOk;
  if (p->positional.empty() || p->positional.size() > 2) {
    throw InputError("", "SCENARIO", "expected one or two scenario files",
                     "ctwin compare A.json B.json, or ctwin compare A.json --set-b /pointer=value");
  }
  const bool one_file = p->positional.size() == 1;
  if (one_file && !p->has("--set-a") && !p->has("--set-b")) {
    throw InputError(p->positional[0], "--set-b", "one scenario and nothing to tell B from A",
                     "a second scenario file, or --set-a / --set-b overrides");
  }
  const auto trace_a = p->get("--trace-a"), trace_b = p->get("--trace-b");
  if (trace_a && trace_b && std::filesystem::path(*trace_a) == std::filesystem::path(*trace_b)) {
    throw InputError("", "--trace-b", "'" + *trace_b + "' is also --trace-a", "a different file for each run");
  }
  const double top = p->number("--top", 8);
  if (top < 1 || top != static_cast<double>(static_cast<long>(top))) {
    throw InputError("", "--top", "'" + *p->get("--top") + "' is not a count of ops", "a whole number >= 1");
  }
  check_trace_flag(trace_a, "--trace-a", p->has("--force"));
  check_trace_flag(trace_b, "--trace-b", p->has("--force"));
  const bool ops = p->has("--ops") || trace_a || trace_b;

  const Side a = load_side(p->positional[0], p->all("--set"), p->all("--set-a"), "--set-a", trace_a);
  const Side b =
      load_side(one_file ? p->positional[0] : p->positional[1], p->all("--set"), p->all("--set-b"), "--set-b", trace_b);
  if (a.sc.kind != b.sc.kind) {
    throw InputError(b.sc.file, "/kind",
                     "B is " + std::string(job_kind_names.name(b.sc.kind)) + " but A (" + a.sc.file + ") is " +
                         std::string(job_kind_names.name(a.sc.kind)),
                     "two scenarios of the same kind");
  }

  Comparison c;
  Trace ta, tb;
  if (a.sc.kind == JobKind::training) {
    TrainingResult ra = run_training(a, ops);
    TrainingResult rb = run_training(b, ops);
    c = compare_training(a.sc, ra, b.sc, rb);
    ta = std::move(ra.trace);
    tb = std::move(rb.trace);
  } else {
    const auto ra = run_serving(a, ops, &ta);
    if (!ra) return kExitOutOfMemory;
    const auto rb = run_serving(b, ops, &tb);
    if (!rb) return kExitOutOfMemory;
    c = compare_serving(a.sc, *ra, b.sc, *rb);
  }
  c.a_label = a.label;
  c.b_label = b.label;
  if (ops) {
    const OpGrouping g = c.kind == JobKind::training ? OpGrouping::by_name : OpGrouping::by_kind;
    add_op_differences(c, op_differences(ta, tb, static_cast<std::size_t>(top), g));
  }
  if (trace_a) write_trace_file(ta, *trace_a, p->has("--force"));
  if (trace_b) write_trace_file(tb, *trace_b, p->has("--force"));

  if (p->has("--json")) {
    std::printf("%s\n", comparison_json(c).dump(2).c_str());
  } else {
    std::fputs(comparison_text(c).c_str(), stdout);
    if (trace_a && trace_b) {
      std::printf("\n  traces written; to see them stacked: ctwin view %s --compare %s\n", trace_a->c_str(),
                  trace_b->c_str());
    } else if (trace_a || trace_b) {
      std::printf("\n  trace written to %s\n", (trace_a ? trace_a : trace_b)->c_str());
    }
  }
  return kExitOk;
}

}  // namespace ctwin
