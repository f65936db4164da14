// realrun's driver on the CPU backend: a tiny training scenario measured end to end, checked for
// what the measurements file must hold (one op per distinct kernel shape, one collective entry
// per communicator, operation and size, one step) and for determinism of all but the times.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "calibrate/measurements.hpp"
#include "realrun/cpu_device.hpp"
#include "realrun/driver.hpp"
#include "sim/error.hpp"

#include "tiny_models.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::realrun;
using ctwin::test::rel_approx;

namespace {

// Two CPU ranks as a one-node cluster of "cpu-rank" devices; the tiny Llama (2 layers) in FP32,
// data parallel over both, one micro-batch of 2 sequences of 32 tokens each.
RealrunJob tiny_job(bool sweep) {
  RealrunJob job;
  job.scenario_file = "tiny.json";
  job.scenario = {{"name", "tiny"}};
  job.model = test::tiny_llama(2);
  job.training = test::tiny_layout(1, 1, 2, 1);
  job.training.precision.compute = Dtype::fp32;
  job.training.precision.weight_bytes = 4;
  job.training.precision.grad_bytes = 4;
  ClusterSpec& c = job.cluster;
  c.name = "cpu";
  c.gpu.name = "cpu-rank";
  c.gpu.bf16_tflops = 0.05;
  c.gpu.tf32_tflops = 0.05;
  c.gpu.hbm_bytes = 4e9;
  c.gpu.hbm_gbyte_per_s = 10;
  c.gpu.pcie_gbyte_per_s = 5;
  c.gpus_per_node = 2;
  c.intra = IntraNodeFabric::pcie;
  c.intra_gbyte_per_s = 5;
  job.config.warmup = 1;
  job.config.repeats = 3;
  job.config.collective_min_bytes = 1024;
  job.config.collective_max_bytes = 4096;  // 1 KiB and 4 KiB
  job.config.sweep = sweep;
  job.config.timeout_s = 30;
  return job;
}

calibrate::Measurements measure(const RealrunJob& job, const RealrunPlan& plan) {
  BackendOptions opt;
  opt.ranks = plan.ranks;
  auto devs = make_cpu_devices(opt);
  std::vector<Device*> d;
  for (auto& x : devs) d.push_back(x.get());
  return run_realrun(job, plan, d);
}

// The file with every time, bandwidth and host fact blanked: what must not change between runs.
nlohmann::json without_times(const calibrate::Measurements& m) {
  nlohmann::json j = nlohmann::json::parse(calibrate::measurements_to_json(m));
  j.erase("host");
  for (const char* list : {"ops", "collectives", "steps"}) {
    for (auto& e : j[list]) {
      e.erase("stats");
      e.erase("algbw_gbyte_per_s");
      e.erase("busbw_gbyte_per_s");
      e.erase("per_rank_median_s");
    }
  }
  for (auto& e : j["overlaps"]) {  // the call count follows the measured times
    e.erase("alone");
    e.erase("overlapped");
    e.erase("calls");
  }
  return j;
}

}  // namespace

