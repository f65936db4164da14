// Folding TP and CP ranks (docs/training.md, "Folding"): one rank simulated per group gives the
// unfolded run's step, to the picosecond, wherever the folding rule says it is exact; elsewhere
// nothing is folded.
#include <doctest/doctest.h>

#include <string>

#include "topology/cluster.hpp"
#include "topology/network.hpp"
#include "workloads/step_breakdown.hpp"
#include "workloads/step_program.hpp"
#include "workloads/step_run.hpp"
#include "workloads/training_sim.hpp"

#include "tiny_models.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// A GPT-style model wide enough that TP and DP collectives take microseconds (h = 1024).
ModelSpec gpt_small(int layers = 4) { return ctwin::test::fold_gpt(layers); }
Cluster nodes(int n) { return ctwin::test::fold_nodes(n); }
TrainingConfig layout(int tp, int pp, int dp, int micro_batches) {
  return ctwin::test::fold_layout(tp, pp, dp, micro_batches);
}

void same_breakdown(const StepBreakdown& a, const StepBreakdown& b) {
  CHECK(a.compute_s == b.compute_s);
  CHECK(a.optimizer_s == b.optimizer_s);
  CHECK(a.exposed_tp_s == b.exposed_tp_s);
  CHECK(a.exposed_cp_s == b.exposed_cp_s);
  CHECK(a.exposed_ep_s == b.exposed_ep_s);
  CHECK(a.exposed_dp_s == b.exposed_dp_s);
  CHECK(a.exposed_pp_s == b.exposed_pp_s);
  CHECK(a.bubble_s == b.bubble_s);
  CHECK(a.other_s == b.other_s);
}

// Folded (TP/CP ranks and DP replicas), DP-folded only, and unfolded runs of one layout agree on
// everything the report shows; returns the folded result.
TrainingResult check_exact(const ModelSpec& m, const TrainingConfig& c, const Cluster& cl, int expect_simulated) {
  TrainingOptions folded, replicas_only, unfolded;
  replicas_only.fold_ranks = false;
  unfolded.fold = false;
  const auto a = simulate_training(m, c, cl, folded);
  const auto r = simulate_training(m, c, cl, replicas_only);
  const auto u = simulate_training(m, c, cl, unfolded);
  const auto& par = c.parallel;
  CHECK(a.simulated_gpus == expect_simulated);
  CHECK(r.simulated_gpus == par.tp * par.cp * par.pp);
  CHECK(u.simulated_gpus == par.tp * par.cp * par.pp * par.dp);
  CHECK(a.tp_folded == (par.tp > 1));
  CHECK(a.cp_folded == (par.cp > 1));
  CHECK(u.step_time_s > 0);
  for (const auto* x : {&r, &u}) {
    CHECK(a.step_time_s == x->step_time_s);  // the engine's integer picoseconds, unrounded
    same_breakdown(a.breakdown, x->breakdown);
    CHECK(a.stage_utilization == x->stage_utilization);
    CHECK(a.memory.peak == x->memory.peak);
    REQUIRE(a.stage_memory.size() == x->stage_memory.size());
    for (std::size_t s = 0; s < a.stage_memory.size(); ++s) CHECK(a.stage_memory[s].peak == x->stage_memory[s].peak);
    CHECK(a.mfu == x->mfu);
  }
  return a;
}

}  // namespace

TEST_CASE("folding TP ranks is exact: TP2 PP2 DP2, plain, sequence-parallel, TP overlap, overlap slowdown") {
  const Cluster cl = nodes(1);
  auto c = layout(2, 2, 2, 4);
  check_exact(gpt_small(), c, cl, 2);
  c.parallel.sequence_parallel = true;
  check_exact(gpt_small(), c, cl, 2);
  c.parallel.tp_comm_overlap = true;
  c.overlap_slowdown = 0.2;  // kernels beside a DP or TP collective run slower
  check_exact(gpt_small(), c, cl, 2);
}

TEST_CASE("folding TP ranks is exact for interleaved, zero-bubble and uneven pipelines") {
  const Cluster cl = nodes(1);
  auto c = layout(2, 2, 2, 4);
  c.parallel.schedule = PipelineSchedule::interleaved;
  c.parallel.virtual_stages = 2;
  check_exact(gpt_small(8), c, cl, 2);
  auto z = layout(2, 2, 2, 4);
  z.parallel.schedule = PipelineSchedule::zero_bubble;
  check_exact(gpt_small(), z, cl, 2);
  auto u = layout(2, 2, 2, 3);
  u.parallel.pipeline_layers = {1, 4};  // uneven stages: 1 and 4 layers
  check_exact(gpt_small(5), u, cl, 2);
}

