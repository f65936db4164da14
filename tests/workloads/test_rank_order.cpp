// The rank order (/training/parallelism/order, innermost first) places expert-parallel groups:
// EP is carved from DP ranks, a DP rank d being (d / ep, d % ep) with d % ep placed where "ep"
// stands. On two 8-GPU nodes with tp 4, dp 4, ep 2: "tp-cp-ep-dp-pp" gives EP stride 4 (GPUs 0
// and 4, one node); "tp-cp-dp-ep-pp" gives EP stride 8 (GPUs 0 and 8, two nodes), so each
// all-to-all crosses the NICs instead of NVLink.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"

#include <vector>

#include "topology/collective.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;

namespace {

ModelSpec tiny_moe() {
  ModelSpec m = ctwin::test::tiny_llama(2);
  m.hidden = 4096;  // a wide model: all-to-alls of 128 MiB, bandwidth-bound (at 32 MiB an in-node
                    // one pays about half again for p2p's ramp: a hop a 512 KiB step, one step of fill)
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 2048;
  m.max_seq = 8192;
  m.moe = MoeSpec{8, 2, 0, 1024, 0, 1.0};
  return m;
}

Cluster two_nodes() {
  ClusterSpec s = ctwin::test::h100_node8().spec;
  s.nodes = 2;
  s.nic_gbyte_per_s = 50;
  return build_cluster(s);
}

TrainingConfig moe_layout(const std::string& order) {
  TrainingConfig c;
  c.parallel.tp = 4;
  c.parallel.dp = 4;
  c.parallel.ep = 2;
  c.parallel.order = order;
  c.micro_batch = 1;
  c.global_batch = 4;
  c.seq_len = 8192;
  return c;
}

// The GPU sets of the step's all-to-alls.
std::vector<std::vector<GpuId>> all_to_all_groups(const StepProgram& p) {
  std::vector<std::vector<GpuId>> out;
  for (const auto& call : p.calls) {
    if (call.op == CollectiveOp::all_to_all) out.push_back(p.groups[call.group]);
  }
  return out;
}

}  // namespace

TEST_CASE("rank order: ep's place sets which GPUs an all-to-all spans, and its time") {
  const Cluster cl = two_nodes();
  TrainingOptions unfolded;
  unfolded.fold = false;
  const auto inner = build_training_step(tiny_moe(), moe_layout("tp-cp-ep-dp-pp"), cl, unfolded);
  const auto outer = build_training_step(tiny_moe(), moe_layout("tp-cp-dp-ep-pp"), cl, unfolded);
  const auto gi = all_to_all_groups(inner), go = all_to_all_groups(outer);
  REQUIRE_FALSE(gi.empty());
  REQUIRE_FALSE(go.empty());
  CHECK(gi.front() == std::vector<GpuId>{GpuId(0), GpuId(4)});
  CHECK(go.front() == std::vector<GpuId>{GpuId(0), GpuId(8)});
  for (const auto& g : gi) CHECK(g[0].value / 8 == g[1].value / 8);  // inside a node
  for (const auto& g : go) CHECK(g[0].value / 8 != g[1].value / 8);  // across nodes
  // An order without "ep" keeps EP just inside DP (the default's placement).
  const auto none = build_training_step(tiny_moe(), moe_layout("tp-cp-dp-pp"), cl, unfolded);
  CHECK(all_to_all_groups(none) == gi);
  // The exposed EP time: bandwidth-bound all-to-alls run about NVLink / NIC = 450 / 50 = 9 times
  // faster in the node (less, for latencies and NCCL's efficiencies on each path).
  const auto ri = simulate_training(tiny_moe(), moe_layout("tp-cp-ep-dp-pp"), cl, {});
  const auto ro = simulate_training(tiny_moe(), moe_layout("tp-cp-dp-ep-pp"), cl, {});
  INFO("exposed EP: in-node " << ri.breakdown.exposed_ep_s << " s, across nodes " << ro.breakdown.exposed_ep_s
                              << " s, ratio " << ro.breakdown.exposed_ep_s / ri.breakdown.exposed_ep_s
                              << "; ring bandwidth " << ring_bandwidth_gbps(cl, gi.front()) << " vs "
                              << ring_bandwidth_gbps(cl, go.front()) << " GB/s");
  // Within [0.6, 1.05] of the two paths' bandwidth ratio (7.5 against 450 / 48 here).
  const double bw_ratio = ring_bandwidth_gbps(cl, gi.front()) / ring_bandwidth_gbps(cl, go.front());
  const double ratio = ro.breakdown.exposed_ep_s / ri.breakdown.exposed_ep_s;
  CHECK(ratio > 0.6 * bw_ratio);
  CHECK(ratio < 1.05 * bw_ratio);
  CHECK(ro.step_time_s > ri.step_time_s);
}
