#include <doctest/doctest.h>

#include <string>

#include "topology/collective_flow.hpp"

#include "flow_fixtures.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::abs_approx;
using ctwin::test::call_on;
using ctwin::test::h100;
using ctwin::test::rel_approx;
using ctwin::test::run_flows;

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

// Both fidelities run the same plan (latency, protocol efficiency, channels, rates); on an idle
// cluster max-min gives every flow the analytical bottleneck's rate, so the two agree to the
// clock: the flow adds its latency and its transfer, each rounded to a whole picosecond.
TEST_CASE("flow and analytical fidelity agree to the picosecond on an uncongested cluster") {
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
    CHECK(flow == abs_approx(analytic, 2e-12));  // seconds
  }
}

TEST_CASE("two all-reduces on the same GPUs share every link: each takes twice the bandwidth time") {
  const ClusterSpec s = h100(1);
  const double bytes = 1 << 30;
  const auto one = call_on(CollectiveOp::all_reduce, 0, 8, bytes);
  // NCCL's ring Simple latency: base 8.4 us plus 14 steps, each 6 slices (1 GiB / 8 / 24 channels
  // = 5.59 MB a step, 3 chunks of 2 MiB, 2 slices each) of an NVLink hop (0.6 + 2.8 us).
  const double lat = (8.4 + 6 * 2 * 7 * (0.6 + 2.8)) * 1e-6, bw_time = 2.0 * 7 / 8 * bytes / 450e9;
  const auto alone = run_flows(s, {one});
  const auto both = run_flows(s, {one, one});
  CHECK(alone[0] == rel_approx(lat + bw_time, 1e-6));
  CHECK(both[0] == rel_approx(lat + 2 * bw_time, 1e-6));
  CHECK(both[1] == rel_approx(lat + 2 * bw_time, 1e-6));
}

TEST_CASE("an all-reduce confined to one node is not slowed by another node's traffic") {
  const ClusterSpec s = h100(2);
  const auto a = call_on(CollectiveOp::all_reduce, 0, 8, 1 << 28);
  const auto b = call_on(CollectiveOp::all_reduce, 8, 8, 1 << 28);
  const auto r = run_flows(s, {a, b});
  const auto alone = run_flows(s, {a});
  CHECK(r[0] == rel_approx(alone[0], 1e-9));
}

TEST_CASE("an all-to-all across pods takes the oversubscription ratio times as long to transfer") {
  // One node per pod: every byte between nodes crosses the spines. Leaf uplinks carry
  // 1 node x 50 GB/s / ratio, so at 2:1 the all-to-all's inter-node part takes twice as long.
  ClusterSpec s = h100(4);
  s.nodes_per_pod = 1;
  const auto call = call_on(CollectiveOp::all_to_all, 0, 32, 1 << 30);
  const double full = run_flows(s, {call})[0];
  s.oversubscription = 2;
  const double half = run_flows(s, {call})[0];
  // The bottleneck (the spine links) halves while the latency stays: the transfer time doubles.
  const double lat = plan_collective(build_cluster(s), call, CollectiveOptions{}).latency_s;
  CHECK(half - lat == rel_approx(2 * (full - lat), 1e-6));
}

namespace {

double flow_time(const ClusterSpec& spec, const CollectiveCall& call, CollectiveOptions o) {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(spec);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl, o);
  double done = -1;
  coll.start(call, [&] { done = e.now().seconds(); });
  e.run();
  return done;
}

ClusterSpec l40s(int nodes) {
  ClusterSpec s;
  s.name = "l40s-pcie";
  s.gpu.pcie_gbyte_per_s = 32;
  s.nodes = nodes;
  s.intra = IntraNodeFabric::pcie;
  s.intra_gbyte_per_s = 32;
  s.intra_latency_us = 1.0;
  s.intra_efficiency = 0.75;
  s.inter_socket_gbyte_per_s = 22;
  s.nic_gbyte_per_s = 25;
  s.nics_per_node = 4;
  s.inter_latency_us = 2.7;
  return s;
}

}  // namespace

