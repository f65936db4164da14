#include <doctest/doctest.h>

#include "topology/link_load.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {
// Two nodes of 8 GPUs on an NVSwitch (450 GB/s ports), 8 NICs of 50 GB/s on one switch.
ClusterSpec two_nodes() {
  ClusterSpec s;
  s.gpu.pcie_gbyte_per_s = 64;
  s.nodes = 2;
  s.intra = IntraNodeFabric::nvswitch;
  s.intra_gbyte_per_s = 450;
  s.intra_efficiency = 1.0;
  s.nics_per_node = 8;
  s.nic_gbyte_per_s = 50;
  s.nic_efficiency = 1.0;
  s.fabric = InterNodeFabric::single_switch;
  return s;
}
}  // namespace

TEST_CASE("link names: a GPU's NVSwitch port, its NIC's PCIe link, the NIC's switch port") {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(two_nodes());
  ClusterNetwork r(cl, net);
  // GPU 3 of node 0 to GPU 3 of node 1 through rail 3: gpu -> nic -> switch -> nic -> gpu.
  const auto path = r.route_rail(GpuId(3), GpuId(11));
  REQUIRE(path.size() == 4);
  CHECK(r.link_name(path[0]) == "node0.gpu3 -> node0.nic3");
  CHECK(r.link_name(path[1]) == "node0.nic3 -> switch");
  CHECK(r.link_name(path[2]) == "switch -> node1.nic3");
  CHECK(r.link_name(path[3]) == "node1.nic3 -> node1.gpu3");
  const auto inside = r.route(GpuId(0), GpuId(5));
  REQUIRE(inside.size() == 2);
  CHECK(r.link_name(inside[0]) == "node0.gpu0 -> node0.nvswitch");
  CHECK(r.link_name(inside[1]) == "node0.nvswitch -> node0.gpu5");
}

TEST_CASE("busiest links: bytes over capacity over the run, highest first, idle links left out") {
  // 10 GB across nodes on rail 3 and 45 GB inside node 1 over one run of 1 s: the NIC links
  // (50 GB/s) are busy 10/50 = 20%, the PCIe hops (64 GB/s) 15.6%, the NVSwitch ports (450 GB/s)
  // 45/450 = 10%. Each link is alone in its class here.
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(two_nodes());
  ClusterNetwork r(cl, net);
  net.start(r.route_rail(GpuId(3), GpuId(11)), 10e9, [] {});
  net.start(r.route(GpuId(8), GpuId(9)), 45e9, [] {});
  e.run();
  const auto top = busiest_links(net, r, 1.0, 100);
  REQUIRE(top.size() == 6);
  CHECK(top[0].name == "node0.nic3 -> switch");  // ties by name: node0's before switch's
  CHECK(top[1].name == "switch -> node1.nic3");
  CHECK(top[0].busy_fraction == rel_approx(0.2, 1e-12));
  CHECK(top[1].busy_fraction == rel_approx(0.2, 1e-12));
  CHECK(top[0].capacity_gbyte_per_s == rel_approx(50, 1e-12));
  CHECK(top[0].bytes == rel_approx(10e9, 1e-12));
  CHECK(top[0].links == 1);
  CHECK(top[2].busy_fraction == rel_approx(10.0 / 64, 1e-12));
  CHECK(top[3].busy_fraction == rel_approx(10.0 / 64, 1e-12));
  CHECK(top[4].busy_fraction == rel_approx(0.1, 1e-12));
  CHECK(top[4].name == "node1.gpu0 -> node1.nvswitch");
  CHECK(busiest_links(net, r, 2.0, 1).front().busy_fraction == rel_approx(0.1, 1e-12));
  CHECK(busiest_links(net, r, 1.0, 2).size() == 2);
}

TEST_CASE("busiest links: one line per class, its busiest link, and how many links of it carried traffic") {
  // GPU 0 sends 9 GB and GPUs 1 and 2 send 18 GB each to GPU 5 of the same node: three GPU ports
  // out (GPU 1's and GPU 2's busiest, tied: GPU 1 named), one port in carrying 45 GB.
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(two_nodes());
  ClusterNetwork r(cl, net);
  net.start(r.route(GpuId(0), GpuId(5)), 9e9, [] {});
  net.start(r.route(GpuId(2), GpuId(5)), 18e9, [] {});
  net.start(r.route(GpuId(1), GpuId(5)), 18e9, [] {});
  e.run();
  CHECK(link_class("node12.gpu3 -> pod0.leaf3") == "node.gpu -> pod.leaf");
  const auto top = busiest_links(net, r, 1.0, 10);
  REQUIRE(top.size() == 2);
  CHECK(top[0].name == "node0.nvswitch -> node0.gpu5");
  CHECK(top[0].links == 1);
  CHECK(top[0].busy_fraction == rel_approx(45.0 / 450, 1e-12));
  CHECK(top[1].name == "node0.gpu1 -> node0.nvswitch");
  CHECK(top[1].links == 3);
  CHECK(top[1].bytes == rel_approx(18e9, 1e-12));
}

TEST_CASE("a degraded link runs at its fraction of capacity: one flow across it takes bytes / (fraction x capacity)") {
  // 10 GB from GPU 3 of node 0 to GPU 3 of node 1: its bottleneck was the 50 GB/s NIC links
  // (0.2 s); node 0's NIC 3 at 40% makes that link 20 GB/s: 0.5 s. The reverse direction keeps 50.
  ClusterSpec s = two_nodes();
  s.degraded_links = {{"node0.nic3 -> switch", 0.4}};
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(s);
  ClusterNetwork r(cl, net);
  Time there{}, back{};
  net.start(r.route_rail(GpuId(3), GpuId(11)), 10e9, [&] { there = e.now(); });
  net.start(r.route_rail(GpuId(11), GpuId(3)), 10e9, [&] { back = e.now(); });
  e.run();
  CHECK(there.seconds() == rel_approx(0.5, 1e-9));
  CHECK(back.seconds() == rel_approx(0.2, 1e-9));
  const auto top = busiest_links(net, r, 0.5, 1);
  CHECK(top.front().name == "node0.nic3 -> switch");
  CHECK(top.front().capacity_gbyte_per_s == rel_approx(20, 1e-12));
  CHECK(top.front().busy_fraction == rel_approx(1.0, 1e-9));
  // A name the cluster does not have is a programming error here (scenarios check names first).
  ClusterSpec bad = two_nodes();
  bad.degraded_links = {{"node0.nic9 -> switch", 0.5}};
  const Cluster bcl = build_cluster(bad);
  FlowNetwork bnet(e);
  CHECK_THROWS_AS(ClusterNetwork(bcl, bnet), std::invalid_argument);
}
