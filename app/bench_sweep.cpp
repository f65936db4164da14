// `ctwin bench sweep`: the auto-sweep of Llama-3-70B on 1,024 H100 at a fixed global batch (the
// issue's target: under a minute on two cores), against the same sweep simulating every layout
// that fits (no bound pruning), in the same process on the same threads. Both must rank the same
// best layout; the figures are the wall and CPU times and what each considered and simulated.
#include "bench_sweep.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sweep.hpp"

namespace ctwin {

namespace {

// As scenarios/llama3-70b-1024xh100.json, its layout left to the sweep.
constexpr const char* kScenario = R"({
  "name": "Llama-3-70B on 1,024 H100, every layout",
  "cluster": {"preset": "dgx-h100", "nodes": 128},
  "model": "llama3-70b",
  "training": {"micro_batch": 1, "global_batch": 512, "seq_len": 8192, "parallelism": "auto"}
})";
// --quick: Llama-3-8B on one node.
constexpr const char* kQuickScenario = R"({
  "name": "Llama-3-8B on 8 H100, every layout",
  "cluster": {"preset": "dgx-h100", "nodes": 1},
  "model": "llama3-8b",
  "training": {"micro_batch": 1, "global_batch": 64, "seq_len": 8192, "parallelism": "auto"}
})";

struct Timed {
  double wall_s, cpu_s;
  SweepResult r;
};

Timed timed_sweep(const std::string& path, bool exhaustive) {
  SweepRunOptions opt;
  opt.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  opt.exhaustive = exhaustive;
  const double c0 = bench_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  SweepResult r = run_sweep(path, {}, false, opt);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), bench_cpu_s() - c0,
          std::move(r)};
}

std::size_t count(const SweepResult& r, SweepStatus s) {
  std::size_t n = 0;
  for (const auto& row : r.rows) n += row.status == s;
  return n;
}

}  // namespace

nlohmann::ordered_json bench_sweep(const BenchOptions& o) {
  const auto path =
      std::filesystem::temp_directory_path() / ("ctwin_bench_sweep_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << (o.quick ? kQuickScenario : kScenario);
  if (o.progress) std::fprintf(stderr, "bench sweep: pruned sweep...\n");
  const Timed pruned = timed_sweep(path.string(), false);
  if (o.progress) std::fprintf(stderr, "bench sweep: exhaustive baseline...\n");
  const Timed full = timed_sweep(path.string(), true);
  std::filesystem::remove(path);
  nlohmann::ordered_json j;
  j["scenario"] = pruned.r.scenario;
  j["threads"] = std::max(1u, std::thread::hardware_concurrency());
  j["layouts_considered"] = pruned.r.rows.size();
  j["out_of_memory"] = count(pruned.r, SweepStatus::out_of_memory);
  j["pruned_by_bound"] = count(pruned.r, SweepStatus::bound_pruned);
  j["simulated"] = count(pruned.r, SweepStatus::simulated);
  j["sweep_wall_s"] = pruned.wall_s;
  j["sweep_cpu_s"] = pruned.cpu_s;
  j["exhaustive_simulated"] = count(full.r, SweepStatus::simulated);
  j["exhaustive_wall_s"] = full.wall_s;
  j["exhaustive_cpu_s"] = full.cpu_s;
  j["pruning_speedup"] = full.wall_s / pruned.wall_s;
  const auto best = [](const SweepResult& r) { return r.ranking.empty() ? std::string() : r.rows[r.ranking[0]].label; };
  j["best"] = best(pruned.r);
  j["best_step_time_s"] = pruned.r.ranking.empty() ? 0.0 : pruned.r.rows[pruned.r.ranking[0]].objective;
  j["same_best_as_exhaustive"] = best(pruned.r) == best(full.r);
  j["bound_violations"] = full.r.bound_violations;
  return j;
}

}  // namespace ctwin