TEST_CASE("folding TP ranks is exact with ZeRO-1 and ZeRO-3, across nodes and with full recomputation") {
  auto c = layout(4, 2, 4, 2);  // 32 GPUs: DP groups span 4 nodes
  c.parallel.zero_stage = 1;
  c.recompute = Recompute::full;
  check_exact(gpt_small(), c, nodes(4), 2);
  auto z3 = layout(2, 1, 4, 2);
  z3.parallel.zero_stage = 3;
  check_exact(gpt_small(), z3, nodes(1), 1);
}

TEST_CASE("folding TP and CP ranks is exact with MoE expert parallelism and context parallelism") {
  ModelSpec moe = gpt_small(2);
  moe.moe = MoeSpec{8, 2, 0, 1024, 0, 1.0};
  auto e = layout(2, 1, 4, 2);
  e.parallel.ep = 2;
  check_exact(moe, e, nodes(1), 1);
  auto cp = layout(2, 1, 2, 2);
  cp.parallel.cp = 2;
  cp.seq_len = 1024;
  check_exact(gpt_small(), cp, nodes(1), 1);  // ring attention: K/V send/recv over the CP group
  cp.parallel.cp_comm = Parallelism::CpComm::all_gather;
  check_exact(gpt_small(), cp, nodes(1), 1);
}

TEST_CASE("a TP2 step on one GPU pair is the sum of its kernels and its TP collectives' alpha-beta times") {
  // Hand-worked: with pp = dp = 1 nothing overlaps (every op runs on the compute stream, one
  // after the other), so the step is the sum of the kernels' modelled durations plus, for each
  // TP collective, the analytical model's time for the whole TP group of two.
  const Cluster cl = nodes(1);
  const auto c = layout(2, 1, 1, 2);
  const ModelSpec m = gpt_small(2);
  TrainingOptions o;
  const StepProgram p = build_training_step(m, c, cl, o);
  REQUIRE(p.tp_folded);
  REQUIRE(p.gpus.size() == 1);
  std::int64_t sum = 0;
  int tp_calls = 0;
  for (const StepOp& op : p.ops) {
    if (!op.call.valid()) {
      sum += op.duration.ps;
      continue;
    }
    const StepCall& call = p.calls[op.call.value];
    REQUIRE(p.groups[call.group].size() == 2);  // the whole TP group, of which one rank is simulated
    sum += analytical_collective_time(cl, CollectiveCall{call.op, p.groups[call.group], call.bytes}, {}).ps;
    ++tp_calls;
  }
  // Megatron's GPT layer without SP: an all-reduce after attention and after the MLP, forward
  // and backward (the backward's in the input-gradient path), and one for the vocab-parallel
  // embedding's output; per micro-batch 2 layers x 4 + the embedding's forward all-reduce.
  CHECK(tp_calls > 0);
  const auto r = simulate_training(m, c, cl, o);
  CHECK(r.step_time_s == rel_approx(static_cast<double>(sum) * 1e-12, 1e-12));
  TrainingOptions u;
  u.fold = false;
  const auto full = simulate_training(m, c, cl, u);
  CHECK(full.simulated_gpus == 2);
  CHECK(full.step_time_s == r.step_time_s);
}

TEST_CASE("TP ranks whose collectives would take other times are not folded") {
  // Two nodes of 8, 12 GPUs in use, TP outermost ("dp-tp"): TP rank 0's data-parallel group is
  // ranks 0-5 (one node), TP rank 1's is ranks 6-11 (across both nodes, over the NICs). Their
  // gradient all-reduces differ, so TP rank 1 is not TP rank 0 shifted: simulate both.
  auto c = layout(2, 1, 6, 2);
  c.parallel.order = "dp-tp";
  const Cluster cl = nodes(2);
  const auto r = simulate_training(gpt_small(), c, cl, {});
  CHECK_FALSE(r.tp_folded);
  CHECK(r.simulated_gpus == 2);  // one data-parallel replica, both TP ranks
  // The same layout placed TP innermost folds.
  c.parallel.order = "tp-dp";
  const auto f = simulate_training(gpt_small(), c, cl, {});
  CHECK(f.tp_folded);
  CHECK(f.simulated_gpus == 1);
}

TEST_CASE("noise and flow fidelity keep every TP rank") {
  auto c = layout(2, 1, 2, 2);
  TrainingOptions flow;
  flow.flow_network = true;
  const auto f = simulate_training(gpt_small(), c, nodes(1), flow);
  CHECK_FALSE(f.tp_folded);
  CHECK(f.simulated_gpus == 4);
  c.noise.kernel_jitter = 0.05;
  c.noise.steps = 2;
  const auto n = simulate_training(gpt_small(), c, nodes(1), {});
  CHECK_FALSE(n.tp_folded);
  CHECK(n.simulated_gpus == 4);
}

