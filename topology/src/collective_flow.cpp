#include "topology/collective_flow.hpp"

#include <algorithm>
#include <map>
#include <memory>

namespace ctwin {

void CollectiveFlows::start(const CollectiveCall& call, std::function<void()> on_done) {
  const int n = static_cast<int>(call.ranks.size());
  if (n <= 1 || call.bytes <= 0) {
    net_.start({}, 0, std::move(on_done));  // nothing to move: completes now
    return;
  }
  const int gpn = cluster_.spec.gpus_per_node;
  std::map<int, std::vector<GpuId>> by_node;  // rank order kept within each node
  for (GpuId g : call.ranks) by_node[cluster_.node_of(g)].push_back(g);
  const bool multi_node = by_node.size() > 1;
  const double hop_us = multi_node ? cluster_.spec.inter_latency_us : cluster_.spec.intra_latency_us;

  struct Pending {
    int left = 0;
    std::function<void()> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(on_done);
  auto one_done = [pending] {
    if (--pending->left == 0) pending->done();
  };
  auto flow = [&](GpuId a, GpuId b, double bytes, Time latency) {
    ++pending->left;
    const bool same_node = cluster_.node_of(a) == cluster_.node_of(b);
    net_.start(same_node ? routes_.route(a, b) : routes_.route_rail(a, b), bytes, one_done, latency);
  };

  if (nvls_eligible(cluster_, call)) {
    // NVLS: every GPU pushes its buffer into the switch and pulls the reduced result once. As
    // flows through the switch, one per GPU, sized so an idle switch gives NVLS's measured rate;
    // other traffic on the same NVLink ports slows them.
    const double scale = cluster_.spec.intra_efficiency / cluster_.spec.nvls_efficiency;
    const Time lat = seconds(2 * cluster_.spec.intra_latency_us * 1e-6);
    for (int i = 0; i < n; ++i) {
      flow(call.ranks[static_cast<std::size_t>(i)], call.ranks[static_cast<std::size_t>((i + 1) % n)],
           call.bytes * scale, lat);
    }
    return;
  }
  if (call.op == CollectiveOp::all_to_all) {
    // Pairwise exchange: every rank sends 1/n of its buffer straight to every other rank.
    const Time lat = seconds(hop_us * 1e-6);
    for (GpuId a : call.ranks) {
      for (GpuId b : call.ranks) {
        if (a != b) flow(a, b, call.bytes / n, lat);
      }
    }
    return;
  }
  if (call.op == CollectiveOp::send_recv) {
    flow(call.ranks.front(), call.ranks.back(), call.bytes, seconds(hop_us * 1e-6));
    return;
  }
  // Ring algorithms, one ring per channel. Channel c enters every node at its c-th GPU, so
  // each channel leaves a node through a different NIC (rail), as NCCL's rings do.
  int channels = 1;
  for (const auto& [node, members] : by_node) channels = std::max(channels, static_cast<int>(members.size()));
  channels = std::min(channels, gpn);
  int steps = n - 1;
  if (call.op == CollectiveOp::all_reduce) steps = 2 * (n - 1);
  const Time lat = seconds(steps * hop_us * 1e-6);
  const double per_flow = bus_factor(call.op, n) * call.bytes / channels;
  const bool chain = call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce;
  for (int c = 0; c < channels; ++c) {
    std::vector<GpuId> ring;
    for (const auto& [node, members] : by_node) {
      const int k = static_cast<int>(members.size());
      for (int i = 0; i < k; ++i) ring.push_back(members[static_cast<std::size_t>((i + c) % k)]);
    }
    const int edges = chain ? n - 1 : n;
    for (int i = 0; i < edges; ++i) {
      flow(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % n)], per_flow, lat);
    }
  }
}

}  // namespace ctwin