TEST_CASE(
    "flow and analytical fidelity agree to the picosecond for tree, CollNet, all-to-all, PCIe nodes and fabrics") {
  struct Case {
    const char* what;
    ClusterSpec spec;
    CollectiveOp op;
    CollectiveAlgo algo;
  };
  ClusterSpec sharp = h100(4);
  sharp.sharp = true;
  ClusterSpec shared = h100(2);
  shared.nics_per_node = 4;
  ClusterSpec single = h100(4);
  single.fabric = InterNodeFabric::single_switch;
  // Two pods of 4 nodes, so every path a ring flow can take carries a whole NIC's rate: leaf
  // uplinks 4 x 48 / 4 spines = 48 GB/s, one core taking each spine's 384 GB/s. (With narrower
  // uplinks a flow pinned to one ECMP path runs slower than the analytical model says: see the
  // next test and docs/network.md.)
  ClusterSpec three = h100(8);
  three.fabric = InterNodeFabric::fat_tree3;
  three.nodes_per_pod = 4;
  three.core_switches = 1;
  // NVLS-capable nodes (H100's measured NVLS share, 275 of 450 GB/s) for NVLSTree.
  ClusterSpec nvls2 = h100(2), nvls4 = h100(4);
  nvls2.nvls_efficiency = nvls4.nvls_efficiency = 275.0 / 450;
  // NVLink 4, as H100's: NVLS runs its 16 channels (nccl_model.cpp), so NVLS's loops in a node take
  // about the measured rate and the 4-node trees over the NICs bind.
  nvls2.gpu.nvlink_gen = nvls4.gpu.nvlink_gen = 4;
  const Case cases[] = {
      {"nvlstree, 2 nodes", nvls2, CollectiveOp::all_reduce, CollectiveAlgo::nvls_tree},
      {"nvlstree, 4 nodes", nvls4, CollectiveOp::all_reduce, CollectiveAlgo::nvls_tree},
      {"tree, 2 nodes", h100(2), CollectiveOp::all_reduce, CollectiveAlgo::tree},
      {"tree, 4 nodes", h100(4), CollectiveOp::all_reduce, CollectiveAlgo::tree},
      {"tree, 5 nodes", h100(5), CollectiveOp::all_reduce, CollectiveAlgo::tree},
      {"collnet, 4 nodes", sharp, CollectiveOp::all_reduce, CollectiveAlgo::collnet},
      {"all-to-all, 1 node", h100(1), CollectiveOp::all_to_all, CollectiveAlgo::automatic},
      {"all-to-all, 4 nodes", h100(4), CollectiveOp::all_to_all, CollectiveAlgo::automatic},
      {"ring, shared NICs", shared, CollectiveOp::all_reduce, CollectiveAlgo::ring},
      {"ring, single switch", single, CollectiveOp::all_gather, CollectiveAlgo::ring},
      {"ring, three-tier fat-tree", three, CollectiveOp::all_reduce, CollectiveAlgo::ring},
      {"ring, PCIe node", l40s(1), CollectiveOp::all_reduce, CollectiveAlgo::ring},
      {"broadcast, PCIe node", l40s(1), CollectiveOp::broadcast, CollectiveAlgo::ring},
      {"all-to-all, PCIe node", l40s(1), CollectiveOp::all_to_all, CollectiveAlgo::automatic},
  };
  for (const Case& k : cases) {
    const std::string what = k.what;  // a string, so a failure names the case
    CAPTURE(what);
    const auto call = call_on(k.op, 0, k.spec.nodes * k.spec.gpus_per_node, 1 << 30);
    CollectiveOptions o;
    o.algo = k.algo;
    o.protocol = Protocol::simple;
    const double analytic = estimate_collective(build_cluster(k.spec), call, o).time.seconds();
    CHECK(flow_time(k.spec, call, o) == abs_approx(analytic, 2e-12));  // seconds, as above
  }
}

TEST_CASE("a ring flow pinned to one ECMP path runs at that path's rate where a leaf uplink is narrower than a NIC") {
  // Four pods of 2 nodes over 4 spines: each rail leaf's uplinks are 2 x 48 / 4 = 24 GB/s. A ring
  // channel crossing pods is one flow on one spine (deterministic ECMP, one path per connection),
  // so it moves at 24 GB/s, not its NIC's 48: twice the analytical bandwidth time, which assumes
  // the fabric spreads traffic evenly. Only channel c uses rail c's leaf, and one core takes 4 x 48
  // GB/s per spine, so nothing else slows it. NCCL over a real fabric sees the same unless adaptive
  // routing spreads a connection's packets (not modelled).
  ClusterSpec s = h100(8);
  s.fabric = InterNodeFabric::fat_tree3;
  s.nodes_per_pod = 2;
  s.core_switches = 1;
  const auto call = call_on(CollectiveOp::all_reduce, 0, 64, 1 << 30);
  CollectiveOptions o;
  o.algo = CollectiveAlgo::ring;
  o.protocol = Protocol::simple;
  const CollectivePlan plan = plan_collective(build_cluster(s), call, o);
  CHECK(flow_time(s, call, o) - plan.latency_s == rel_approx(2 * plan.bandwidth_s, 1e-6));
}

