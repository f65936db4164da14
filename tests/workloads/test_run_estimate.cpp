// estimate_training_run against the runs it estimates: op and dependency counts exactly, events,
// trace file sizes and the peak host memory (RSS growth in a forked child) within stated bounds.
#include <doctest/doctest.h>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/trace.hpp"
#include "topology/cluster.hpp"
#include "workloads/run_estimate.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

#include "tiny_models.hpp"

#include "asan.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::abs_approx;
using ctwin::test::h100_node8;
using ctwin::test::rel_approx;
using ctwin::test::tiny_layout;
using ctwin::test::tiny_llama;

namespace {

// `nodes` H100 nodes of 8 GPUs on NDR InfiniBand.
Cluster h100_nodes(int nodes) {
  ClusterSpec s = h100_node8().spec;
  s.nodes = nodes;
  s.inter_latency_us = 2;
  return build_cluster(s);
}

struct Case {
  const char* name;
  int layers, tp, pp, dp, micro_batches;
  bool fold;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
};

TrainingConfig config_of(const Case& c) {
  TrainingConfig cfg = tiny_layout(c.tp, c.pp, c.dp, c.micro_batches);
  cfg.parallel.schedule = c.schedule;
  cfg.parallel.virtual_stages = c.virtual_stages;
  return cfg;
}

TrainingOptions options_of(const Case& c, bool trace) {
  TrainingOptions o;
  o.fold = c.fold;
  o.trace = trace;
  return o;
}

// VmHWM, the peak resident set, of this process in bytes (0 when unreadable).
double peak_rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024;  // in kB
  }
  return 0;
}

// Peak RSS growth, in bytes, of simulate_training in a forked child: the memory earlier tests
// freed is handed back to the kernel first (malloc_trim) and the peak reset to the current
// resident set (clear_refs 5), so what the run reuses counts as it grows.
double measured_peak_growth(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cl,
                            const TrainingOptions& opt) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
    const double before = peak_rss();
    { const TrainingResult r = simulate_training(m, cfg, cl, opt); }
    const double growth = before > 0 ? peak_rss() - before : -1;
    const ssize_t n = ::write(fds[1], &growth, sizeof growth);
    ::_exit(n == sizeof growth ? 0 : 1);
  }
  ::close(fds[1]);
  double growth = -1;
  const ssize_t n = ::read(fds[0], &growth, sizeof growth);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(n == sizeof growth);
  REQUIRE(WIFEXITED(status));
  REQUIRE(growth > 0);
  return growth;
}

}  // namespace

TEST_CASE("the estimate's op and dependency counts are the real program's") {
  const Cluster cl = h100_nodes(4);
  const Case cases[] = {
      {"dp8 folded, 3 micro-batches (the sample is the run)", 4, 1, 1, 8, 3, true},
      {"tp2 pp2 dp2 folded, 37 micro-batches", 8, 2, 2, 2, 37, true},
      {"tp2 pp2 dp4 unfolded, 50 micro-batches", 8, 2, 2, 4, 50, false},
      {"tp2 pp4 dp4 interleaved, 64 micro-batches, unfolded", 16, 2, 4, 4, 64, false, PipelineSchedule::interleaved, 2},
      {"pp4 dp2 zero bubble, 33 micro-batches", 8, 1, 4, 2, 33, true, PipelineSchedule::zero_bubble},
      {"tp4 pp2 dp4 folded, 200 micro-batches", 8, 4, 2, 4, 200, true},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const ModelSpec m = tiny_llama(c.layers);
    const TrainingConfig cfg = config_of(c);
    TrainingOptions opt = options_of(c, false);
    opt.fold_micro_batches = false;  // the estimate of the whole program build_training_step builds
    const RunEstimate e = estimate_training_run(m, cfg, cl, opt);
    const StepProgram p = build_training_step(m, cfg, cl, opt);
    CHECK(e.ops == p.ops.size());
    CHECK(e.deps == p.deps.size() + p.late_deps.size());
    CHECK(e.simulated_gpus == static_cast<int>(p.gpus.size()));
    CHECK(e.folded == p.folded);
    CHECK(e.gpus == c.tp * c.pp * c.dp);
    CHECK(e.micro_batches == c.micro_batches);
    // Calls: exact folded; unfolded an upper bound (a DP collective is one call for all replicas).
    if (c.fold) {
      CHECK(e.calls == p.calls.size());
    } else {
      CHECK(e.calls >= p.calls.size());
    }
  }
}

