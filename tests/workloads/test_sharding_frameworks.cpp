// ZeRO-3 as the frameworks issue it (/training/parallelism/sharding, docs/training.md "Sharded
// data parallelism"), on the tiny 4-layer model of test_step_collectives.cpp, counted by hand.
//
// References: PyTorch FSDP1 (torch.distributed.fsdp.FullyShardedDataParallel: one FlatParameter
// per wrapped unit; BackwardPrefetch.BACKWARD_PRE issues the next unit's all-gather before the
// current unit's gradient computation, BACKWARD_POST after it; limit_all_gathers lets the CPU
// run at most two all-gathers ahead); FSDP2 (fully_shard, reshard_after_forward=False keeps
// forward's unsharded parameters for backward); DeepSpeed ZeRO-3 (stage3_prefetch_bucket_size
// coalesces parameter fetches, stage3_param_persistence_threshold keeps small tensors gathered,
// reduce_bucket_size sizes the gradient reduce-scatters); NCCL's ring latency, tuning.cc: one
// step per rank boundary, n - 1 for an all-gather.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "topology/nccl_model.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using Phase = StepCollective::Phase;

namespace {

// Per layer: attention 12,288, SwiGLU MLP 30,720, two RMSNorm scales of 64 (test_step_collectives.cpp).
constexpr double kLayer = 12288 + 30720 + 128;
constexpr double kParams = 4 * kLayer + 2 * 8192 + 64;  // 188,992

TrainingConfig zero3(int micro_batches, Sharding s) {
  TrainingConfig c = ctwin::test::tiny_layout(1, 1, 2, micro_batches);
  c.parallel.zero_stage = 3;
  c.parallel.sharding = s;
  return c;
}

std::vector<StepCollective> dp_calls(const TrainingConfig& c, int phase = -1) {
  TrainingOptions opt;
  opt.trace = true;
  std::vector<StepCollective> out;
  for (const auto& x : simulate_training(ctwin::test::tiny_llama(4), c, ctwin::test::h100_node8(), opt).collectives) {
    if (x.rank == 0 && x.group == CommGroup::dp && (phase < 0 || static_cast<int>(x.phase) == phase)) out.push_back(x);
  }
  return out;
}

// "AG" / "RS" per collective, in issue order.
std::string sequence(const std::vector<StepCollective>& v) {
  std::string s;
  for (const auto& c : v) s += c.op == CollectiveOp::all_gather ? "AG " : "RS ";
  return s;
}

Sharding fsdp1(Sharding::BackwardPrefetch bp, bool limit = true) {
  Sharding s;
  s.framework = Sharding::Framework::fsdp1;
  s.backward_prefetch = bp;
  s.limit_all_gathers = limit;
  return s;
}

}  // namespace

TEST_CASE(
    "FSDP1 BACKWARD_PRE: the next unit's all-gather is issued before this unit's reduce-scatter; BACKWARD_POST "
    "after it") {
  const int bwd = static_cast<int>(Phase::backward);
  // One micro-batch. Backward runs layers 3..0; the last reduce-scatter is the embedding's.
  const auto pre = dp_calls(zero3(1, fsdp1(Sharding::BackwardPrefetch::backward_pre)), bwd);
  CHECK(sequence(pre) == "AG AG RS AG RS AG RS RS RS ");
  // Each all-gather names the layer it gathers: 3, then 2 prefetched while 3 computes.
  REQUIRE(pre.size() == 9);
  CHECK(pre[0].layer == 3);
  CHECK(pre[1].layer == 2);
  CHECK(pre[2].layer == 3);  // layer 3's gradients (with the LM head's and the final norm's)
  const auto post = dp_calls(zero3(1, fsdp1(Sharding::BackwardPrefetch::backward_post)), bwd);
  CHECK(sequence(post) == "AG RS AG RS AG RS AG RS RS ");
  // The same bytes either way: every layer gathered once, every gradient scattered once.
  for (const auto* v : {&pre, &post}) {
    double ag = 0, rs = 0;
    for (const auto& c : *v) (c.op == CollectiveOp::all_gather ? ag : rs) += c.bytes;
    CHECK(ag == rel_approx(4 * 2 * kLayer, 1e-12));
    CHECK(rs == rel_approx(2 * kParams, 1e-12));
  }
}