TEST_CASE("two data-parallel all-reduces through one shared NIC each get half of it") {
  // 4 NICs for 8 GPUs: GPUs 0 and 1 share NIC 0. All-reduces {0, 8} and {1, 9} each send the
  // whole buffer through it both ways; max-min gives each 48/2 GB/s, so each takes twice as long.
  ClusterSpec s = h100(2);
  s.nics_per_node = 4;
  const double S = 1 << 30;
  CollectiveCall a, b;
  a.ranks = {GpuId(0), GpuId(8)};
  b.ranks = {GpuId(1), GpuId(9)};
  a.bytes = b.bytes = S;
  const double lat = estimate_collective(build_cluster(s), a).time.seconds() - S / 48e9;
  const auto alone = run_flows(s, {a});
  const auto both = run_flows(s, {a, b});
  CHECK(alone[0] == rel_approx(lat + S / 48e9, 1e-6));
  CHECK(both[0] == rel_approx(lat + 2 * S / 48e9, 1e-6));
  CHECK(both[1] == rel_approx(lat + 2 * S / 48e9, 1e-6));
}

TEST_CASE("a TP all-reduce inside a node slows a DP all-reduce sharing its GPUs' NVLink ports by max-min") {
  // DP ring over GPUs 0..7 of nodes 0 and 1 (16 ranks) and a TP all-reduce over node 0's GPUs,
  // 8 channels each. Per channel every node-0 GPU sends one flow of each ring through its
  // NVSwitch port and receives one (the DP ring's hop to node 1 goes over NVLink to the GPU owning
  // the rail's NIC), so each 450 GB/s port carries 8 TP and 8 DP flows each way.
  const ClusterSpec s = h100(2);
  const double S = 1 << 30;
  const auto dp = call_on(CollectiveOp::all_reduce, 0, 16, S);
  const auto tp = call_on(CollectiveOp::all_reduce, 0, 8, S);
  CollectiveOptions ring;
  ring.algo = CollectiveAlgo::ring;
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(s);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl, ring);
  double t_dp = 0, t_tp = 0;
  coll.start(dp, [&] { t_dp = e.now().seconds(); });
  coll.start(tp, [&] { t_tp = e.now().seconds(); });
  e.run();
  // Max-min by hand. Each flow starts after its call's latency (TP's is shorter). Until DP's
  // start the TP flows have a port's 450/8 GB/s; then all 16 get 450/16 each, until TP's flows
  // (2 x 7/8 of S / 8 channels) are done; DP's flows (2 x 15/16 of S / 8) then finish at the
  // 48 GB/s of the NIC (50 GB/s at 0.96) that the slowest of them, the ones to node 1, cross.
  const double lat_dp = plan_collective(cl, dp, ring).latency_s, lat_tp = plan_collective(cl, tp, ring).latency_s;
  const double b_tp = 2.0 * 7 / 8 * S / 8, b_dp = 2.0 * 15 / 16 * S / 8;
  REQUIRE(lat_dp > lat_tp);
  const double rem_tp = b_tp - (lat_dp - lat_tp) * 450e9 / 8;  // TP bytes left when DP starts
  const double tp_end = lat_dp + rem_tp / (450e9 / 16);
  CHECK(t_tp == rel_approx(tp_end, 1e-6));
  CHECK(t_dp == rel_approx(tp_end + (b_dp - rem_tp) / 48e9, 1e-6));
}

TEST_CASE("two jobs on one oversubscribed fat-tree share the spine link into a leaf equally") {
  // A plain fat-tree, one node per leaf, one spine, 8:1: each leaf's uplink carries 8 x 48 / 8
  // = 48 GB/s. Job A sends node 0 -> node 2, job B node 1 -> node 2: both cross spine -> leaf 2.
  ClusterSpec s = h100(3);
  s.fabric = InterNodeFabric::fat_tree;
  s.nodes_per_pod = 1;
  s.spines = 1;
  s.oversubscription = 8;
  const double S = 1 << 30;
  CollectiveCall a, b;
  a.op = b.op = CollectiveOp::send_recv;
  a.ranks = {GpuId(0), GpuId(16)};
  b.ranks = {GpuId(8), GpuId(17)};
  a.bytes = b.bytes = S;
  const auto alone = run_flows(s, {a});
  const auto both = run_flows(s, {a, b});
  const double lat = alone[0] - S / 48e9;
  CHECK(lat >= 0);
  CHECK(both[0] == rel_approx(lat + 2 * S / 48e9, 1e-6));
  CHECK(both[1] == rel_approx(lat + 2 * S / 48e9, 1e-6));
}