TEST_CASE("noise and flow fidelity unfold the estimate as they unfold the run") {
  const Cluster cl = h100_nodes(1);
  TrainingConfig cfg = tiny_layout(2, 1, 4, 8);
  cfg.noise.kernel_jitter = 0.1;
  cfg.noise.steps = 3;
  TrainingOptions opt;
  const RunEstimate e = estimate_training_run(tiny_llama(), cfg, cl, opt);
  CHECK_FALSE(e.folded);
  CHECK(e.simulated_gpus == 8);
  const TrainingResult r = simulate_training(tiny_llama(), cfg, cl, opt);
  CHECK(e.ops == r.tasks);
  // Three steps' events; jitter moves no event in or out.
  CHECK(static_cast<double>(e.events) == rel_approx(static_cast<double>(r.events), 0.05));
  opt.flow_network = true;
  cfg.noise = NoiseSpec{};
  const RunEstimate f = estimate_training_run(tiny_llama(), cfg, cl, opt);
  CHECK_FALSE(f.folded);
  CHECK(f.simulated_gpus == 8);
  CHECK(f.flows > 0);
}

TEST_CASE("with folded micro-batches the estimate counts the three short runs and holds the longest") {
  const Cluster cl = h100_nodes(1);
  const TrainingConfig cfg = tiny_layout(2, 2, 2, 400);
  TrainingOptions opt, whole;
  whole.fold_micro_batches = false;
  const RunEstimate e = estimate_training_run(tiny_llama(), cfg, cl, opt);
  const RunEstimate w = estimate_training_run(tiny_llama(), cfg, cl, whole);
  const TrainingResult r = simulate_training(tiny_llama(), cfg, cl, opt);
  REQUIRE(r.simulated_micro_batches == std::vector<int>{4, 6, 8});
  CHECK(e.micro_batch_fold);
  CHECK_FALSE(w.micro_batch_fold);
  CHECK(e.ops == r.tasks);  // 4 + 6 + 8 micro-batches' ops
  CHECK(static_cast<double>(e.events) == rel_approx(static_cast<double>(r.events), 0.02));
  // The host holds the 8-micro-batch program: ops are linear in micro-batches from pp on, so its
  // bytes are the whole step's scaled by the ops of 8 over those of 400.
  const RunCostModel c = run_cost_model();
  const double ops8 = static_cast<double>(e.ops) * 8 / 18;  // 4 + 6 + 8 = 18 micro-batches of equal ops
  CHECK(static_cast<double>(e.program_bytes) > c.overhead * ops8 * c.bytes_per_op);
  CHECK(static_cast<double>(e.program_bytes) < static_cast<double>(w.program_bytes) / 20);
}

