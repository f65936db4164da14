// `ctwin sweep SCENARIO`: the scenario's variants and layouts simulated and ranked (app/sweep.hpp,
// docs/sweep.md). On all cores by default; under `mpirun -n K` the configurations of each wave
// are spread over the ranks and gathered on rank 0, which alone prints and writes: the output is
// the same bytes as a single process's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cli.hpp"
#include "commands.hpp"
#include "realrun/cpu_mpi.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sweep.hpp"
#include "sweep_report.hpp"

namespace ctwin {

namespace {

OrderedJson row_result(const SweepRow& row) {
  return OrderedJson{{"index", row.index},     {"status", sweep_status_names.name(row.status)},
                     {"reason", row.reason},   {"objective", row.objective},
                     {"bound_s", row.bound_s}, {"report", row.report}};
}

void take_row_result(SweepRow& row, const OrderedJson& j) {
  row.status = *sweep_status_names.parse(j["status"].get<std::string>());
  row.reason = j["reason"].get<std::string>();
  row.objective = j["objective"].is_number() ? j["objective"].get<double>() : std::nan("");
  row.bound_s = j["bound_s"].get<double>();
  row.report = j["report"];
}

}  // namespace

int cmd_sweep(const Args& args) {
  const std::string usage =
      "usage: ctwin sweep SCENARIO.json [--top K] [--csv FILE] [--json FILE|-] [--svg FILE] [--write-best FILE]\n"
      "                   [--auto] [--exhaustive] [--jobs N] [--quiet] [--force] [--set /pointer=value]...\n\n"
      "Simulates the variants of a scenario and ranks them by its /sweep/objective: the axes of /sweep/axes\n"
      "(any key, values or ranges, as a grid or zipped) and, with \"parallelism\": \"auto\" (or --auto), every\n"
      "valid training layout. Layouts that do not fit in GPU memory are refused with the reason; layouts that\n"
      "cannot reach the top K are skipped by a step-time lower bound (--exhaustive simulates them too).\n"
      "Prints the top K with where the time goes, and the best configuration's launch flags.\n"
      "Runs on every core; under `mpirun -n K ctwin sweep ...` on K ranks, output from rank 0 (docs/sweep.md).";
  auto p = parse_args(args, usage,
                      {{"--top", "K", "rows of the ranked table (default /sweep/top, 10)"},
                       {"--csv", "FILE", "write every configuration as CSV"},
                       {"--json", "FILE", "write every configuration with its report as JSON (- for stdout)"},
                       {"--svg", "FILE", "plot the ranking (or the objective against a single numeric axis)"},
                       {"--write-best", "FILE", "write the best configuration as a scenario file"},
                       {"--auto", "", "search every layout; the scenario's own becomes the reference row"},
                       {"--exhaustive", "", "simulate every layout that fits, without bound pruning"},
                       {"--jobs", "N", "threads (default: every core)"},
                       {"--quiet", "", "no progress line"},
                       {"--force", "", "overwrite existing output files"},
                       {"--set", "/POINTER=VALUE", "override a scenario key before sweeping", true}});
  if (!p) return kExitOk;
  if (p->positional.size() != 1) {
    throw InputError("", "SCENARIO", "expected exactly one scenario file", "ctwin sweep SCENARIO.json");
  }
  const std::string path = p->positional[0];
  std::vector<Override> overrides;
  for (const auto& s : p->all("--set")) overrides.push_back(parse_override(s));
  const bool force = p->has("--force");
  // Refuse to overwrite before simulating, not after.
  for (const char* flag : {"--csv", "--svg", "--write-best", "--json"}) {
    const auto f = p->get(flag);
    if (f && *f != "-") check_output_path(*f, force, flag);
  }
  const double jobs = p->number("--jobs", std::max(1u, std::thread::hardware_concurrency()));
  if (jobs < 1 || jobs > 4096 || std::floor(jobs) != jobs) {
    throw InputError("", "--jobs", "'" + *p->get("--jobs") + "' is not a thread count", "an integer from 1 to 4096");
  }

  realrun::MpiWorld world;
  const bool mpi = realrun::launched_by_mpi();
  if (mpi) world = realrun::mpi_init_world(false);
  const bool root_rank = world.rank == 0;

  SweepRunOptions opt;
  opt.threads = static_cast<int>(jobs);
  ProgressLine progress("sweeping");
  std::mutex progress_mutex;
  if (!p->has("--quiet") && root_rank) {
    // Called from every worker thread: one writer at a time.
    opt.progress = [&progress, &progress_mutex](std::size_t done, std::size_t total) {
      const std::lock_guard lock(progress_mutex);
      progress.update(static_cast<double>(done) / static_cast<double>(std::max<std::size_t>(1, total)),
                      std::to_string(done) + "/" + std::to_string(total) + " configurations");
    };
  }
  if (mpi && world.size > 1) {
    opt.distribute = [&](std::vector<SweepRow*>& rows, const std::function<void(SweepRow&)>& f) {
      std::vector<SweepRow*> mine;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (static_cast<int>(i % static_cast<std::size_t>(world.size)) == world.rank) mine.push_back(rows[i]);
      }
      simulate_rows_on_threads(mine, f, opt.threads);
      OrderedJson out = OrderedJson::array();
      for (const SweepRow* r : mine) out.push_back(row_result(*r));
      const auto all = world.group.all_gather_bytes(out.dump());
      for (std::size_t r = 0; r < all.size(); ++r) {
        if (static_cast<int>(r) == world.rank) continue;
        const OrderedJson theirs = OrderedJson::parse(all[r]);
        for (std::size_t k = 0; k < theirs.size(); ++k) {
          const std::size_t pos = r + k * static_cast<std::size_t>(world.size);
          take_row_result(*rows[pos], theirs[k]);
        }
      }
    };
  }
  opt.exhaustive = p->has("--exhaustive");
  if (p->has("--top")) {
    const double k = p->number("--top", 10);
    if (k < 1 || k > 1000 || std::floor(k) != k) {
      throw InputError("", "--top", "'" + *p->get("--top") + "' is not a row count", "an integer from 1 to 1000");
    }
    opt.top = static_cast<int>(k);
  }
  SweepResult res;
  try {
    res = run_sweep(path, overrides, p->has("--auto"), opt);
  } catch (const InputError&) {
    progress.clear();
    if (mpi) realrun::mpi_finalize();
    // Every rank read the same scenario and failed the same way: rank 0 says so once.
    if (!root_rank) return kExitBadInput;
    throw;
  } catch (...) {
    progress.clear();
    if (mpi) realrun::mpi_finalize();
    throw;
  }
  progress.clear();
  if (mpi) realrun::mpi_finalize();
  if (!root_rank) return kExitOk;