TEST_CASE("realrun on two CPU ranks writes a measurements file with each kernel shape, collective size and step once") {
  const RealrunJob job = tiny_job(false);
  const RealrunPlan plan = plan_realrun(job);
  REQUIRE(plan.ranks == 2);
  const calibrate::Measurements m = measure(job, plan);
  // It reads back through the reader calibrate and validate use.
  const calibrate::Measurements back = calibrate::parse_measurements(calibrate::measurements_to_json(m), "m.json");

  // One op per distinct kernel of the step: counted here from the program's ops by their kind
  // name, FLOPs and bytes (the fields every op carries), independently of StepProgram::costs.
  std::set<std::tuple<std::string, float, float>> kernels;
  for (const StepOp& op : plan.program.ops) {
    const std::string kind = plan.program.names.str(op.kind);
    if (op.call.valid() || (op.flops == 0 && op.bytes == 0)) continue;  // collectives and joins
    kernels.emplace(kind, op.flops, op.bytes);
  }
  CHECK(back.ops.size() == kernels.size());
  for (const auto& op : back.ops) {
    CHECK(op.origin == "step");
    CHECK(op.op.dtype == Dtype::fp32);
    CHECK(op.stats.repeats == 3);
    CHECK(op.stats.min_s > 0);
  }

  // DP 2: the gradient all-reduce over ranks 0 and 1, at 1 KiB, 4 KiB and the step's sizes.
  std::set<double> step_sizes;
  for (const StepCall& c : plan.program.calls) step_sizes.insert(c.bytes);
  std::set<double> sizes = {1024, 4096};
  sizes.insert(step_sizes.begin(), step_sizes.end());
  REQUIRE(back.collectives.size() == sizes.size());
  std::set<double> seen;
  for (const auto& c : back.collectives) {
    CHECK(c.op == CollectiveOp::all_reduce);
    CHECK(c.group == "dp");
    CHECK(c.ranks == std::vector<int>{0, 1});
    CHECK(c.algorithm == "ring");
    seen.insert(c.bytes);
    // nccl-tests: algbw = bytes / time; all-reduce busbw = algbw x 2(n-1)/n = algbw on 2 ranks.
    CHECK(c.algbw_gbyte_per_s == rel_approx(c.bytes / c.stats.median_s / 1e9, 1e-9));
    CHECK(c.busbw_gbyte_per_s == rel_approx(c.algbw_gbyte_per_s, 1e-9));
  }
  CHECK(seen == sizes);

  REQUIRE(back.steps.size() == 1);
  CHECK(back.steps[0].kind == "training_step");
  CHECK(back.steps[0].layout["dp"] == 2);
  CHECK(back.steps[0].per_rank_median_s.size() == 2);
  CHECK(back.steps[0].stats.repeats == 3);
  // A step runs every kernel of a rank at least once: it takes longer than the fastest one.
  CHECK(back.steps[0].stats.median_s > back.ops[0].stats.min_s);
  CHECK(back.cluster["gpus_per_node"] == 2);
  CHECK(back.host.ranks == 2);
  CHECK(back.warmup == 1);
  CHECK(back.repeats == 3);
  // One overlap: the step's largest GEMM (by FLOPs) beside the DP all-reduce's largest size,
  // timed alone and overlapped on both ranks, read back as written.
  REQUIRE(back.overlaps.size() == 1);
  const auto& v = back.overlaps[0];
  double largest_gemm = 0, largest_call = 0;
  for (const auto& op : back.ops)
    if (op.op.kind == OpKind::gemm && op.origin == "step") largest_gemm = std::max(largest_gemm, op.op.flops);
  for (const auto& c : back.collectives) largest_call = std::max(largest_call, c.bytes);
  CHECK(v.op.kind == OpKind::gemm);
  CHECK(v.op.flops == largest_gemm);
  CHECK(v.collective == CollectiveOp::all_reduce);
  CHECK(v.group == "dp");
  CHECK(v.bytes == largest_call);
  CHECK(v.calls >= 1);
  CHECK(v.alone.repeats == 3);
  CHECK(v.overlapped.repeats == 3);
  CHECK(v.alone.min_s > 0);
  CHECK(v.overlapped.min_s > 0);
}