TEST_CASE("FSDP1 BACKWARD_PRE is no slower than BACKWARD_POST; the rate limiter never speeds a step up") {
  auto step = [](Sharding s) {
    return simulate_training(ctwin::test::tiny_llama(4), zero3(2, s), ctwin::test::h100_node8()).step_time_s;
  };
  const double pre = step(fsdp1(Sharding::BackwardPrefetch::backward_pre));
  const double post = step(fsdp1(Sharding::BackwardPrefetch::backward_post));
  CHECK(pre < post);
  CHECK(step(fsdp1(Sharding::BackwardPrefetch::backward_pre, false)) <= pre);
}

TEST_CASE("the rate limiter: a unit's all-gather waits for the unit two back; without it, for nothing") {
  // Forward of micro-batch 0, rank 0: the host task before layer 2's all-gather depends on the
  // last op of layer 0 (the unit two back has been consumed, so at most two gathers in flight).
  auto window_layers = [](bool limit) {
    Sharding s = fsdp1(Sharding::BackwardPrefetch::backward_pre, limit);
    const StepProgram p =
        build_training_step(ctwin::test::tiny_llama(4), zero3(1, s), ctwin::test::h100_node8(), TrainingOptions{});
    std::vector<int> layers;
    for (const auto& op : p.ops) {
      if (op.gpu != 0 || op.phase != StepPhase::forward || op.layer != 2) continue;
      if (p.names.str(op.name) != "zero3_host") continue;
      for (auto k = op.deps_begin; k < op.deps_end; ++k) layers.push_back(p.ops[p.deps[k].value].layer);
    }
    return layers;
  };
  CHECK(window_layers(true) == std::vector<int>{0});
  CHECK(window_layers(false).empty());
}

TEST_CASE("FSDP2 with reshard_after_forward false gathers in forward only; true gathers again in backward") {
  Sharding s;
  s.framework = Sharding::Framework::fsdp2;
  const int m = 2;
  auto gathers = [&](bool reshard) {
    s.reshard_after_forward = reshard;
    int n = 0;
    for (const auto& c : dp_calls(zero3(m, s))) n += c.op == CollectiveOp::all_gather;
    return n;
  };
  CHECK(gathers(false) == 4 * m);
  CHECK(gathers(true) == 2 * 4 * m);
}

TEST_CASE(
    "DeepSpeed: a layer's 43,008 non-persistent parameters fetched in ceil(43,008 / 20,000) = 3 buckets; "
    "gradients reduce-scattered per reduce_bucket_size") {
  Sharding s;
  s.framework = Sharding::Framework::deepspeed;
  s.prefetch_bucket_elements = 20000;
  // The RMSNorm scales (64 elements each, under the 1e5 threshold) stay gathered.
  const double fetched = kLayer - 128;
  s.reduce_bucket_elements = 1e5;  // 200,000 bytes of BF16 gradients
  const auto fwd = dp_calls(zero3(1, s), static_cast<int>(Phase::forward));
  REQUIRE(fwd.size() == 4 * 3);
  for (const auto& c : fwd) CHECK(c.bytes == rel_approx(2 * fetched / 3, 1e-12));
  // Backward from the LM head (8,192 + 64 gradients) down: layers 3, 2 fill 189,056 bytes, layer 1
  // crosses 200,000 (275,328), then layer 0 and the embedding (86,272 + 16,384) at the end.
  std::vector<double> rs;
  for (const auto& c : dp_calls(zero3(1, s), static_cast<int>(Phase::backward)))
    if (c.op == CollectiveOp::reduce_scatter) rs.push_back(c.bytes);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0] == rel_approx(2 * (8192 + 64 + 3 * kLayer), 1e-12));
  CHECK(rs[1] == rel_approx(2 * (kLayer + 8192), 1e-12));
  // DeepSpeed's default reduce bucket (5e8 elements) holds the whole model: one reduce-scatter at
  // the end of backward, whatever DDP's grad_bucket_mb says.
  s.reduce_bucket_elements = 5e8;
  TrainingConfig small_ddp_buckets = zero3(1, s);
  small_ddp_buckets.grad_bucket_bytes = 1000;
  int n = 0;
  for (const auto& c : dp_calls(small_ddp_buckets, static_cast<int>(Phase::backward)))
    n += c.op == CollectiveOp::reduce_scatter;
  CHECK(n == 1);
  // A bucket as large as the layer: one fetch per layer, as FSDP.
  s.prefetch_bucket_elements = fetched;
  CHECK(dp_calls(zero3(1, s), static_cast<int>(Phase::forward)).size() == 4);
}

