#include <doctest/doctest.h>

#include "topology/network.hpp"

using namespace ctwin;

namespace {
ClusterSpec node_spec(IntraNodeFabric f, int nodes) {
  ClusterSpec s;
  s.gpu.pcie_gbyte_per_s = 32;
  s.gpu.nvlink_gen = 4;
  s.nodes = nodes;
  s.intra = f;
  s.intra_gbyte_per_s = f == IntraNodeFabric::nvswitch ? 450 : 32;
  s.nvlink_pair_gbyte_per_s = 300;
  s.inter_socket_gbyte_per_s = 22;
  s.nics_per_node = 4;
  return s;
}
}  // namespace

TEST_CASE("PCIe node routes: same switch 2 hops, across switches via the CPU 4, across sockets 5") {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(node_spec(IntraNodeFabric::pcie, 1));
  ClusterNetwork r(cl, net);
  CHECK(r.route(GpuId(0), GpuId(1)).size() == 2);  // gpu -> switch -> gpu
  CHECK(r.route(GpuId(0), GpuId(2)).size() == 4);  // gpu -> switch -> cpu -> switch -> gpu
  CHECK(r.route(GpuId(0), GpuId(7)).size() == 5);  // ... cpu -> cpu ...
}

TEST_CASE("NVLink bridges join pairs directly; a mesh joins every pair directly") {
  Engine e;
  FlowNetwork net(e);
  const Cluster bridge = build_cluster(node_spec(IntraNodeFabric::nvlink_bridge, 1));
  const Cluster mesh = build_cluster(node_spec(IntraNodeFabric::nvlink_mesh, 1));
  ClusterNetwork rb(bridge, net), rm(mesh, net);
  CHECK(rb.route(GpuId(2), GpuId(3)).size() == 1);
  CHECK(rb.route(GpuId(1), GpuId(2)).size() == 4);
  for (int b = 1; b < 8; ++b) CHECK(rm.route(GpuId(0), GpuId(b)).size() == 1);
}

TEST_CASE("shared NICs: two GPUs per NIC, the second reaches it through the PCIe switch") {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(node_spec(IntraNodeFabric::pcie, 2));
  ClusterNetwork r(cl, net);
  CHECK(r.nic_of(GpuId(1)) == 0);
  CHECK(r.nic_of(GpuId(2)) == 1);
  // gpu 1 -> switch -> NIC 0 -> leaf (rail 0) -> NIC 0 of node 1 -> switch -> gpu 9.
  CHECK(r.route_rail(GpuId(1), GpuId(9)).size() == 6);
}

TEST_CASE("fabrics: one switch is 2 hops NIC to NIC, a fat-tree across pods 4, three tiers across pods 6") {
  for (auto [fabric, fabric_hops] :
       {std::pair{InterNodeFabric::single_switch, 2}, std::pair{InterNodeFabric::fat_tree, 4},
        std::pair{InterNodeFabric::fat_tree3, 6}}) {
    // Copies: clang 14 cannot capture structured bindings (CAPTURE is a lambda).
    const InterNodeFabric f = fabric;
    const int hops = fabric_hops;
    CAPTURE(to_string(f));
    Engine e;
    FlowNetwork net(e);
    ClusterSpec s = node_spec(IntraNodeFabric::nvswitch, 4);
    s.nics_per_node = 0;
    s.fabric = f;
    s.nodes_per_pod = 2;
    const Cluster cl = build_cluster(s);
    ClusterNetwork r(cl, net);
    // gpu -> NIC ... NIC -> gpu around the fabric part.
    CHECK(r.route_rail(GpuId(0), GpuId(24)).size() == static_cast<std::size_t>(hops + 2));
  }
}
