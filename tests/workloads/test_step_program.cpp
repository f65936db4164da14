// The step program read directly, before any simulation: its GPUs, the ops of one layer, the
// collective calls with their groups and sizes, and its limits. Same tiny model as
// test_step_collectives.cpp: h = 64, 4 heads, 2 KV heads of 16, FFN 160, 4 layers; a
// micro-batch of b = 2 sequences of s = 32 tokens.
#include <doctest/doctest.h>

#include "tiny_models.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "sim/random.hpp"
#include "topology/cluster.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"
#include "workloads/training_trace.hpp"

using namespace ctwin;

namespace {

constexpr int kLayers = 4;
constexpr double kTokens = 32 * 2;          // s * b of one micro-batch
constexpr double kSbh2 = kTokens * 64 * 2;  // its activations in bf16

ModelSpec tiny() { return ctwin::test::tiny_llama(kLayers); }
Cluster node8() { return ctwin::test::h100_node8(); }
TrainingConfig layout(int tp, int pp, int dp, int micro_batches) {
  return ctwin::test::tiny_layout(tp, pp, dp, micro_batches);
}

std::vector<const StepOp*> ops_where(const StepProgram& p, std::uint32_t gpu, int layer, int mb, StepPhase phase) {
  std::vector<const StepOp*> out;
  for (const auto& op : p.ops) {
    if (op.gpu == gpu && op.layer == layer && op.mb == mb && op.phase == phase) out.push_back(&op);
  }
  return out;
}

}  // namespace

TEST_CASE("step program: one op per layer item, the fused QKV GEMM and two TP all-reduces of s*b*h per forward") {
  const ModelSpec m = tiny();
  const TrainingConfig cfg = layout(2, 1, 1, 2);
  TrainingOptions both_ranks;
  both_ranks.fold_ranks = false;  // each TP rank's own ops
  const StepProgram p = build_training_step(m, cfg, node8(), both_ranks);
  REQUIRE(p.gpus.size() == 2);
  CHECK(p.gpus[0].rank == 0);
  CHECK(p.gpus[1].rank == 1);
  CHECK(p.gpus[1].tp == 1);
  CHECK_FALSE(p.folded);
  const auto fwd = ops_where(p, 0, 0, 0, StepPhase::forward);
  // Every item but the two f operators, which are identities in forward (all-reduces in backward).
  const auto items = transformer_layer(m, layer_shape(m, cfg), false, 1);
  CHECK(items.size() == 14);
  CHECK(fwd.size() == items.size() - 2);
  // QKV: (64 tokens x 64) @ (64 x (64 + 2 * 32) / 2): 2 * 64 * 64 * 64 FLOPs on each TP rank.
  const auto qkv = std::find_if(fwd.begin(), fwd.end(), [&](const StepOp* o) { return p.names.str(o->name) == "qkv"; });
  REQUIRE(qkv != fwd.end());
  CHECK((*qkv)->flops == 2 * kTokens * 64 * 64);  // exact in float
  CHECK((*qkv)->duration.ps > 0);
  CHECK((*qkv)->cls == OpClass::compute);
  int tp_calls = 0;
  for (const StepOp* o : fwd) {
    if (!o->call.valid()) continue;
    const StepCall& c = p.calls[o->call.value];
    ++tp_calls;
    CHECK(c.op == CollectiveOp::all_reduce);
    CHECK(c.bytes == kSbh2);
    CHECK(p.groups[c.group] == std::vector<GpuId>{GpuId(0), GpuId(1)});
    CHECK(o->cls == OpClass::comm_tp);
  }
  CHECK(tp_calls == 2);
  // Per micro-batch: two per layer in forward and two in backward, the embedding's g in forward
  // and the LM head's f in backward: 2 * (4 * 4 + 2) calls, each with both ranks as members.
  int members = 0;
  for (const auto& op : p.ops) members += op.call.valid() ? 1 : 0;
  CHECK(p.calls.size() == 2 * (4 * kLayers + 2));
  CHECK(members == 2 * static_cast<int>(p.calls.size()));
  // Dependencies point backwards: the program is in issue order.
  for (std::uint32_t i = 0; i < p.ops.size(); ++i) {
    for (std::uint32_t k = p.ops[i].deps_begin; k < p.ops[i].deps_end; ++k) CHECK(p.deps[k].value < i);
  }
}

