#include "topology/collective_flow.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>

#include "topology/dtree.hpp"

namespace ctwin {

void CollectiveFlows::start(const CollectiveCall& call, std::function<void()> on_done) {
  const int n = static_cast<int>(call.ranks.size());
  if (n <= 1 || call.bytes <= 0) {
    net_.start({}, 0, std::move(on_done));  // nothing to move: completes now
    return;
  }
  const CollectivePlan plan = plan_collective(cluster_, call, options_);
  const ClusterSpec& spec = cluster_.spec;
  std::map<int, std::vector<GpuId>> by_node;  // rank order kept within each node
  for (GpuId g : call.ranks) by_node[cluster_.node_of(g)].push_back(g);
  const bool multi = by_node.size() > 1;
  int local = 1;
  for (const auto& [node, members] : by_node) local = std::max(local, static_cast<int>(members.size()));
  const int nics = std::max(1, std::min(spec.nics(), spec.gpus_per_node));

  struct Pending {
    int left = 0;
    std::function<void()> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(on_done);
  auto one_done = [pending] {
    if (--pending->left == 0) pending->done();
  };
  const Time lat = seconds(plan.latency_s);
  const double scale = 1.0 / plan.efficiency;
  // Inside a node the shortest path; across nodes through the receiver's rail (PXN).
  auto flow_on = [&](std::vector<LinkId> path, double bytes,
                     double max_rate = std::numeric_limits<double>::infinity()) {
    ++pending->left;
    net_.start(std::move(path), bytes * scale, one_done, lat, max_rate);
  };
  auto flow = [&](GpuId a, GpuId b, double bytes, double max_rate = std::numeric_limits<double>::infinity()) {
    flow_on(cluster_.node_of(a) == cluster_.node_of(b) ? routes_.route(a, b) : routes_.route_rail(a, b), bytes,
            max_rate);
  };
  // Channel c's order of a node's members: rotated so channel c enters every node at the GPU
  // owning its NIC, and leaves through a different rail than the other channels (NCCL's rings).
  auto rotated = [&](const std::vector<GpuId>& m, int c, int channels) {
    const int k = static_cast<int>(m.size());
    std::vector<GpuId> out;
    const int start = c * k / channels;
    for (int i = 0; i < k; ++i) out.push_back(m[static_cast<std::size_t>((i + start) % k)]);
    return out;
  };
  const double S = call.bytes;

  switch (plan.algo) {
    case CollectiveAlgo::nvls: {
      // Every GPU pushes its buffer into the switch and pulls the reduced result once. As flows
      // through the switch, one per GPU, sized so an idle switch takes the plan's bandwidth time
      // (NVLS's streaming rate; its hand-offs and fill are in the plan's latency); other traffic on
      // the same NVLink ports slows them.
      const double bytes = plan.bandwidth_s * spec.intra_effective_gbyte_per_s() * 1e9;
      for (int i = 0; i < n; ++i) {
        flow(call.ranks[static_cast<std::size_t>(i)], call.ranks[static_cast<std::size_t>((i + 1) % n)], bytes);
      }
      return;
    }
    case CollectiveAlgo::p2p: {
      if (call.op == CollectiveOp::send_recv) {
        // Two ranks: one transfer. More: a ring shift, every rank sending S to the next (ring
        // attention's K/V steps).
        if (n == 2) {
          flow(call.ranks.front(), call.ranks.back(), S);
        } else {
          for (int i = 0; i < n; ++i) {
            flow(call.ranks[static_cast<std::size_t>(i)], call.ranks[static_cast<std::size_t>((i + 1) % n)], S);
          }
        }
        return;
      }
      // Pairwise exchange: every rank sends 1/n of its buffer straight to every other rank.
      for (GpuId a : call.ranks) {
        for (GpuId b : call.ranks) {
          if (a != b) flow(a, b, S / n);
        }
      }
      return;
    }
    case CollectiveAlgo::tree: {
      // Per channel a chain through each node's GPUs (reduce up, broadcast down) and NCCL's two
      // binary trees over the nodes' chain heads, each tree carrying half the buffer.
      const int channels = multi ? std::min(nics, local) : local;
      const int nodes = static_cast<int>(by_node.size());
      const double b = S / 2 / channels;
      for (int c = 0; c < channels; ++c) {
        std::vector<GpuId> heads;
        for (const auto& [node, members] : by_node) {
          const auto chain = rotated(members, c, channels);
          heads.push_back(chain.front());
          for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
            flow(chain[i + 1], chain[i], 2 * b);  // both trees' reduce traffic
            flow(chain[i], chain[i + 1], 2 * b);  // both trees' broadcast traffic
          }
        }
        for (int t = 0; t < 2 && nodes > 1; ++t) {
          for (int j = 0; j < nodes; ++j) {
            const int up = dtree(nodes, j, t).up;
            if (up < 0) continue;
            const GpuId me = heads[static_cast<std::size_t>(j)], parent = heads[static_cast<std::size_t>(up)];
            flow_on(routes_.route_via(me, parent, routes_.nic_of(me)), b);
            flow_on(routes_.route_via(parent, me, routes_.nic_of(me)), b);
          }
        }
      }
      return;
    }
    case CollectiveAlgo::nvls_tree: {
      // NVLS inside each node (as the nvls case: one flow per GPU port through its switch), and
      // per channel (one per NIC) NCCL's two binary trees over the nodes between the GPUs that own
      // that NIC, each tree carrying half of the channel's share each way.
      const int channels = std::min(nics, local);
      const int nodes = static_cast<int>(by_node.size());
      // Sized so an idle switch takes the plan's NVLS loops (node_s: its streaming and hand-offs).
      const double nvls_bytes = plan.node_s * spec.intra_effective_gbyte_per_s() * 1e9;
      for (const auto& [node, members] : by_node) {
        const int k = static_cast<int>(members.size());
        for (int i = 0; i < k; ++i) {
          flow(members[static_cast<std::size_t>(i)], members[static_cast<std::size_t>((i + 1) % k)], nvls_bytes);
        }
      }
      const double b = S / 2 / channels;
      for (int c = 0; c < channels; ++c) {
        std::vector<GpuId> heads;
        for (const auto& [node, members] : by_node) heads.push_back(rotated(members, c, channels).front());
        for (int t = 0; t < 2; ++t) {
          for (int j = 0; j < nodes; ++j) {
            const int up = dtree(nodes, j, t).up;
            if (up < 0) continue;
            const GpuId me = heads[static_cast<std::size_t>(j)], parent = heads[static_cast<std::size_t>(up)];
            flow_on(routes_.route_via(me, parent, routes_.nic_of(me)), b);
            flow_on(routes_.route_via(parent, me, routes_.nic_of(me)), b);
          }
        }
      }
      return;
    }
    case CollectiveAlgo::collnet: {
      // Reduce-scatter and all-gather rings inside each node; each GPU's 1/g share goes up to
      // its leaf switch, which reduces across nodes (SHARP), and comes back down.
      for (const auto& [node, members] : by_node) {
        const int k = static_cast<int>(members.size());
        for (int c = 0; c < k && k > 1; ++c) {
          const auto ring = rotated(members, c, k);
          for (int i = 0; i < k; ++i) {
            flow(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % k)],
                 2.0 * (k - 1) / k * S / k);
          }
        }
        for (GpuId g : members) {
          flow_on(routes_.route_to_leaf(g, routes_.nic_of(g)), S / k);
          flow_on(routes_.route_from_leaf(g, routes_.nic_of(g)), S / k);
        }
      }
      return;
    }
    case CollectiveAlgo::ring:
    case CollectiveAlgo::automatic:
      break;
  }
  // Rings, one per channel. Across nodes one channel per NIC; on an NVLink mesh one per stride
  // coprime with the GPU count (edge-disjoint rings); otherwise one per GPU.
  std::vector<int> strides{1};
  int channels = multi ? std::min(nics, local) : local;
  if (!multi && spec.intra == IntraNodeFabric::nvlink_mesh) {
    strides.clear();
    for (int s = 1; s < local; ++s) {
      if (std::gcd(s, local) == 1) strides.push_back(s);
    }
    channels = static_cast<int>(strides.size());
  }
  const double per_flow = bus_factor(call.op, n) * S / channels;
  // The ramp's ceiling on what a rank moves over all its channels (plan.rate_cap_gbps: fewer NCCL
  // channels for a small call, LL's and LL128's per-channel ceilings) as each flow's own bound: a
  // rank sends one flow per channel here, each carrying bytes / efficiency.
  const double cap = std::isfinite(plan.rate_cap_gbps) ? plan.rate_cap_gbps * 1e9 / (plan.efficiency * channels)
                                                       : std::numeric_limits<double>::infinity();
  const bool chain = call.op == CollectiveOp::broadcast || call.op == CollectiveOp::reduce;
  for (int c = 0; c < channels; ++c) {
    std::vector<GpuId> ring;
    for (const auto& [node, members] : by_node) {
      if (strides.size() > 1 || (!multi && spec.intra == IntraNodeFabric::nvlink_mesh)) {
        const int k = static_cast<int>(members.size());
        for (int i = 0; i < k; ++i) {
          ring.push_back(members[static_cast<std::size_t>(i * strides[static_cast<std::size_t>(c)] % k)]);
        }
      } else {
        const auto r = rotated(members, c, channels);
        ring.insert(ring.end(), r.begin(), r.end());
      }
    }
    // A broadcast's chain starts at the root (the first rank), which alone holds the data, in
    // every channel; a reduce's ends there. The chain drops the ring's edge into (out of) the root.
    int first = 0;
    if (chain) {
      first = static_cast<int>(std::find(ring.begin(), ring.end(), call.ranks.front()) - ring.begin());
      if (call.op == CollectiveOp::reduce) first = (first + 1) % n;
    }
    const int edges = chain ? n - 1 : n;
    for (int i = 0; i < edges; ++i) {
      flow(ring[static_cast<std::size_t>((first + i) % n)], ring[static_cast<std::size_t>((first + i + 1) % n)],
           per_flow, cap);
    }
  }
}

}  // namespace ctwin
