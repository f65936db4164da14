// MoE parallel folding (Megatron-Core, --expert-tensor-parallel-size 1; Liu et al. 2025, arXiv
// 2504.14960): each routed expert whole on its GPU and the expert-parallel groups drawn from the
// TP, CP and DP ranks of a stage together, numbered TP fastest. Counted by hand on tiny_llama(4)
// (h 64) with 8 routed experts of width 32, top 2, at tp 2, dp 4, ep 4 on one 8-GPU node: EP
// groups are GPUs {0..3} and {4..7}, the expert-data-parallel groups the GPUs 4 apart.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/memory.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using Phase = StepCollective::Phase;

namespace {

constexpr double kExpert = 3 * 64 * 32;  // one SwiGLU expert: 3 x h x width

ModelSpec tiny_moe() {
  ModelSpec m = ctwin::test::tiny_llama(4);
  m.moe = MoeSpec{8, 2, 0, 32, 0, 1.0};
  return m;
}

TrainingConfig folded(int etp = 1) {
  TrainingConfig c = ctwin::test::tiny_layout(2, 1, 4, 1);
  c.parallel.ep = 4;
  c.parallel.etp = etp;
  c.parallel.sequence_parallel = true;
  c.parallel.zero_stage = 1;
  return c;
}

std::vector<GpuId> group_of(const StepProgram& p, int rank, CommGroup g) {
  for (const auto& op : p.ops) {
    if (p.gpus[op.gpu].rank != rank || op.group != static_cast<std::uint8_t>(g) || !op.call.valid()) continue;
    return p.groups[p.calls[op.call.value].group];
  }
  return {};
}

std::vector<GpuId> ranks(std::initializer_list<int> r) {
  std::vector<GpuId> v;
  for (int x : r) v.emplace_back(x);
  return v;
}

}  // namespace

TEST_CASE("MoE parallel folding: EP groups span the TP ranks, expert-data-parallel groups are the ranks ep apart") {
  TrainingOptions opt;
  opt.fold = false;
  const StepProgram p = build_training_step(tiny_moe(), folded(), ctwin::test::h100_node8(), opt);
  CHECK(group_of(p, 1, CommGroup::ep) == ranks({0, 1, 2, 3}));
  CHECK(group_of(p, 6, CommGroup::ep) == ranks({4, 5, 6, 7}));
  CHECK(group_of(p, 1, CommGroup::edp) == ranks({1, 5}));
  CHECK(group_of(p, 6, CommGroup::edp) == ranks({2, 6}));
  // Without folding the EP groups are carved from the DP ranks of one TP index (tp 2, dp 4,
  // ep 4: DP ranks 0..3 at TP index 1 are GPUs 1, 3, 5, 7).
  TrainingConfig plain = folded(0);
  const StepProgram q = build_training_step(tiny_moe(), plain, ctwin::test::h100_node8(), opt);
  CHECK(group_of(q, 1, CommGroup::ep) == ranks({1, 3, 5, 7}));
}

TEST_CASE(
    "MoE parallel folding: a TP rank routes its own 1/tp of the tokens to whole experts, no TP collective around "
    "them") {
  const ModelSpec m = tiny_moe();
  const TrainingConfig c = folded();
  const LayerShape s = layer_shape(m, c);
  const double T = 2 * 32, h = 64, e = 2;  // micro-batch 2 x 32 tokens, BF16
  auto count_tp = [](const std::vector<LayerItem>& items) {
    int n = 0;
    for (const auto& it : items) n += it.is_comm && it.group == CommGroup::tp ? 1 : 0;
    return n;
  };
  const auto whole = transformer_layer(m, s, true, 4, 1.0, MoeDispatcher::alltoall, 1);
  const auto split = transformer_layer(m, s, true, 4, 1.0, MoeDispatcher::alltoall, 0);
  CHECK(count_tp(whole) == 2);  // attention's gather and scatter only
  CHECK(count_tp(split) == 4);  // and the MLP's
  bool seen_a2a = false, seen_up = false;
  for (const auto& it : whole) {
    if (it.name == "ep_dispatch") {
      CHECK(it.comm_bytes == rel_approx(T / 2 * 2 * h * e, 1e-12));  // T/tp tokens x top 2 x h
      seen_a2a = true;
    }
    if (it.name == "expert_up") {
      // T/tp x top 2 tokens through 8/ep = 2 whole experts: gate and up, 2 x 32 wide.
      CHECK(it.fwd.flops == rel_approx(2 * (T / 2 * 2) * h * (2 * 32), 1e-12));
      seen_up = true;
    }
  }
  CHECK(seen_a2a);
  CHECK(seen_up);
  for (const auto& it : split) {
    if (it.name == "ep_dispatch") CHECK(it.comm_bytes == rel_approx(T * 2 * h * e, 1e-12));
    if (it.name == "expert_up") CHECK(it.fwd.flops == rel_approx(2 * (T * 2) * h * (2 * 32 / 2), 1e-12));
  }
}