TEST_CASE("step program: pipeline transfers move one micro-batch's s*b*h/tp between neighbouring stages") {
  const StepProgram p = build_training_step(tiny(), layout(1, 2, 1, 3), node8(), TrainingOptions{});
  REQUIRE(p.gpus.size() == 2);
  int sends = 0;
  for (const auto& op : p.ops) {
    if (op.stream != StepStream::pp_transfer) continue;
    const StepCall& c = p.calls[op.call.value];
    CHECK(c.op == CollectiveOp::send_recv);
    CHECK(c.bytes == kSbh2);
    CHECK(p.groups[c.group].size() == 2);
    if (p.names.str(op.name).rfind("send", 0) == 0) ++sends;
  }
  CHECK(sends == 2 * 3);  // activations forward and gradients back, per micro-batch
}

TEST_CASE("step program: folding keeps one data-parallel replica, and the collectives come from the program") {
  TrainingOptions opt;
  opt.trace = true;
  opt.fold_ranks = false;  // the replica's two TP ranks both (tests/workloads/test_fold.cpp folds them)
  const TrainingConfig cfg = layout(2, 1, 4, 2);
  const StepProgram p = build_training_step(tiny(), cfg, node8(), opt);
  CHECK(p.folded);
  CHECK(p.gpus.size() == 2);
  const auto from_program = step_collectives(p);
  const auto from_run = simulate_training(tiny(), cfg, node8(), opt).collectives;
  REQUIRE(from_program.size() == from_run.size());
  for (std::size_t i = 0; i < from_run.size(); ++i) {
    CHECK(from_program[i].name == from_run[i].name);
    CHECK(from_program[i].bytes == from_run[i].bytes);
    CHECK(from_program[i].micro_batch == from_run[i].micro_batch);
  }
}

TEST_CASE("step program: more than 65,535 micro-batches per replica are rejected, not aliased") {
  TrainingConfig cfg = layout(1, 2, 1, 1);
  cfg.micro_batch = 1;
  cfg.global_batch = kMaxMicroBatches + 1;
  CHECK_THROWS_AS(build_training_step(tiny(), cfg, node8(), TrainingOptions{}), LayoutError);
  CHECK_THROWS_AS(simulate_training(tiny(), cfg, node8()), LayoutError);
}

TEST_CASE("random: splitmix64 and its uniform are fixed functions of the key, strictly inside (0, 1)") {
  CHECK(mix64(0) == 0xe220a8397b1dcdafull);  // splitmix64's first output from state 0
  CHECK(mix64(1) != mix64(2));
  for (std::uint64_t k : {0ull, 1ull, 42ull, ~0ull}) {
    CHECK(uniform01(k) > 0.0);
    CHECK(uniform01(k) < 1.0);
    CHECK(uniform01(k) == uniform01(k));
  }
}

TEST_CASE("step breakdown: with a pipeline the parts, optimizer and bubble included, add up to the step time once") {
  const auto r = simulate_training(tiny(), layout(2, 2, 2, 4), node8());
  const auto& b = r.breakdown;
  CHECK(b.optimizer_s > 0);
  CHECK(b.bubble_s > 0);
  const double sum = b.compute_s + b.optimizer_s + b.exposed_comm_s() + b.bubble_s + b.other_s;
  CHECK(std::abs(sum - r.step_time_s) <= 1e-9 * r.step_time_s);
}

TEST_CASE("step breakdown: a balanced ZeRO-3 step has exposed DP time and no peer waiting") {
  // ZeRO-3 over 8 GPUs of one node, no pipeline, no noise: every rank reaches every collective
  // at the same instant, so the compute stream's stalls are the parameter all-gathers and
  // gradient reduce-scatters themselves (exposed DP) and nothing waits for a peer ("other").
  TrainingConfig cfg = layout(1, 1, 8, 2);
  cfg.parallel.zero_stage = 3;
  const auto r = simulate_training(tiny(), cfg, node8());
  const auto& b = r.breakdown;
  CHECK(b.exposed_dp_s > 0.05 * r.step_time_s);
  CHECK(b.other_s <= 1e-9 * r.step_time_s);
}
