// Routed experts under expert parallelism are reduced, sharded and gathered over the
// expert-data-parallel group (the dp x cp / ep ranks holding the same experts), the rest of the
// model over the whole DP group: Megatron-Core's expert-data-parallel process group, FSDP2's
// expert mesh in NeMo AutoModel and DeepSpeed-MoE's expert data parallel group. Counted by hand on
// tiny_llama(4) with 8 routed experts of width 32, top 2.
//
// Per layer (tp 1): attention 12,288, two norm scales 128, router 64 x 8 = 512, so 12,928
// parameters outside the experts; an expert is a SwiGLU MLP 3 x 64 x 32 = 6,144. Embedding and
// LM head 128 x 64 = 8,192 each, final norm 64.
#include <doctest/doctest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using Phase = StepCollective::Phase;

namespace {

constexpr double kDense = 12288 + 128 + 512;
constexpr double kExpert = 3 * 64 * 32;
constexpr double kOutside = 2 * 8192 + 64;  // embedding, LM head, final norm

ModelSpec tiny_moe() {
  ModelSpec m = ctwin::test::tiny_llama(4);
  m.moe = MoeSpec{8, 2, 0, 32, 0, 1.0};
  return m;
}

TrainingConfig layout(int dp, int ep, int zero, Sharding::Framework f = Sharding::Framework::fsdp2) {
  TrainingConfig c = ctwin::test::tiny_layout(1, 1, dp, 1);
  c.parallel.ep = ep;
  c.parallel.zero_stage = zero;
  c.parallel.sharding.framework = f;
  return c;
}

std::vector<StepCollective> calls(const TrainingConfig& c, CommGroup g, int phase, int rank = 0) {
  TrainingOptions opt;
  opt.trace = true;
  opt.fold = false;  // every DP replica, so any rank's calls are there
  std::vector<StepCollective> out;
  for (const auto& x : simulate_training(tiny_moe(), c, ctwin::test::h100_node8(), opt).collectives) {
    if (x.rank == rank && x.group == g && static_cast<int>(x.phase) == phase) out.push_back(x);
  }
  return out;
}

}  // namespace

TEST_CASE("ZeRO-3 with ep = dp: the experts stay whole on their rank, only the rest of a layer is gathered") {
  const int fwd = static_cast<int>(Phase::forward), bwd = static_cast<int>(Phase::backward);
  const TrainingConfig c = layout(4, 4, 3);
  const auto ag = calls(c, CommGroup::dp, fwd);
  REQUIRE(ag.size() == 4);  // one per layer
  for (const auto& x : ag) {
    CHECK(x.op == CollectiveOp::all_gather);
    CHECK(x.bytes == rel_approx(kDense * 2, 1e-12));
    CHECK(x.group_size == 4);
  }
  CHECK(calls(c, CommGroup::edp, fwd).empty());
  CHECK(calls(c, CommGroup::edp, bwd).empty());
  // Backward reduce-scatters the same share of each layer over DP, none of the experts'.
  double rs = 0;
  for (const auto& x : calls(c, CommGroup::dp, bwd)) {
    if (x.op == CollectiveOp::reduce_scatter) rs += x.bytes;
  }
  CHECK(rs == rel_approx((4 * kDense + kOutside) * c.precision.grad_bytes, 1e-12));
}