TEST_CASE("realrun's plan sweeps each GEMM's m, n and k by 1/4 to 4 with FLOPs and bytes following the shape") {
  RealrunJob job = tiny_job(true);
  const RealrunPlan plan = plan_realrun(job);
  const RealrunPlan base = plan_realrun(tiny_job(false));
  std::size_t gemms = 0;
  for (const auto& op : base.ops) gemms += op.op.kind == OpKind::gemm;
  REQUIRE(gemms > 0);
  std::size_t swept = 0;
  for (const auto& op : plan.ops) swept += op.origin == "sweep";
  // 3 dimensions x 4 scales (1/4, 1/2, 2, 4) per GEMM, less shapes that coincide.
  CHECK(swept <= 12 * gemms);
  CHECK(swept >= 12);
  // The first GEMM with m doubled: twice the FLOPs; bytes in proportion to mk + kn + mn.
  const OpCost g =
      std::find_if(base.ops.begin(), base.ops.end(), [](const PlannedOp& p) { return p.op.kind == OpKind::gemm; })->op;
  const double mk = g.m * g.k, kn = g.k * g.n, mn = g.m * g.n;
  const auto doubled = std::find_if(plan.ops.begin(), plan.ops.end(), [&](const PlannedOp& p) {
    return p.origin == "sweep" && p.op.m == 2 * g.m && p.op.n == g.n && p.op.k == g.k && p.op.flops == 2 * g.flops;
  });
  REQUIRE(doubled != plan.ops.end());
  CHECK(doubled->op.bytes == rel_approx(g.bytes * (2 * mk + kn + 2 * mn) / (mk + kn + mn), 1e-12));
  // And k quartered: a quarter of the FLOPs.
  CHECK(std::any_of(plan.ops.begin(), plan.ops.end(), [&](const PlannedOp& p) {
    return p.origin == "sweep" && p.op.m == g.m && p.op.n == g.n && p.op.k == std::round(g.k / 4) &&
           p.op.flops == rel_approx(g.flops / 4 * std::round(g.k / 4) / (g.k / 4), 1e-12);
  }));
}

TEST_CASE("realrun measures the same things in the same order twice: only the times differ") {
  const RealrunJob job = tiny_job(false);
  const RealrunPlan plan = plan_realrun(job);
  const nlohmann::json a = without_times(measure(job, plan));
  const nlohmann::json b = without_times(measure(job, plan_realrun(job)));
  CHECK(a == b);
  CHECK(a["ops"].size() > 3);
}

TEST_CASE("realrun's collective sweep follows nccl-tests' -b, -e and -f") {
  RealrunConfig c;
  c.collective_min_bytes = 1024;
  c.collective_max_bytes = 64.0 * 1024 * 1024;
  c.collective_size_factor = 4;
  const std::vector<double> s = collective_sweep_sizes(c);
  // 1 KiB x 4^i up to 64 MiB: 1K 4K 16K 64K 256K 1M 4M 16M 64M.
  REQUIRE(s.size() == 9);
  CHECK(s.front() == 1024);
  CHECK(s.back() == 64.0 * 1024 * 1024);
  CHECK(s[5] == 1024.0 * 1024);
  c.collective_size_factor = 2;
  c.collective_max_bytes = 1000 * 1024;  // not a power: stops at 512 KiB
  CHECK(collective_sweep_sizes(c).size() == 10);
}

TEST_CASE("/realrun's declared defaults are RealrunConfig's, and a sweep that ends below its start is refused") {
  const RealrunConfig c;
  CHECK(param_decl(realrun_params, "warmup").def == c.warmup);
  CHECK(param_decl(realrun_params, "repeats").def == c.repeats);
  CHECK(param_decl(realrun_params, "collective_min_bytes").def == c.collective_min_bytes);
  CHECK(param_decl(realrun_params, "collective_max_bytes").def == c.collective_max_bytes);
  CHECK(param_decl(realrun_params, "collective_size_factor").def == c.collective_size_factor);
  CHECK(param_decl(realrun_params, "sweep").def == (c.sweep ? 1 : 0));
  CHECK(param_decl(realrun_params, "sweep_max_scale").def == c.sweep_max_scale);
  CHECK(param_decl(realrun_params, "timeout_s").def == c.timeout_s);
  const Json j = Json::parse(R"({"repeats": 7, "collective_min_bytes": 4096, "collective_max_bytes": 1024})");
  try {
    (void)read_realrun_config(JsonObject(j, "/realrun", "s.json"));
    FAIL("accepted a sweep from 4096 down to 1024 bytes");
  } catch (const InputError& e) {
    CHECK(e.file == "s.json");
    CHECK(e.path == "/realrun/collective_max_bytes");
  }
  const Json ok = Json::parse(R"({"repeats": 7, "sweep": false})");
  const RealrunConfig r = read_realrun_config(JsonObject(ok, "/realrun", "s.json"));
  CHECK(r.repeats == 7);
  CHECK_FALSE(r.sweep);
  CHECK(r.warmup == 2);
}