TEST_CASE("CollectiveRunner: analytical mode ends at estimate_collective's time; flow mode shares links") {
  const ClusterSpec s = h100(1);
  const Cluster cl = build_cluster(s);
  const auto call = call_on(CollectiveOp::all_reduce, 0, 8, 1 << 28);
  {
    Engine e;
    CollectiveRunner r(e, cl, Fidelity::analytical);
    Time done{};
    r.start(call, [&] { done = e.now(); });
    e.run();
    CHECK(done == estimate_collective(cl, call).time);
  }
  {
    Engine e;
    CollectiveOptions ring;
    ring.algo = CollectiveAlgo::ring;
    CollectiveRunner r(e, cl, Fidelity::flow, ring);
    double t[2] = {0, 0};
    r.start(call, [&] { t[0] = e.now().seconds(); });
    r.start(call, [&] { t[1] = e.now().seconds(); });
    e.run();
    const auto est = estimate_collective(cl, call, ring);
    const double lat = est.time.seconds() - 1.75 * (1 << 28) / 450e9;
    CHECK(t[0] == rel_approx(lat + 2 * 1.75 * (1 << 28) / 450e9, 1e-6));
    CHECK(t[1] == rel_approx(t[0], 1e-9));
  }
}

TEST_CASE("on the ramp the fidelities still agree: fewer channels and LL's ceiling as per-flow rate bounds") {
  // Sizes where NCCL runs fewer than its 24 channels (LL below 24 x 32 KiB, LL128 below
  // 24 x 5 KiB) or the ring moves several slices a step; each protocol forced once and the tuner
  // once. The flow fidelity bounds every channel's flow at the plan's rate / channels, so an idle
  // node gives the analytical time to the clock.
  const ClusterSpec s = h100(1);
  for (const Protocol p : {Protocol::automatic, Protocol::ll, Protocol::ll128, Protocol::simple}) {
    for (const CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter}) {
      for (const double bytes : {4096.0, 65536.0, 262144.0, 4.0 * (1 << 20), 64.0 * (1 << 20)}) {
        CAPTURE(to_string(p));
        CAPTURE(to_string(op));
        CAPTURE(bytes);
        CollectiveOptions o;
        o.algo = CollectiveAlgo::ring;
        o.protocol = p;
        const auto call = call_on(op, 0, 8, bytes);
        const double analytic = estimate_collective(build_cluster(s), call, o).time.seconds();
        const double flow = run_flows(s, {call}, o)[0];
        CHECK(flow == abs_approx(analytic, 2e-12));  // seconds
      }
    }
  }
}

TEST_CASE("a channel-bounded small all-gather leaves the rest of the NVLink port to a concurrent large one") {
  // 64 KiB all-gather at LL runs on 2 of 24 channels (64 KiB < 3 x 32 KiB): its flows are bounded
  // at 2/24 of LL's rate, far below the port. A 1 GiB all-gather started with it on the same GPUs
  // takes the rest of every port: it ends no later than 1% after it would alone.
  const ClusterSpec s = h100(1);
  CollectiveOptions ll;
  ll.algo = CollectiveAlgo::ring;
  ll.protocol = Protocol::ll;
  const auto small = call_on(CollectiveOp::all_gather, 0, 8, 65536);
  const auto big = call_on(CollectiveOp::all_gather, 0, 8, 1 << 30);
  const double big_alone = run_flows(s, {big}, ll)[0];
  const auto both = run_flows(s, {small, big}, ll);
  CHECK(both[1] <= big_alone * 1.01);
  // The small one keeps its own, channel-bounded time.
  CHECK(both[0] == rel_approx(estimate_collective(build_cluster(s), small, ll).time.seconds(), 0.01));
}

TEST_CASE("on p2p's ramp the fidelities still agree: its steps and fill are latency; NVLS at every size") {
  // p2p: a part's steps past the first and the pipeline's fill are latency; the flows move the
  // bytes at the port's rate. NVLS: one flow per GPU through the switch at the measured rate.
  ClusterSpec s = h100(1);
  s.gpu.nvlink_gen = 4;  // Hopper
  s.nvls_efficiency = 275.0 / 450;
  for (const double bytes : {1.0 * (1 << 20), 16.0 * (1 << 20), 64.0 * (1 << 20), 256.0 * (1 << 20), 2.0 * (1 << 30)}) {
    CAPTURE(bytes);
    CollectiveOptions o;
    o.algo = CollectiveAlgo::nvls;
    const auto ar = call_on(CollectiveOp::all_reduce, 0, 8, bytes);
    CHECK(run_flows(s, {ar}, o)[0] == abs_approx(estimate_collective(build_cluster(s), ar, o).time.seconds(), 2e-12));
    const auto a2a = call_on(CollectiveOp::all_to_all, 0, 8, bytes);
    const CollectivePlan plan = plan_collective(build_cluster(s), a2a);
    CHECK(run_flows(s, {a2a})[0] == abs_approx(plan.latency_s + plan.bandwidth_s, 2e-12));
    CHECK(plan.bandwidth_s == rel_approx(7.0 / 8 * bytes / 450e9, 1e-9));  // the port, at every size
  }
}
