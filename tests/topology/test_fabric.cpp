// The fabric's top tier in both fidelities: pods from the leaf radix, oversubscription charged to
// the traffic a collective's placement pushes across pods, warnings for keys with no effect.
#include <doctest/doctest.h>

#include <string>

#include "topology/collective_flow.hpp"

#include "flow_fixtures.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::call_on;
using ctwin::test::h100;
using ctwin::test::rel_approx;
using ctwin::test::run_flows;

namespace {

// GPU `local` of each of the first `nodes` nodes: a data-parallel group beside TP8.
CollectiveCall dp_group(CollectiveOp op, int nodes, double bytes) {
  CollectiveCall c;
  c.op = op;
  for (int i = 0; i < nodes; ++i) c.ranks.emplace_back(8 * i);
  c.bytes = bytes;
  return c;
}

CollectiveCall all_gpus(CollectiveOp op, int nodes, double bytes) { return call_on(op, 0, 8 * nodes, bytes); }

double flow_time(const ClusterSpec& spec, const CollectiveCall& call) { return run_flows(spec, {call})[0]; }

bool mentions(const std::vector<std::string>& w, const std::string& what) {
  for (const auto& s : w) {
    if (s.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("pods follow the leaf radix: NDR rail leaves hold 32 nodes at 1:1 and 42 at 2:1, fat_tree leaves 4") {
  ClusterSpec s = h100(64);
  CHECK(leaf_radix_of(s) == 64);  // Quantum-2 QM9700 for 400 Gb/s NICs
  CHECK(pod_nodes(s) == 32);      // 64 ports: 32 down, 32 up
  s.oversubscription = 2;
  CHECK(pod_nodes(s) == 42);  // floor(64 x 2/3)
  s.oversubscription = 1;
  s.fabric = InterNodeFabric::fat_tree;
  CHECK(pod_nodes(s) == 4);  // 32 down ports over a node's 8 NICs
  s.fabric = InterNodeFabric::rail_optimized;
  s.nic_gbyte_per_s = 25;  // HDR: Quantum QM8700, 40 ports
  CHECK(pod_nodes(s) == 20);
  s.nic_gbyte_per_s = 100;  // XDR: Quantum-X800, 144 ports
  CHECK(pod_nodes(s) == 72);
  s.leaf_radix = 48;
  CHECK(pod_nodes(s) == 24);
  s.nodes_per_pod = 5;
  CHECK(pod_nodes(s) == 5);
}

TEST_CASE("2:1 doubles an analytical ring's transfer when its pods hold fewer nodes than the ratio (closed form)") {
  // One node per pod: each ring edge between nodes leaves a rail leaf whose uplinks carry one NIC's
  // 48 GB/s over the ratio. An all-gather over 4 nodes moves 3/4 of the buffer per rank.
  ClusterSpec s = h100(4);
  s.nodes_per_pod = 1;
  s.spines = 1;  // one uplink per leaf: the single flow's path has the whole capacity, as the model assumes
  const double S = 1 << 30;
  const auto call = dp_group(CollectiveOp::all_gather, 4, S);
  const CollectivePlan one = plan_collective(build_cluster(s), call, {});
  CHECK(one.bandwidth_s == rel_approx(0.75 * S / 48e9, 1e-9));
  s.oversubscription = 2;
  const CollectivePlan two = plan_collective(build_cluster(s), call, {});
  CHECK(two.bandwidth_s == rel_approx(0.75 * S / 24e9, 1e-9));
  CHECK(flow_time(s, call) == rel_approx(two.latency_s + two.bandwidth_s, 1e-9));
}

TEST_CASE("a fat_tree leaf takes every channel of its nodes: 8 rings out of one node over 384/ratio GB/s") {
  ClusterSpec s = h100(4);
  s.fabric = InterNodeFabric::fat_tree;
  s.nodes_per_pod = 1;
  s.spines = 1;
  s.oversubscription = 4;
  const double S = 1 << 30;
  const auto call = all_gpus(CollectiveOp::all_gather, 4, S);
  const CollectivePlan p = plan_collective(build_cluster(s), call, {});
  // Ring bus factor 31/32 of the buffer, over a leaf uplink of 8 x 48 / 4 = 96 GB/s.
  CHECK(p.bandwidth_s == rel_approx(31.0 / 32 * S / 96e9, 1e-9));
  CHECK(flow_time(s, call) == rel_approx(p.latency_s + p.bandwidth_s, 1e-9));
}

TEST_CASE("a double binary tree charges the edges crossing pods, as the flows do") {
  ClusterSpec s = h100(8);
  s.nodes_per_pod = 1;
  s.spines = 1;
  s.oversubscription = 4;
  const auto call = dp_group(CollectiveOp::all_reduce, 8, 1 << 30);
  CollectiveOptions o;
  o.algo = CollectiveAlgo::tree;
  o.protocol = Protocol::simple;
  const CollectivePlan p = plan_collective(build_cluster(s), call, o);
  ClusterSpec flat = s;
  flat.oversubscription = 1;
  CHECK(p.bandwidth_s > 1.5 * plan_collective(build_cluster(flat), call, o).bandwidth_s);
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(s);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl, o);
  double done = -1;
  coll.start(call, [&] { done = e.now().seconds(); });
  e.run();
  CHECK(done == rel_approx(p.latency_s + p.bandwidth_s, 1e-9));
}

TEST_CASE("a 32-node fat_tree with default keys spans 8 leaves, so a data-parallel ring crosses spines") {
  ClusterSpec s = h100(32);
  s.fabric = InterNodeFabric::fat_tree;
  CHECK(pod_nodes(s) < s.nodes);
  CHECK(fabric_warnings(s).empty());
  s.oversubscription = 2;
  CHECK(fabric_warnings(s).empty());
}

TEST_CASE("single_switch and rail_optimized agree on an idle cluster in both fidelities") {
  ClusterSpec rail = h100(4), one = h100(4);
  one.fabric = InterNodeFabric::single_switch;
  for (const auto& call :
       {all_gpus(CollectiveOp::all_gather, 4, 1 << 28), dp_group(CollectiveOp::all_gather, 4, 1 << 28),
        all_gpus(CollectiveOp::all_to_all, 4, 1 << 28)}) {
    const auto a = estimate_collective(build_cluster(rail), call).time.seconds();
    CHECK(estimate_collective(build_cluster(one), call).time.seconds() == rel_approx(a, 1e-9));
    CHECK(flow_time(one, call) == rel_approx(flow_time(rail, call), 1e-9));
  }
}

TEST_CASE("fabric keys that cannot change a result warn, saying why") {
  ClusterSpec s = h100(32);
  CHECK(fabric_warnings(s).empty());
  s.spines = 8;  // 32 NDR nodes fill one pod of 32 exactly
  CHECK(mentions(fabric_warnings(s), "/cluster/spines: no effect: all 32 nodes fit in one pod of 32"));
  s.spines = 4;
  s.oversubscription = 2;  // 32 nodes fit one pod of 42 rail-leaf nodes
  CHECK(mentions(fabric_warnings(s), "/cluster/oversubscription: no effect: all 32 nodes fit in one pod of 42"));
  s.nodes = 64;
  CHECK(fabric_warnings(s).empty());
  s.fabric = InterNodeFabric::single_switch;
  CHECK(mentions(fabric_warnings(s), "/cluster/oversubscription: no effect with fabric single_switch"));
  s = h100(64);
  s.core_switches = 8;
  CHECK(mentions(fabric_warnings(s), "/cluster/core_switches: no effect outside fabric fat_tree3"));
  s.fabric = InterNodeFabric::fat_tree3;
  CHECK(fabric_warnings(s).empty());
  s = h100(1);
  s.sharp = true;
  CHECK(mentions(fabric_warnings(s), "/cluster/sharp: no effect on one node"));
}

TEST_CASE("eight data-parallel rings sharing a fat_tree leaf: groups = 8 gives the concurrent flows' time") {
  // One node per leaf, leaf uplink 8 x 48 / 4 = 96 GB/s; the 8 rings (GPU j of every node) each
  // send one 48 GB/s flow out of every node: together 4x the uplink, so each gets 12 GB/s.
  ClusterSpec s = h100(4);
  s.fabric = InterNodeFabric::fat_tree;
  s.nodes_per_pod = 1;
  s.spines = 1;
  s.oversubscription = 4;
  const double S = 1 << 28;
  std::vector<CollectiveCall> calls;
  for (int j = 0; j < 8; ++j) {
    CollectiveCall c = dp_group(CollectiveOp::all_gather, 4, S);
    for (auto& g : c.ranks) g = GpuId(g.value + static_cast<std::uint32_t>(j));
    calls.push_back(c);
  }
  CollectiveCall spmd = calls[0];
  spmd.groups = 8;
  const CollectivePlan p = plan_collective(build_cluster(s), spmd, {});
  CHECK(p.bandwidth_s == rel_approx(0.75 * S / 12e9, 1e-9));
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(s);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl);
  std::vector<double> done(calls.size(), -1);
  for (std::size_t i = 0; i < calls.size(); ++i) coll.start(calls[i], [&done, &e, i] { done[i] = e.now().seconds(); });
  e.run();
  for (double d : done) CHECK(d == rel_approx(p.latency_s + p.bandwidth_s, 1e-9));
  // The training step's runner assumes SPMD: a call over one GPU per node runs as 8 groups.
  Engine e2;
  CollectiveRunner runner(e2, cl, Fidelity::analytical);
  double end = -1;
  runner.start(calls[0], [&] { end = e2.now().seconds(); });
  e2.run();
  CHECK(end == rel_approx(p.latency_s + p.bandwidth_s, 1e-9));
}

TEST_CASE("docs/network.md's fabric table: both fidelities agree on idle 2- and 4-node fabrics at 1:1, 2:1 and 4:1") {
  for (int nodes : {2, 4}) {
    for (auto fabric : {InterNodeFabric::single_switch, InterNodeFabric::rail_optimized, InterNodeFabric::fat_tree,
                        InterNodeFabric::fat_tree3}) {
      for (double ratio : {1.0, 2.0, 4.0}) {
        for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::all_to_all}) {
          ClusterSpec s = h100(nodes);
          s.fabric = fabric;
          s.oversubscription = ratio;
          const auto call = all_gpus(op, nodes, 1 << 30);
          CAPTURE(nodes);
          CAPTURE(to_string(fabric));
          CAPTURE(ratio);
          CAPTURE(to_string(op));
          const double a = estimate_collective(build_cluster(s), call).time.seconds();
          CHECK(flow_time(s, call) == rel_approx(a, 1e-6));
        }
      }
    }
  }
}

TEST_CASE("a 32-node fat_tree at 2:1: the flows' ECMP paths collide on spine links, 1.38x the analytical time") {
  // Leaves of 5 nodes (computed pods at 2:1); the analytical model spreads a leaf's
  // 8 crossing ring flows evenly over its 4 spine links, each flow pinned to one ECMP path does not.
  ClusterSpec s = h100(32);
  s.fabric = InterNodeFabric::fat_tree;
  s.oversubscription = 2;
  const auto call = all_gpus(CollectiveOp::all_gather, 32, 1 << 30);
  const double a = estimate_collective(build_cluster(s), call).time.seconds();
  const double f = flow_time(s, call);
  CHECK(f > 1.2 * a);
  CHECK(f < 1.5 * a);
  s.spines = 1;  // one uplink per leaf: nothing to collide on, the fidelities agree
  CHECK(flow_time(s, call) == rel_approx(estimate_collective(build_cluster(s), call).time.seconds(), 1e-6));
}