TEST_CASE("each collective call is priced as its own (group, op, bytes), however many share a group") {
  // Gradient buckets of one DP group: one per layer (a 1-byte bucket flushes after each layer)
  // and the embedding's, of other sizes, so one group and op carry calls of several sizes.
  auto c = layout(1, 1, 2, 1);
  c.overlap_grad_reduce = true;
  c.grad_bucket_bytes = 1;
  const Cluster cl = nodes(1);
  const StepProgram p = build_training_step(gpt_small(), c, cl, {});
  const auto t = analytical_call_times(p, cl, {});
  REQUIRE(t.size() == p.calls.size());
  bool sizes_differ = false;
  for (std::size_t r = 0; r < p.calls.size(); ++r) {
    const StepCall& call = p.calls[r];
    sizes_differ =
        sizes_differ || (call.group == p.calls[0].group && call.op == p.calls[0].op && call.bytes != p.calls[0].bytes);
    CHECK(t[r] == analytical_collective_time(cl, CollectiveCall{call.op, p.groups[call.group], call.bytes}, {}));
  }
  CHECK(sizes_differ);
}

TEST_CASE("each stage's utilization is its kernels' modelled time over the step, as the breakdown's sweep finds it") {
  // Without noise or overlap slowdown every kernel runs for its modelled duration, one at a time
  // on its GPU's compute stream: a stage's busy time is the sum of its compute and optimizer ops'
  // durations (read from the program alone), and step_breakdown's sweep of the run must agree.
  // PP4 with ZeRO-1 (an optimizer op and a parameter all-gather per stage; the first and last
  // stages also hold the embedding and the head), 1F1B and interleaved.
  for (const bool interleaved : {false, true}) {
    CAPTURE(interleaved);
    auto c = layout(2, 4, 2, 8);
    c.parallel.zero_stage = 1;
    if (interleaved) {
      c.parallel.schedule = PipelineSchedule::interleaved;
      c.parallel.virtual_stages = 2;
    }
    const ModelSpec m = gpt_small(8);
    const Cluster cl = nodes(2);
    const TrainingResult r = simulate_training(m, c, cl, {});
    const StepProgram p = build_training_step(m, c, cl, {});
    const LoweredStep lowered = lower_step(p);
    const StepRun run = run_step(p, lowered, c, cl, {}, 0, 1);
    REQUIRE(r.stage_utilization.size() == 4);
    const auto gpu_ops = ops_by_gpu(p);
    for (std::uint32_t g = 0; g < p.gpus.size(); ++g) {
      const StepGpu& at = p.gpus[g];
      if (at.tp != 0 || at.dp != 0) continue;
      std::int64_t compute = 0, optimizer = 0;
      for (const StepOp& op : p.ops) {
        if (op.gpu != g) continue;
        if (op.cls == OpClass::compute) compute += op.duration.ps;
        if (op.cls == OpClass::optimizer) optimizer += op.duration.ps;
      }
      CHECK(optimizer > 0);
      const double busy_s = static_cast<double>(compute) * 1e-12 + static_cast<double>(optimizer) * 1e-12;
      CHECK(r.stage_utilization[at.pp] == rel_approx(busy_s / r.step_time_s, 1e-12));
      const StepBreakdown bd = step_breakdown(p, gpu_ops[g], *run.exec, true);
      CHECK(r.stage_utilization[at.pp] == (bd.compute_s + bd.optimizer_s) / r.step_time_s);
    }
  }
}
TEST_CASE("every rank of a CP2 DP2 layout joins one gradient reduction per bucket, whatever its CP coordinate") {
  // Gradients are reduced over the DP and CP ranks together: a group of dp * cp = 4 ranks. Each
  // rank issues the step's reductions in the same order, so each reduction is one call with all
  // 4 as members (were each CP rank's reductions keyed apart, each call would have 2 members and
  // would start without waiting for the other CP rank). Unfolded, with 2 TP ranks: 8 GPUs.
  auto cp = layout(2, 1, 2, 2);
  cp.parallel.cp = 2;
  cp.seq_len = 1024;
  TrainingOptions unfolded;
  unfolded.fold = false;
  const StepProgram p = build_training_step(gpt_small(), cp, nodes(1), unfolded);
  REQUIRE(p.gpus.size() == 8);
  std::vector<std::size_t> members(p.calls.size(), 0);
  for (const StepOp& op : p.ops)
    if (op.call.valid()) ++members[op.call.value];
  int reductions = 0;
  for (std::size_t r = 0; r < p.calls.size(); ++r) {
    const auto& group = p.groups[p.calls[r].group];
    if (group.size() != 4) continue;
    ++reductions;
    CHECK(members[r] == 4);
  }
  // Each of the 2 TP ranks' DP x CP groups carries the same buckets.
  CHECK(reductions > 0);
  CHECK(reductions % 2 == 0);
}
