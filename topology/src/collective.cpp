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
  const double intra = c.spec.intra_gbps * c.spec.intra_efficiency;
  if (nodes.size() <= 1) return intra;
  // One ring channel per NIC: each channel crosses node boundaries through its own NIC. Every
  // GPU sends once per channel over the node fabric (the node-crossing send too, via PXN to the
  // GPU on the receiver's rail), so a GPU's fabric port is shared by all `local` channels.
  const int local = static_cast<int>(ranks.size() / nodes.size());
  const double per_channel = local > 1 ? std::min(c.spec.nic_gbps, intra / local) : c.spec.nic_gbps;
  return per_channel * std::max(1, local);
}

bool nvls_eligible(const Cluster& c, const CollectiveCall& call) {
  if (call.op != CollectiveOp::all_reduce || c.spec.nvls_efficiency <= 0 || call.ranks.size() < 2) return false;
  const int node = c.node_of(call.ranks.front());
  for (GpuId g : call.ranks) {
    if (c.node_of(g) != node) return false;
  }
  return true;
}

CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call, CollectiveAlgo algo) {
  const int n = static_cast<int>(call.ranks.size());
  if (n < 1) throw std::invalid_argument("estimate_collective: no ranks");
  CollectiveEstimate e;
  e.algo = "ring";
  e.protocol = "simple";
  if (n == 1 || call.bytes <= 0) return e;
  const bool nvls = algo == CollectiveAlgo::nvls || (algo == CollectiveAlgo::automatic && nvls_eligible(c, call));
  if (nvls) {
    if (!nvls_eligible(c, call)) throw std::invalid_argument("estimate_collective: NVLS does not apply here");
    // In-switch reduction: every GPU pushes its buffer into the switch and pulls the result
    // once, so time is one buffer at the NVLS rate, plus a reduce and a broadcast hop.
    e.algo = "nvls";
    const double seconds_nvls =
        2 * c.spec.intra_latency_us * 1e-6 + call.bytes / (c.spec.intra_gbps * c.spec.nvls_efficiency * 1e9);
    e.time = ctwin::seconds(seconds_nvls);
    e.algbw_gbps = call.bytes / seconds_nvls / 1e9;
    e.busbw_gbps = e.algbw_gbps * bus_factor(call.op, n);
    return e;
  }
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
