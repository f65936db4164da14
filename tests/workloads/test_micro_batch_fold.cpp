// Folding micro-batches (workloads/training_sim.hpp, MicroBatchFold; docs/training.md,
// "Folding"): a long step simulated as three short ones and its steady period extrapolated gives
// the whole step's figures, to the bit, wherever the even-growth check lets it fold; elsewhere the
// whole step is simulated.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "topology/cluster.hpp"
#include "workloads/training_sim.hpp"

#include "tiny_models.hpp"

using namespace ctwin;

namespace {

ModelSpec gpt_small(int layers = 4) { return ctwin::test::fold_gpt(layers); }
Cluster nodes(int n) { return ctwin::test::fold_nodes(n); }
TrainingConfig layout(int tp, int pp, int dp, int micro_batches) {
  return ctwin::test::fold_layout(tp, pp, dp, micro_batches);
}

// Every figure to the bit: the breakdown's parts are whole picoseconds converted once, and the fold
// extends them in whole picoseconds.
void same_figures(const TrainingResult& f, const TrainingResult& w) {
  CHECK(f.step_time_s == w.step_time_s);
  CHECK(f.breakdown.compute_s == w.breakdown.compute_s);
  CHECK(f.breakdown.optimizer_s == w.breakdown.optimizer_s);
  CHECK(f.breakdown.exposed_tp_s == w.breakdown.exposed_tp_s);
  CHECK(f.breakdown.exposed_cp_s == w.breakdown.exposed_cp_s);
  CHECK(f.breakdown.exposed_ep_s == w.breakdown.exposed_ep_s);
  CHECK(f.breakdown.exposed_dp_s == w.breakdown.exposed_dp_s);
  CHECK(f.breakdown.exposed_pp_s == w.breakdown.exposed_pp_s);
  CHECK(f.breakdown.bubble_s == w.breakdown.bubble_s);
  CHECK(f.breakdown.other_s == w.breakdown.other_s);
  CHECK(f.stage_utilization == w.stage_utilization);
  CHECK(f.mfu == w.mfu);
  CHECK(f.grad_accum == w.grad_accum);
}

// The folded step against the whole one; returns the folded result.
TrainingResult check_exact(const ModelSpec& m, const TrainingConfig& c, const Cluster& cl) {
  TrainingOptions whole;
  whole.fold_micro_batches = false;
  const TrainingResult f = simulate_training(m, c, cl);
  const TrainingResult w = simulate_training(m, c, cl, whole);
  CAPTURE(c.grad_accum());
  CAPTURE(c.parallel.pp);
  REQUIRE(w.simulated_micro_batches.empty());
  const MicroBatchFold plan = micro_batch_fold(c, TrainingOptions{});
  REQUIRE(plan.active());
  // It folded (the three runs grew evenly), from the counts the plan names.
  REQUIRE(f.simulated_micro_batches.size() == 3);
  CHECK(f.simulated_micro_batches[0] == plan.at(0));
  CHECK(f.simulated_micro_batches[1] == plan.at(1));
  CHECK(f.simulated_micro_batches[2] == plan.at(2));
  same_figures(f, w);
  return f;
}

// A fold forced at `plan` (first, stride) is refused: nothing folded, the whole step's figures.
void check_refused(const TrainingConfig& c, const Cluster& cl, std::pair<int, int> plan) {
  TrainingOptions forced, whole;
  forced.micro_batch_fold_plan = plan;
  whole.fold_micro_batches = false;
  const TrainingResult f = simulate_training(gpt_small(), c, cl, forced);
  const TrainingResult w = simulate_training(gpt_small(), c, cl, whole);
  CHECK(f.simulated_micro_batches.empty());
  same_figures(f, w);
}

}  // namespace