TEST_CASE("ZeRO-3 with ep < dp: the experts are gathered and reduced over the dp / ep ranks holding them") {
  const int fwd = static_cast<int>(Phase::forward), bwd = static_cast<int>(Phase::backward);
  const TrainingConfig c = layout(4, 2, 3);
  const auto dense = calls(c, CommGroup::dp, fwd, 1);
  const auto experts = calls(c, CommGroup::edp, fwd, 1);
  REQUIRE(dense.size() == 4);
  REQUIRE(experts.size() == 4);
  for (const auto& x : experts) {
    CHECK(x.op == CollectiveOp::all_gather);
    CHECK(x.bytes == rel_approx(4 * kExpert * 2, 1e-12));  // 8 / ep = 4 local experts
    CHECK(x.group_size == 2);
  }
  double rs = 0;
  for (const auto& x : calls(c, CommGroup::edp, bwd, 1)) {
    if (x.op == CollectiveOp::reduce_scatter) rs += x.bytes;
  }
  CHECK(rs == rel_approx(4 * 4 * kExpert * c.precision.grad_bytes, 1e-12));
  // The group: DP ranks 1 and 3 hold the same experts (ep index 1).
  TrainingOptions opt;
  opt.fold = false;
  const StepProgram p = build_training_step(tiny_moe(), c, ctwin::test::h100_node8(), opt);
  bool seen = false;
  for (const auto& op : p.ops) {
    if (p.gpus[op.gpu].rank != 1 || op.group != static_cast<std::uint8_t>(CommGroup::edp) || !op.call.valid()) continue;
    const auto& ranks = p.groups[p.calls[op.call.value].group];
    CHECK(ranks == std::vector<GpuId>{GpuId(1), GpuId(3)});
    seen = true;
  }
  CHECK(seen);
  // Folding the replicas stays exact: each expert-data-parallel group is alike.
  const auto& cl = ctwin::test::h100_node8();
  CHECK(simulate_training(tiny_moe(), c, cl, {}).step_time_s ==
        rel_approx(simulate_training(tiny_moe(), c, cl, opt).step_time_s, 1e-12));
}

TEST_CASE("distributed optimizer with EP: expert gradients reduce-scatter and parameters gather over expert DP") {
  const int step = static_cast<int>(Phase::step), bwd = static_cast<int>(Phase::backward);
  const TrainingConfig c = layout(4, 2, 1);
  const double gb = c.precision.grad_bytes, wb = c.precision.weight_bytes;
  // One 25 MiB bucket holds the whole step's gradients: one reduce-scatter per group in backward,
  // and one all-gather per group of the updated parameters after the step.
  for (const auto& phase_bytes : {std::pair{bwd, gb}, std::pair{step, wb}}) {
    // Named copies, not structured bindings: clang 14 cannot capture a binding in CAPTURE's lambda.
    const int phase = phase_bytes.first;
    const double bytes_per_param = phase_bytes.second;
    CAPTURE(phase);
    const auto dense = calls(c, CommGroup::dp, phase);
    const auto experts = calls(c, CommGroup::edp, phase);
    REQUIRE(dense.size() == 1);
    REQUIRE(experts.size() == 1);
    CHECK(dense[0].bytes == rel_approx((4 * kDense + kOutside) * bytes_per_param, 1e-12));
    CHECK(experts[0].bytes == rel_approx(4 * 4 * kExpert * bytes_per_param, 1e-12));
    CHECK(experts[0].group_size == 2);
  }
  // Without expert parallelism every gradient goes over DP, as before.
  const auto plain = calls(layout(4, 1, 1), CommGroup::dp, bwd);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].bytes == rel_approx((4 * (kDense + 8 * kExpert) + kOutside) * gb, 1e-12));
}

TEST_CASE("ZeRO-3 memory: at ep = dp the gathered units hold no experts (they are resident whole)") {
  const auto& pr = TrainingConfig{}.precision;
  // FSDP2 holds two units gathered (the current and the prefetched) and one unit's gradients. With
  // one stage holding the embedding and the LM head, a unit is (params - 2 x 8,192) / 4 layers.
  auto expected = [&](double params) {
    const double unit = std::max((params - 2 * 8192) / 4, 8192.0);
    return 2 * unit * pr.weight_bytes + unit * pr.grad_bytes;
  };
  const MemoryBreakdown whole = estimate_memory(tiny_moe(), layout(4, 4, 3), 80e9);
  CHECK(whole.gathered == rel_approx(expected(4 * kDense + kOutside), 1e-12));
  // ep < dp: the experts are sharded over two ranks and gathered with their layer.
  const MemoryBreakdown sharded = estimate_memory(tiny_moe(), layout(4, 2, 3), 80e9);
  CHECK(sharded.gathered == rel_approx(expected(4 * (kDense + 4 * kExpert) + kOutside), 1e-12));
}