  const auto json_path = p->get("--json");
  if (json_path && *json_path == "-") {
    std::printf("%s\n", sweep_report_json(res).dump(2).c_str());
  } else {
    std::fputs(sweep_report_text(res).c_str(), stdout);
  }
  if (json_path && *json_path != "-") write_output_file(*json_path, sweep_report_json(res).dump(2) + "\n", force);
  if (const auto f = p->get("--csv")) write_output_file(*f, sweep_report_csv(res), force);
  if (const auto f = p->get("--svg")) write_output_file(*f, sweep_report_svg(res), force);
  if (!res.ranking.empty()) {
    const SweepRow& best = res.rows[res.ranking.front()];
    const Json best_json = sweep_row_scenario(path, overrides, best);
    const Scenario best_sc = parse_scenario(best_json.dump(), path + " (best of the sweep)");
    if (!(json_path && *json_path == "-")) {
      std::printf("\n  the best as %s flags:\n", best_sc.kind == JobKind::training ? "Megatron-LM" : "vLLM");
      std::string flags = launch_flags(best_sc);
      std::string indented = "    ";
      for (char c : flags) {
        indented += c;
        if (c == '\n') indented += "    ";
      }
      while (!indented.empty() && indented.back() == ' ') indented.pop_back();
      std::fputs(indented.c_str(), stdout);
    }
    if (const auto f = p->get("--write-best")) {
      write_output_file(*f, best_json.dump(2) + "\n", force);
      if (!(json_path && *json_path == "-")) std::printf("  best scenario written to %s\n", f->c_str());
    }
  } else if (p->has("--write-best")) {
    std::fprintf(stderr, "ctwin: warning: no configuration ran, so no best scenario was written\n");
  }
  return kExitOk;
}

}  // namespace ctwin