TEST_CASE("micro-batch folding plans three runs about two pipelines long, congruent to the step's count") {
  TrainingOptions o;
  auto c = layout(1, 4, 1, 64);
  MicroBatchFold f = micro_batch_fold(c, o);
  CHECK(f.first == 8);   // 2 x pp
  CHECK(f.stride == 2);  // the steady state may alternate between two periods
  CHECK(f.at(2) == 12);
  // Interleaved: groups of pp micro-batches, so the runs keep m's residue modulo pp.
  c = layout(1, 4, 1, 66);
  c.parallel.schedule = PipelineSchedule::interleaved;
  c.parallel.virtual_stages = 2;
  f = micro_batch_fold(c, o);
  CHECK(f.stride == 4);
  CHECK(f.first == 14);  // (2 chunks + 1) x pp = 12, rounded up to 66's residue 2 modulo 4
  CHECK((66 - f.at(2)) % 4 == 0);
  // No pipeline: at least four micro-batches.
  c = layout(1, 1, 2, 40);
  f = micro_batch_fold(c, o);
  CHECK(f.first == 4);
  CHECK(f.stride == 2);
  // Never zero-bubble: its order is built for the whole count at once.
  c = layout(1, 4, 1, 64);
  c.parallel.schedule = PipelineSchedule::zero_bubble;
  CHECK_FALSE(micro_batch_fold(c, o).active());
  // Odd pp: even counts, congruent to m.
  f = micro_batch_fold(layout(1, 3, 1, 41), o);
  CHECK(f.first == 7);
  // Not worth it: the three runs would hold as many micro-batches as the step (3 x 8 + 3 x 2 = 30).
  CHECK_FALSE(micro_batch_fold(layout(1, 4, 1, 30), o).active());
  CHECK(micro_batch_fold(layout(1, 4, 1, 32), o).active());
  // Never with a trace, noise, flows, or folding off.
  c = layout(1, 4, 1, 64);
  TrainingOptions t;
  t.trace = true;
  CHECK_FALSE(micro_batch_fold(c, t).active());
  TrainingOptions fl;
  fl.flow_network = true;
  CHECK_FALSE(micro_batch_fold(c, fl).active());
  TrainingOptions nf;
  nf.fold = false;
  CHECK_FALSE(micro_batch_fold(c, nf).active());
  TrainingOptions nm;
  nm.fold_micro_batches = false;
  CHECK_FALSE(micro_batch_fold(c, nm).active());
  auto noisy = c;
  noisy.noise.kernel_jitter = 0.05;
  noisy.noise.steps = 2;
  CHECK_FALSE(micro_batch_fold(noisy, o).active());
}

TEST_CASE("folded micro-batches give the whole step: 1F1B, GPipe, interleaved and uneven pipelines") {
  const Cluster cl = nodes(1);
  check_exact(gpt_small(), layout(2, 2, 2, 40), cl);
  check_exact(gpt_small(8), layout(1, 4, 2, 48), cl);
  auto g = layout(2, 2, 2, 40);
  g.parallel.schedule = PipelineSchedule::gpipe;
  check_exact(gpt_small(), g, cl);
  auto i = layout(1, 2, 2, 42);
  i.parallel.schedule = PipelineSchedule::interleaved;
  i.parallel.virtual_stages = 2;
  check_exact(gpt_small(8), i, cl);
  auto u = layout(2, 2, 2, 40);
  u.parallel.pipeline_layers = {1, 4};  // uneven stages
  check_exact(gpt_small(5), u, cl);
}

TEST_CASE("folded micro-batches give the whole step: ZeRO-1 and ZeRO-3, recomputation, sequence parallel, MoE, CP") {
  auto z1 = layout(4, 2, 4, 40);  // 32 GPUs over 4 nodes
  z1.parallel.zero_stage = 1;
  z1.recompute = Recompute::full;
  check_exact(gpt_small(), z1, nodes(4));
  auto z3 = layout(2, 1, 4, 24);  // no pipeline: gradient accumulation
  z3.parallel.zero_stage = 3;
  check_exact(gpt_small(), z3, nodes(1));
  auto sp = layout(2, 2, 2, 40);
  sp.parallel.sequence_parallel = true;
  sp.parallel.tp_comm_overlap = true;
  sp.overlap_slowdown = 0.2;
  check_exact(gpt_small(), sp, nodes(1));
  ModelSpec moe = gpt_small(2);
  moe.moe = MoeSpec{8, 2, 0, 1024, 0, 1.0};
  auto e = layout(2, 1, 4, 20);
  e.parallel.ep = 2;
  check_exact(moe, e, nodes(1));
  auto cp = layout(2, 2, 2, 40);
  cp.parallel.cp = 2;
  cp.seq_len = 1024;
  check_exact(gpt_small(), cp, nodes(2));
}

TEST_CASE("runs that grow unevenly are not extrapolated: the whole step runs") {
  // A zero-bubble order is rebuilt from the costs for each micro-batch count (so the plan never
  // folds it; the test's own plan forces it): at 4, 6 and 8 micro-batches this TP2 PP2 step grows
  // by different amounts (874 and 886 us), so the fold is refused and all 40 are simulated.
  const Cluster cl = nodes(1);
  auto c = layout(2, 2, 2, 40);
  c.parallel.schedule = PipelineSchedule::zero_bubble;
  check_refused(c, cl, std::pair{4, 2});
}

TEST_CASE("a step time that grows evenly is not enough: a breakdown part growing unevenly keeps the whole step") {
  // 4 stages, 8 micro-batches, runs of 3, 4 and 5 (still inside the warm-up): the step grows by
  // the same picoseconds each time, the exposed pipeline transfers do not (57, 71, 99 us), so the
  // fold is refused.
  const Cluster cl = nodes(1);
  const auto c = layout(1, 4, 1, 8);
  check_refused(c, cl, std::pair{3, 1});
}