TEST_CASE("MoE parallel folding: whole experts in memory, their gradients reduced over tp x dp / ep ranks") {
  const ModelSpec m = tiny_moe();
  const TrainingConfig c = folded();
  // 4 layers x 8/ep = 2 experts each, whole (not halved over TP).
  CHECK(stage_expert_params(m, c, 0) == rel_approx(4 * 2 * kExpert, 1e-12));
  CHECK(stage_expert_params(m, folded(0), 0) == rel_approx(4 * 2 * kExpert / 2, 1e-12));
  CHECK(expert_data_parallel(c.parallel) == rel_approx(2.0, 1e-12));  // 2 x 4 / 4
  TrainingOptions opt;
  opt.trace = true;
  opt.fold = false;
  double rs = 0;
  int size = 0;
  for (const auto& x : simulate_training(m, c, ctwin::test::h100_node8(), opt).collectives) {
    if (x.rank != 0 || x.group != CommGroup::edp || x.phase != Phase::backward) continue;
    rs += x.bytes;
    size = x.group_size;
  }
  CHECK(size == 2);
  CHECK(rs == rel_approx(4 * 2 * kExpert * c.precision.grad_bytes, 1e-12));
}

TEST_CASE("MoE parallel folding: one simulated rank per TP group and replica is exact against every rank") {
  const ModelSpec m = tiny_moe();
  const auto cl = ctwin::test::fold_nodes(2);
  TrainingConfig c = ctwin::test::tiny_layout(2, 2, 4, 4);
  c.parallel.ep = 8;  // over both TP ranks of 4 DP replicas: two nodes' worth of expert groups
  c.parallel.etp = 1;
  c.parallel.sequence_parallel = true;
  c.parallel.zero_stage = 1;
  TrainingOptions all;
  all.fold = false;
  const auto folded_run = simulate_training(m, c, cl, {});
  const auto every_rank = simulate_training(m, c, cl, all);
  CHECK(folded_run.step_time_s == rel_approx(every_rank.step_time_s, 1e-12));
  CHECK(folded_run.breakdown.exposed_ep_s == rel_approx(every_rank.breakdown.exposed_ep_s, 1e-12));
  CHECK(folded_run.breakdown.exposed_ep_s > 0);
}

TEST_CASE(
    "MoE parallel folding: etp must be 0, 1 or tp; folding needs ep > 1, sequence parallelism and ep dividing tp x cp "
    "x dp") {
  const ModelSpec m = tiny_moe();
  const auto& cl = ctwin::test::h100_node8();
  auto fields = [&](const TrainingConfig& c) {
    std::vector<std::string> f;
    for (const auto& p : check_training_layout(m, c, cl)) f.push_back(p.field);
    return f;
  };
  CHECK(fields(folded()).empty());
  TrainingConfig c = folded();
  c.parallel.ep = 8;  // > dp 4, but divides tp x dp = 8
  CHECK(fields(c).empty());
  c = folded();
  c.parallel.etp = 3;
  CHECK(fields(c) == std::vector<std::string>{"parallelism/etp"});
  c = folded();
  c.parallel.sequence_parallel = false;
  CHECK(fields(c) == std::vector<std::string>{"parallelism/etp"});
  c = folded();
  c.parallel.ep = 1;
  CHECK(fields(c) == std::vector<std::string>{"parallelism/etp"});
  c = folded(0);
  c.parallel.ep = 8;  // not folded: ep must divide dp 4
  CHECK(fields(c) == std::vector<std::string>{"parallelism/ep"});
}