TEST_CASE("DeepSpeed without overlap_comm: backward waits for each reduce-scatter, so the step is longer") {
  Sharding s;
  s.framework = Sharding::Framework::deepspeed;
  s.reduce_bucket_elements = 1;  // one reduce-scatter per layer
  auto step = [&](bool overlap) {
    s.overlap_comm = overlap;
    return simulate_training(ctwin::test::tiny_llama(4), zero3(2, s), ctwin::test::h100_node8()).step_time_s;
  };
  CHECK(step(false) > step(true));
}

TEST_CASE("collective_overhead: each ZeRO-3 collective is preceded by one host task of that length on the DP stream") {
  Sharding s = fsdp1(Sharding::BackwardPrefetch::backward_pre);
  s.collective_overhead_s = 25e-6;
  const StepProgram p =
      build_training_step(ctwin::test::tiny_llama(4), zero3(1, s), ctwin::test::h100_node8(), TrainingOptions{});
  int host = 0, calls = 0;
  for (const auto& op : p.ops) {
    if (op.gpu != 0 || op.stream != StepStream::dp_comm) continue;
    if (op.call.valid()) {
      ++calls;
    } else {
      ++host;
      CHECK(op.duration == seconds(25e-6));
    }
  }
  // Forward 4 gathers; backward 4 gathers and 5 reduce-scatters (4 layers and the embedding).
  CHECK(calls == 13);
  CHECK(host == calls);
}

TEST_CASE("an all-gather of 1 KiB is latency-bound: its ring time grows by one network step per node added") {
  // LL ring, NCCL tuning.cc: base + (n - nodes) intra-node steps + (nodes - 1) network steps,
  // the intra-node step raised to the NIC's overhead across nodes.
  ClusterSpec s;
  s.gpu.name = "H100-SXM";
  s.gpu.bf16_tflops = 989;
  s.gpu.hbm_bytes = 80e9;
  s.gpu.hbm_gbyte_per_s = 3350;
  s.gpus_per_node = 8;
  s.intra_gbyte_per_s = 450;
  s.intra_latency_us = 0.6;
  s.inter_latency_us = 5.0;
  auto latency = [&](int nodes) {
    s.nodes = nodes;
    const Cluster c = build_cluster(s);
    CollectiveCall call;
    call.op = CollectiveOp::all_gather;
    for (int i = 0; i < nodes * 8; ++i) call.ranks.emplace_back(i);
    call.bytes = 1024;
    CollectiveOptions o;
    o.algo = CollectiveAlgo::ring;
    o.protocol = Protocol::ll;
    return plan_collective(c, call, o).latency_s;
  };
  const NcclModel nm;
  for (int nodes : {32, 64, 128}) {
    CAPTURE(nodes);
    const double n = 8.0 * nodes;
    const double intra = std::max(0.6, s.net_overhead_us);
    const double expect = (nm.base_ring_us[0] + (n - 1 - (nodes - 1)) * intra + (nodes - 1) * 5.0) * 1e-6;
    CHECK(latency(nodes) == rel_approx(expect, 1e-9));
  }
  // Doubling the ranks nearly doubles the latency: small gathers do not get cheaper with DP.
  CHECK(latency(128) / latency(64) > 1.9);
}