TEST_CASE("realrun replays a 1F1B pipeline of two stages and four micro-batches without waiting on itself") {
  RealrunJob job = tiny_job(false);
  job.training = test::tiny_layout(1, 2, 1, 4);
  job.training.precision.compute = Dtype::fp32;
  job.config.timeout_s = 20;
  const RealrunPlan plan = plan_realrun(job);
  REQUIRE(plan.ranks == 2);
  const calibrate::Measurements m = measure(job, plan);
  // The two directions are two communicators (stage 0 -> 1 activations, 1 -> 0 gradients).
  std::set<std::vector<int>> pairs;
  for (const auto& c : m.collectives) {
    CHECK(c.op == CollectiveOp::send_recv);
    CHECK(c.group == "pp");
    pairs.insert(c.ranks);
  }
  CHECK(pairs == std::set<std::vector<int>>{{0, 1}, {1, 0}});
  REQUIRE(m.steps.size() == 1);
  CHECK(m.steps[0].layout["pp"] == 2);
  CHECK(m.steps[0].stats.repeats == 3);
}

TEST_CASE("a step program names each kernel's OpCost once, and every kernel op carries its cost's FLOPs and bytes") {
  const RealrunPlan plan = plan_realrun(tiny_job(false));
  const StepProgram& p = plan.program;
  REQUIRE_FALSE(p.costs.empty());
  for (std::size_t i = 0; i < p.costs.size(); ++i) {
    for (std::size_t j = i + 1; j < p.costs.size(); ++j) CHECK_FALSE(p.costs[i] == p.costs[j]);
  }
  std::size_t kernels = 0;
  for (const StepOp& op : p.ops) {
    if (op.call.valid()) {
      CHECK(op.cost == kNoStepCost);  // a collective member runs no kernel
      continue;
    }
    if (op.cost == kNoStepCost) continue;
    ++kernels;
    const OpCost& c = p.costs[op.cost];
    CHECK(static_cast<float>(c.flops) == op.flops);
    CHECK(static_cast<float>(c.bytes) == op.bytes);
    CHECK(p.names.str(op.kind) == to_string(c.kind));
  }
  // Every forward and backward kernel of 2 layers, embedding, head and optimizer: more kernel ops
  // than distinct shapes (the 2 layers share theirs).
  CHECK(kernels > p.costs.size());
}