TEST_CASE("the estimate's events and trace file sizes are the run's" * doctest::test_suite("slow")) {
  const Cluster cl = h100_nodes(4);
  const Case cases[] = {
      {"dp8 folded, 3 micro-batches", 4, 1, 1, 8, 3, true},
      {"tp2 pp2 dp2 unfolded, 37 micro-batches", 8, 2, 2, 2, 37, false},
      {"tp2 pp4 dp2 interleaved, 40 micro-batches", 16, 2, 4, 2, 40, true, PipelineSchedule::interleaved, 2},
      // Enough collectives that the trace stops drawing their arrows at its cap.
      {"tp4 pp2 dp4 unfolded, 400 micro-batches", 8, 4, 2, 4, 400, false},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const ModelSpec m = tiny_llama(c.layers);
    const TrainingConfig cfg = config_of(c);
    const TrainingOptions opt = options_of(c, true);
    const RunEstimate e = estimate_training_run(m, cfg, cl, opt);
    const TrainingResult r = simulate_training(m, cfg, cl, opt);
    std::ostringstream ctt, json;
    write_trace_binary(r.trace, ctt);
    write_chrome_trace(r.trace, json);
    MESSAGE(name, ": events ", e.events, " vs ", r.events, "; ctt ", e.trace_bytes_ctt, " vs ",
            static_cast<double>(ctt.tellp()), "; json ", e.trace_bytes_json, " vs ", static_cast<double>(json.tellp()));
    CHECK(e.trace_events == r.trace.events.size());
    // Arrows: exact below the cap; past it the trace finishes the collective it was drawing.
    CHECK(static_cast<double>(e.trace_arrows) == abs_approx(static_cast<double>(r.trace.arrows.size()), 16));
    if (c.micro_batches == 400) CHECK(r.trace.arrows.size() >= 200000);
    // Engine events: within 2% (unfolded, a DP collective's shared call dispatches once).
    CHECK(static_cast<double>(e.events) == rel_approx(static_cast<double>(r.events), 0.02));
    // File sizes: .ctt within 3%; .json within 5%, its decimal timestamps growing a digit or two
    // over a step longer than the samples' (an estimate 3.3% short at 400 micro-batches).
    CHECK(static_cast<double>(e.trace_bytes_ctt) == rel_approx(static_cast<double>(ctt.tellp()), 0.03));
    CHECK(static_cast<double>(e.trace_bytes_json) == rel_approx(static_cast<double>(json.tellp()), 0.05));
  }
}

// AddressSanitizer's allocator pads every block and quarantines freed ones: RSS under it says
// nothing about a normal build's (measured 2.4x), so the comparison runs only without it.
constexpr bool kAllocatorIsAsan = ctwin::test::kAsan;

TEST_CASE("the host byte estimate is the run's peak RSS growth within 30%" * doctest::test_suite("slow")) {
  if (kAllocatorIsAsan) {
    MESSAGE("built with AddressSanitizer: its allocator's RSS is not the program's; not compared");
    return;
  }
  const Cluster cl = h100_nodes(4);
  // Runs of 0.3 to 1.5 million ops, so the tens of MB they take dwarf allocator noise.
  const struct {
    Case c;
    bool trace;
  } runs[] = {
      {{"tp2 pp2 dp2 folded, 4,000 micro-batches", 8, 2, 2, 2, 4000, true}, false},
      {{"tp2 pp2 dp8 unfolded, 400 micro-batches", 8, 2, 2, 8, 400, false}, false},
      {{"tp2 pp4 dp4 unfolded interleaved, 256 micro-batches, traced", 16, 2, 4, 4, 256, false,
        PipelineSchedule::interleaved, 2},
       true},
  };
  for (const auto& run : runs) {
    const std::string name = run.c.name;
    CAPTURE(name);
    const ModelSpec m = tiny_llama(run.c.layers);
    const TrainingConfig cfg = config_of(run.c);
    TrainingOptions opt = options_of(run.c, run.trace);
    opt.fold_micro_batches = false;  // the whole step in memory: tens of MB
    const auto t0 = std::chrono::steady_clock::now();
    const RunEstimate e = estimate_training_run(m, cfg, cl, opt);
    const double estimate_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double growth = measured_peak_growth(m, cfg, cl, opt);
    MESSAGE(name, ": ops ", e.ops, ", estimate ", e.host_bytes / 1e6, " MB in ", estimate_s * 1e3,
            " ms, measured peak growth ", growth / 1e6, " MB");
    CHECK(static_cast<double>(e.host_bytes) == rel_approx(growth, 0.30));
    // The estimate's own time is printed, not checked: a wall-clock bound fails on a loaded
    // machine (it did, at 1.19 s, with eight builds beside it); `ctwin bench` measures speed.
  }
}
