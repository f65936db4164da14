// A DGX H100 cluster description and collectives run on it at flow fidelity, shared by the
// topology tests (test_collective_flow.cpp, test_fabric.cpp).
#pragma once

#include <vector>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "topology/collective_flow.hpp"
#include "topology/network.hpp"

namespace ctwin::test {

// `nodes` DGX H100: 8 GPUs on NVSwitch at 450 GB/s and 0.6 us a hop, one 400 Gb/s NIC per GPU
// at 3 us a hop, PCIe Gen5 x16 (64 GB/s) from each GPU to its NIC.
inline ClusterSpec h100(int nodes) {
  ClusterSpec s;
  s.name = "dgx-h100";
  s.gpu.name = "H100-SXM";
  s.gpu.pcie_gbyte_per_s = 64;
  s.nodes = nodes;
  s.gpus_per_node = 8;
  s.intra_gbyte_per_s = 450;
  s.intra_latency_us = 0.6;
  s.nic_gbyte_per_s = 50;
  s.inter_latency_us = 3.0;
  return s;
}

// `op` over the `count` consecutive GPUs from `first`.
inline CollectiveCall call_on(CollectiveOp op, int first, int count, double bytes) {
  CollectiveCall c;
  c.op = op;
  for (int i = 0; i < count; ++i) c.ranks.emplace_back(first + i);
  c.bytes = bytes;
  return c;
}

// Runs the calls concurrently at flow fidelity; returns each one's completion time.
inline std::vector<double> run_flows(const ClusterSpec& spec, const std::vector<CollectiveCall>& calls,
                                     const CollectiveOptions& options = {}) {
  Engine e;
  FlowNetwork net(e);
  const Cluster cl = build_cluster(spec);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl, options);
  std::vector<double> done(calls.size(), -1);
  for (std::size_t i = 0; i < calls.size(); ++i) coll.start(calls[i], [&done, &e, i] { done[i] = e.now().seconds(); });
  e.run();
  return done;
}

}  // namespace ctwin::test