TEST_CASE("realrun split over two processes (one rank each) writes the file one process of both ranks writes") {
  // Two "processes" as two threads, each holding one of the CPU devices and calling the driver
  // with its block of ranks; the ProcessGroup's barrier and all_gather are a shared-memory
  // stand-in for MPI's. Both must end with every rank's samples in its own slot.
  const RealrunJob job = tiny_job(false);
  const RealrunPlan plan = plan_realrun(job);
  REQUIRE(plan.ranks == 2);
  BackendOptions opt;
  opt.ranks = 2;
  auto devs = make_cpu_devices(opt);

  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  std::vector<double> slots[2];
  auto meet = [&] {  // a two-party barrier
    std::unique_lock lk(mu);
    const int g = generation;
    if (++arrived == 2) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lk, [&] { return generation != g; });
    }
  };
  std::vector<std::vector<double>> sent[2];  // each all_gather call's block, per process
  auto group = [&](int k) {
    ProcessGroup g;
    g.index = k;
    g.count = 2;
    g.barrier = meet;
    g.all_gather = [&, k](const std::vector<double>& mine) {
      slots[k] = mine;
      sent[k].push_back(mine);
      meet();
      std::vector<double> all = slots[0];
      all.insert(all.end(), slots[1].begin(), slots[1].end());
      meet();  // nobody overwrites a slot before both have read it
      return all;
    };
    return g;
  };
  calibrate::Measurements out[2];
  std::thread t1([&] {
    const ProcessGroup g = group(1);
    out[1] = run_realrun(job, plan, {devs[1].get()}, {}, &g);
  });
  const ProcessGroup g0 = group(0);
  out[0] = run_realrun(job, plan, {devs[0].get()}, {}, &g0);
  t1.join();

  for (int k = 0; k < 2; ++k) {
    CAPTURE(k);
    REQUIRE(out[k].steps.size() == 1);
    REQUIRE(out[k].steps[0].per_rank_median_s.size() == 2);
    REQUIRE(out[k].ops.size() == plan.ops.size());
    REQUIRE(out[k].collectives.size() == plan.collectives.size());
  }
  // The same file on both processes: every statistic, every rank's median.
  for (std::size_t i = 0; i < plan.ops.size(); ++i) CHECK(out[0].ops[i].stats.median_s == out[1].ops[i].stats.median_s);
  for (std::size_t i = 0; i < plan.collectives.size(); ++i) {
    CHECK(out[0].collectives[i].stats.median_s == out[1].collectives[i].stats.median_s);
    CHECK(out[0].collectives[i].stats.median_s > 0);
  }
  // Gathers in order: the overlap's call counts (during the run), then kernels, collectives,
  // steps, the overlap's kernel alone and beside the collectives, serving iterations (none
  // here); each sample block is [entry][repeat] for one rank.
  REQUIRE(plan.overlaps.size() == 1);
  REQUIRE(sent[0].size() == 7);
  REQUIRE(sent[1].size() == 7);
  CHECK(sent[0][6].empty());
  constexpr int kOps = 1, kSteps = 3, kAlone = 4, kOverlapped = 5;
  const auto repeats = static_cast<std::size_t>(job.config.repeats);
  auto block = [&](int k, int call, std::size_t entry) {
    const auto& b = sent[k][static_cast<std::size_t>(call)];
    REQUIRE(b.size() >= (entry + 1) * repeats);
    return std::vector<double>(b.begin() + static_cast<std::ptrdiff_t>(entry * repeats),
                               b.begin() + static_cast<std::ptrdiff_t>((entry + 1) * repeats));
  };
  // Every kernel's statistic is the per-repeat slowest of what the two ranks timed for it.
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const auto a = block(0, kOps, i), b = block(1, kOps, i);
    std::vector<double> worst(repeats);
    for (std::size_t r = 0; r < repeats; ++r) worst[r] = std::max(a[r], b[r]);
    CHECK(out[0].ops[i].stats.median_s == calibrate::stats_of(worst).median_s);
  }
  // Each rank's step samples reached its own slot, on both processes.
  for (int k = 0; k < 2; ++k) {
    const double med = calibrate::stats_of(block(k, kSteps, 0)).median_s;
    CHECK(out[0].steps[0].per_rank_median_s[static_cast<std::size_t>(k)] == med);
    CHECK(out[1].steps[0].per_rank_median_s[static_cast<std::size_t>(k)] == med);
  }
  std::vector<double> worst(repeats);
  const auto s0 = block(0, kSteps, 0), s1 = block(1, kSteps, 0);
  for (std::size_t i = 0; i < repeats; ++i) worst[i] = std::max(s0[i], s1[i]);
  CHECK(out[0].steps[0].stats.median_s == calibrate::stats_of(worst).median_s);
  // The overlap: both processes agreed on one call count, and its statistics are both ranks'.
  REQUIRE(out[0].overlaps.size() == 1);
  CHECK(out[0].overlaps[0].calls == out[1].overlaps[0].calls);
  for (int call : {kAlone, kOverlapped}) {
    const auto a = block(0, call, 0), b = block(1, call, 0);
    for (std::size_t i = 0; i < repeats; ++i) worst[i] = std::max(a[i], b[i]);
    const auto& st = call == kAlone ? out[0].overlaps[0].alone : out[0].overlaps[0].overlapped;
    CHECK(st.median_s == calibrate::stats_of(worst).median_s);
  }
}

TEST_CASE("realrun refuses a process block that does not tile the layout's ranks") {
  const RealrunJob job = tiny_job(false);
  const RealrunPlan plan = plan_realrun(job);
  BackendOptions opt;
  opt.ranks = 2;
  auto devs = make_cpu_devices(opt);
  ProcessGroup g;
  g.count = 3;  // 3 processes of 1 device for a 2-rank layout
  g.barrier = [] {};
  g.all_gather = [](const std::vector<double>& v) { return v; };
  CHECK_THROWS_AS(run_realrun(job, plan, {devs[0].get()}, {}, &g), std::invalid_argument);
}
