#include <doctest/doctest.h>

#include "topology/collective_flow.hpp"

using namespace ctwin;

namespace {

ClusterSpec h100(int nodes) {
  ClusterSpec s;
  s.name = "dgx-h100";
  s.gpu.name = "H100-SXM";
  s.gpu.pcie_gbps = 64;
  s.nodes = nodes;
  s.gpus_per_node = 8;
  s.intra_gbps = 450;
  s.intra_latency_us = 0.6;
  s.nic_gbps = 50;
  s.inter_latency_us = 3.0;
  return s;
}

CollectiveCall call_on(CollectiveOp op, int first, int count, double bytes) {
  CollectiveCall c;
  c.op = op;
  for (int i = 0; i < count; ++i) c.ranks.emplace_back(first + i);
  c.bytes = bytes;
  return c;
}

// Runs the calls concurrently at flow fidelity; returns each one's completion time.
std::vector<double> run_flows(const ClusterSpec& spec, const std::vector<CollectiveCall>& calls) {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(spec);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl);
  std::vector<double> done(calls.size(), -1);
  for (std::size_t i = 0; i < calls.size(); ++i) coll.start(calls[i], [&done, &e, i] { done[i] = e.now().seconds(); });
  e.run();
  return done;
}

}  // namespace

TEST_CASE("routes follow the fabric: NVSwitch inside a node, the rail leaf across nodes, spines across pods") {
  Engine e;
  FlowNetwork net(e);
  ClusterSpec s = h100(4);
  s.nodes_per_pod = 2;
  const Cluster cl = build_cluster(s);
  ClusterNetwork r(cl, net);
  CHECK(r.route(GpuId(0), GpuId(5)).size() == 2);                       // gpu -> NVSwitch -> gpu
  CHECK(r.route(GpuId(3), GpuId(11)).size() == 4);                      // gpu -> NIC -> rail-3 leaf -> NIC -> gpu
  CHECK(r.route(GpuId(3), GpuId(27)).size() == 6);                      // ... leaf -> spine -> leaf ... (other pod)
  CHECK(r.route_rail(GpuId(2), GpuId(11)).size() == 6);                 // NVLink to GPU 3, then rail 3
  CHECK(r.route(GpuId(3), GpuId(27)) == r.route(GpuId(3), GpuId(27)));  // deterministic ECMP
}

TEST_CASE("flow and analytical fidelity agree within 2% on an uncongested cluster") {
  struct Case {
    CollectiveOp op;
    int nodes;
    double bytes;
  };
  for (const Case& k : {Case{CollectiveOp::all_reduce, 1, 1 << 30}, Case{CollectiveOp::all_reduce, 2, 1 << 30},
                        Case{CollectiveOp::all_gather, 4, 1 << 28}, Case{CollectiveOp::reduce_scatter, 2, 1 << 28},
                        Case{CollectiveOp::all_reduce, 4, 64 << 20}}) {
    CAPTURE(to_string(k.op));
    CAPTURE(k.nodes);
    const ClusterSpec s = h100(k.nodes);
    const auto call = call_on(k.op, 0, 8 * k.nodes, k.bytes);
    const double analytic = estimate_collective(build_cluster(s), call).time.seconds();
    const double flow = run_flows(s, {call})[0];
    CHECK(flow == doctest::Approx(analytic).epsilon(0.02));
  }
}

TEST_CASE("two all-reduces on the same GPUs share every link: each takes twice the bandwidth time") {
  const ClusterSpec s = h100(1);
  const double bytes = 1 << 30;
  const auto one = call_on(CollectiveOp::all_reduce, 0, 8, bytes);
  // NCCL's ring Simple latency: base 8.4 us plus 14 steps of an NVLink hop (0.6 + 2.8 us).
  const double lat = (8.4 + 2 * 7 * (0.6 + 2.8)) * 1e-6, bw_time = 2.0 * 7 / 8 * bytes / 450e9;
  const auto alone = run_flows(s, {one});
  const auto both = run_flows(s, {one, one});
  CHECK(alone[0] == doctest::Approx(lat + bw_time).epsilon(1e-6));
  CHECK(both[0] == doctest::Approx(lat + 2 * bw_time).epsilon(1e-6));
  CHECK(both[1] == doctest::Approx(lat + 2 * bw_time).epsilon(1e-6));
}

TEST_CASE("an all-reduce confined to one node is not slowed by another node's traffic") {
  const ClusterSpec s = h100(2);
  const auto a = call_on(CollectiveOp::all_reduce, 0, 8, 1 << 28);
  const auto b = call_on(CollectiveOp::all_reduce, 8, 8, 1 << 28);
  const auto r = run_flows(s, {a, b});
  const auto alone = run_flows(s, {a});
  CHECK(r[0] == doctest::Approx(alone[0]).epsilon(1e-9));
}

TEST_CASE("an all-to-all across pods slows by the oversubscription ratio") {
  // One node per pod: every byte between nodes crosses the spines. Leaf uplinks carry
  // 1 node x 50 GB/s / ratio, so at 2:1 the all-to-all's inter-node part takes twice as long.
  ClusterSpec s = h100(4);
  s.nodes_per_pod = 1;
  const auto call = call_on(CollectiveOp::all_to_all, 0, 32, 1 << 30);
  const double full = run_flows(s, {call})[0];
  s.oversubscription = 2;
  const double half = run_flows(s, {call})[0];
  CHECK(half / full == doctest::Approx(2.0).epsilon(0.05));
}
