#include "topology/collective.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace ctwin {

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::reduce:
      return "reduce";
    case CollectiveOp::all_to_all:
      return "all_to_all";
    case CollectiveOp::send_recv:
      return "send_recv";
  }
  return "?";
}

double bus_factor(CollectiveOp op, int n) {
  if (n <= 1) return 0;
  const double dn = n;
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2.0 * (dn - 1) / dn;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return (dn - 1) / dn;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::send_recv:
      return 1.0;
  }
  return 1.0;
}

double ring_bandwidth_gbps(const Cluster& c, const std::vector<GpuId>& ranks) {
  std::set<int> nodes;
  for (GpuId g : ranks) nodes.insert(c.node_of(g));
  const double intra = c.spec.intra_gbps;
  if (nodes.size() <= 1) return intra;
  // One ring channel per NIC: each channel crosses node boundaries through its own NIC and
  // passes through the other local GPUs over the node fabric.
  const int local = static_cast<int>(ranks.size() / nodes.size());
  const double per_channel = local > 1 ? std::min(c.spec.nic_gbps, intra / (local - 1)) : c.spec.nic_gbps;
  return per_channel * std::max(1, local);
}

CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call) {
  const int n = static_cast<int>(call.ranks.size());
  if (n < 1) throw std::invalid_argument("estimate_collective: no ranks");
  CollectiveEstimate e;
  e.algo = "ring";
  e.protocol = "simple";
  if (n == 1 || call.bytes <= 0) return e;
  std::set<int> nodes;
  for (GpuId g : call.ranks) nodes.insert(c.node_of(g));
  const double hop_us = nodes.size() > 1 ? c.spec.inter_latency_us : c.spec.intra_latency_us;
  // Steps of the ring: all_reduce is a reduce-scatter then an all-gather, n-1 steps each.
  int steps = n - 1;
  if (call.op == CollectiveOp::all_reduce) steps = 2 * (n - 1);
  if (call.op == CollectiveOp::send_recv) steps = 1;
  const double bw = ring_bandwidth_gbps(c, call.ranks) * 1e9;
  const double seconds = steps * hop_us * 1e-6 + bus_factor(call.op, n) * call.bytes / bw;
  e.time = ctwin::seconds(seconds);
  e.algbw_gbps = call.bytes / seconds / 1e9;
  e.busbw_gbps = e.algbw_gbps * bus_factor(call.op, n);
  return e;
}

}  // namespace ctwin
