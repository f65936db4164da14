#include "topology/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

#include "topology/dtree.hpp"

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

const char* to_string(CollectiveAlgo a) {
  switch (a) {
    case CollectiveAlgo::automatic:
      return "auto";
    case CollectiveAlgo::ring:
      return "ring";
    case CollectiveAlgo::tree:
      return "tree";
    case CollectiveAlgo::nvls:
      return "nvls";
    case CollectiveAlgo::collnet:
      return "collnet";
    case CollectiveAlgo::p2p:
      return "p2p";
    case CollectiveAlgo::nvls_tree:
      return "nvlstree";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::automatic:
      return "auto";
    case Protocol::ll:
      return "ll";
    case Protocol::ll128:
      return "ll128";
    case Protocol::simple:
      return "simple";
  }
  return "?";
}

bool parse_collective_algo(std::string_view name, CollectiveAlgo& out) {
  for (CollectiveAlgo a : {CollectiveAlgo::automatic, CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls,
                           CollectiveAlgo::collnet, CollectiveAlgo::nvls_tree}) {
    if (name == to_string(a)) return out = a, true;
  }
  return false;
}

bool parse_protocol(std::string_view name, Protocol& out) {
  for (Protocol p : {Protocol::automatic, Protocol::ll, Protocol::ll128, Protocol::simple}) {
    if (name == to_string(p)) return out = p, true;
  }
  return false;
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

namespace {

// How the call's ranks sit on the cluster.
struct Shape {
  int n = 0;      // ranks
  int nodes = 0;  // nodes spanned
  int local = 0;  // most ranks in one node
};

Shape shape_of(const Cluster& c, const std::vector<GpuId>& ranks) {
  std::map<int, int> per_node;
  for (GpuId g : ranks) ++per_node[c.node_of(g)];
  Shape s;
  s.n = static_cast<int>(ranks.size());
  s.nodes = static_cast<int>(per_node.size());
  for (const auto& [node, count] : per_node) s.local = std::max(s.local, count);
  return s;
}

// NVLS all-reduce's streaming rate on `ranks` GPUs of one switch. Every multimem access goes
// through the switch, the GPU's own shard too: a GPU serves its whole buffer to the switch's
// reductions and pushes its reduced shard back (S (1 + 1/n) out), and takes its shard's sum and
// every broadcast shard (S (1 + 1/n) in). nvls_efficiency is the algbw share measured on 8 GPUs;
// other counts scale by that traffic (4 GPUs: 0.9 of the 8-GPU rate).
double nvls_rate(const ClusterSpec& s, int ranks) {
  constexpr double measured_on = 8;
  const double n = std::max(2, ranks);
  return s.intra_gbyte_per_s * s.nvls_efficiency * 1e9 * (1 + 1 / measured_on) / (1 + 1 / n);
}

double nic_bw(const ClusterSpec& s) { return s.nic_gbyte_per_s * (s.nic_efficiency > 0 ? s.nic_efficiency : 1.0); }
int nics(const ClusterSpec& s) { return std::max(1, std::min(s.nics(), s.gpus_per_node)); }
double pcie_bw(const ClusterSpec& s) { return s.gpu.pcie_gbyte_per_s > 0 ? s.gpu.pcie_gbyte_per_s : 32; }
bool nvlink_node(const ClusterSpec& s) { return s.intra != IntraNodeFabric::pcie; }

// Ring bandwidth inside a node over `local` GPUs (the first ones of the node), Simple protocol.
double intra_ring(const ClusterSpec& s, int local) {
  const double eff = s.intra_eff();
  if (local <= 1) return std::numeric_limits<double>::infinity();
  if (s.intra == IntraNodeFabric::nvswitch) return s.intra_effective_gbyte_per_s();
  const double pair = nvlink_pair_effective_gbps(s);
  if (s.intra == IntraNodeFabric::nvlink_mesh) {
    // One ring per stride coprime with the GPU count: edge-disjoint rings over the mesh.
    int strides = 0;
    for (int k = 1; k < local; ++k) strides += std::gcd(k, local) == 1 ? 1 : 0;
    return strides * pair;
  }
  if (s.intra == IntraNodeFabric::nvlink_bridge && local == 2) return pair;
  // PCIe tree: every ring edge leaving a switch crosses its uplink, every edge between sockets the
  // inter-socket link, once per direction.
  double bw = pcie_bw(s) * eff;
  const int sockets = std::max(1, std::min(s.sockets, s.gpus_per_node));
  if (local > std::max(1, s.gpus_per_pcie_switch))
    bw = std::min(bw, (s.pcie_uplink_gbyte_per_s > 0 ? s.pcie_uplink_gbyte_per_s : pcie_bw(s)) * eff);
  if (sockets > 1 && local > s.gpus_per_node / sockets && s.inter_socket_gbyte_per_s > 0)
    bw = std::min(bw, s.inter_socket_gbyte_per_s);
  return bw;
}

double ring_bw(const ClusterSpec& s, const Shape& sh) {
  const double intra = intra_ring(s, sh.local);
  if (sh.nodes <= 1) return intra;
  if (sh.local <= 1) return nic_bw(s);
  // One ring channel per NIC. Every GPU sends once per channel over the node fabric (the
  // node-crossing send too, via PXN to the GPU owning the channel's NIC), so a GPU's fabric
  // port is shared by all channels.
  const int k = std::min(nics(s), sh.local);
  return k * std::min(nic_bw(s), intra / k);
}

// NCCL's latency tables and protocol efficiencies (src/graph/tuning.cc baseLat, hwLat) live in
// ClusterSpec::nccl (topology/nccl_model.hpp). The link's own LL latency comes from the spec
// (intra_latency_us, inter_latency_us); the other protocols add NCCL's difference over LL.
int proto_index(Protocol p) { return p == Protocol::ll ? 0 : p == Protocol::ll128 ? 1 : 2; }

double ring_steps(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2.0 * (n - 1);
    case CollectiveOp::send_recv:
      return 1;
    default:
      return n - 1;
  }
}

// NVLS's loops inside one node of `ranks` GPUs over S bytes, at `rate` bytes/s measured on large
// calls (all_reduce.h): each channel loops over its part, a chunk per rank a loop, and a loop waits
// on a flagged hand-off with every rank. The measured rate holds those of a large call, which runs
// NCCL's full chunk; a smaller call runs smaller chunks, so more loops per byte, and its first
// loop's data fills the stages one after another. stream_s: the bytes between hand-offs;
// handoff_s: the hand-offs past the first loop; fill_s: the first loop through the stages.
struct NvlsLoops {
  double stream_s = 0, handoff_s = 0, fill_s = 0;
};
NvlsLoops nvls_loops(const NcclModel& nm, const ClusterSpec& s, int ranks, double S, double rate) {
  const int nch = std::max(1, nm.nvls_channels[static_cast<std::size_t>(nccl_arch_index(s.gpu))]);
  const double loop_handoff_s =
      nm.nvls_handoff_hops_per_rank * ranks * (s.intra_latency_us + nm.ring_nvlink_extra_us[2]) * 1e-6;
  const double full_loop = static_cast<double>(nch) * ranks * nm.nvls_chunk_bytes;
  const double loop = static_cast<double>(nch) * ranks * nvls_chunk_bytes(nm, S, nch, ranks);
  // Seconds per byte between hand-offs: at least a tenth of the measured rate's, so a profile's
  // higher measured rate never turns it negative.
  const double stream = std::max(0.1 / rate, 1 / rate - loop_handoff_s / full_loop);
  NvlsLoops r;
  r.stream_s = S * stream;
  r.handoff_s = (std::ceil(S / loop) - 1) * loop_handoff_s;
  r.fill_s = nm.nvls_fill_loops_per_rank * ranks * std::min(S, loop) * stream;
  return r;
}

// tuning.cc ncclTopoGetAlgoTime: the factor the tuner scales a tree's bandwidth by for a call of
// `bytes`, at log2(bytes / 64) below `entries` (23 for Tree, 24 for NVLSTree on Blackwell). The
// tree's own time takes it too (NcclModel::tree_correction); NVLSTree's only the tuner's view.
double tree_tuner_correction(const NcclModel& nm, Protocol p, double bytes, int entries) {
  const double units = std::floor(bytes / 64);
  const int log_size = units < 2 ? 0 : static_cast<int>(std::floor(std::log2(units)));
  if (log_size >= entries) return 1;
  return nm.tree_correction[static_cast<std::size_t>(proto_index(p))][static_cast<std::size_t>(log_size)];
}

// tuning.cc llMaxBw: LL's bus bandwidth ceiling, by GPU generation in one node and by host CPU
// across 2 or more nodes.
double ll_max_bus_gbps(const ClusterSpec& s, int nodes) {
  if (nodes <= 1) return s.nccl.ll_max_gbps[static_cast<std::size_t>(nccl_arch_index(s.gpu))];
  return s.nccl.ll_max_net_gbps[s.host_cpu == HostCpu::amd ? 1 : 0][nodes > 2 ? 1 : 0];
}

struct Candidate {
  double latency_s = 0, efficiency = 1, bandwidth_s = 0;
  double tuner_s = -1;  // NCCL's tuner's prediction; < 0: the same as latency_s + bandwidth_s
  int channels = 0;
  double rate_cap_gbps = std::numeric_limits<double>::infinity();
  double node_s = 0;  // CollectivePlan::node_s
};

// Node-level egress of NCCL's double binary tree, in units of the buffer: the most any node sends.
double tree_node_egress(int nodes) {
  if (nodes <= 1) return 0;
  std::vector<double> out(static_cast<std::size_t>(nodes), 0.0);
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < nodes; ++r) {
      const DtreeLinks l = dtree(nodes, r, t);
      // Each tree carries half the buffer: up to the parent (reduce), down to each child (broadcast).
      out[static_cast<std::size_t>(r)] += 0.5 * ((l.up >= 0 ? 1 : 0) + (l.down0 >= 0 ? 1 : 0) + (l.down1 >= 0 ? 1 : 0));
    }
  }
  return *std::max_element(out.begin(), out.end());
}

// The fabric's top tier (leaf uplinks of a two-tier fabric, a pod's spine-to-core links in
// fat_tree3) under node-to-node edges of a collective, each carrying `bytes` per channel and
// direction on `channels` channels, channel c on rail c. An edge between nodes of different pods
// crosses it; a pod's uplink capacity is its nodes' NIC bandwidth over the oversubscription, spread
// evenly (as ECMP over many flows does): on a rail leaf one NIC per node and one channel, on a
// fat_tree leaf or a fat_tree3 pod every NIC and every channel. Seconds for the busiest pod.
double tier_seconds(const ClusterSpec& s, const std::vector<std::pair<int, int>>& edges, double bytes, int channels,
                    int groups) {
  if (s.fabric == InterNodeFabric::single_switch || s.nodes <= 1 || edges.empty()) return 0;
  const int per_pod = std::max(1, std::min(pod_nodes(s), s.nodes));
  const int pods = (s.nodes + per_pod - 1) / per_pod;
  if (pods <= 1) return 0;
  std::map<int, std::pair<int, int>> crossing;  // pod -> (edges out, edges in)
  for (const auto& [a, b] : edges) {
    if (a / per_pod == b / per_pod) continue;
    ++crossing[a / per_pod].first;
    ++crossing[b / per_pod].second;
  }
  const bool whole_node = s.fabric != InterNodeFabric::rail_optimized;  // fat_tree leaf, fat_tree3 pod
  const double k = nics(s);
  // Flows per direction a leaf takes per crossing edge: every channel of every group on a
  // fat-tree leaf; on a rail leaf the channels of all groups spread over the rails.
  const double flows = whole_node ? static_cast<double>(channels) * std::max(1, groups)
                                  : std::max(1.0, std::ceil(channels * std::max(1, groups) / k));
  double t = 0;
  for (const auto& [pod, io] : crossing) {
    const double here = std::min(per_pod, s.nodes - pod * per_pod);
    const double cap = here * (whole_node ? k : 1.0) * nic_bw(s) / std::max(1.0, s.oversubscription);
    const double load = std::max(io.first, io.second) * bytes * flows;
    t = std::max(t, load / (cap * 1e9));
  }
  return t;
}

// The nodes the call spans, in order.
std::vector<int> nodes_of(const Cluster& c, const std::vector<GpuId>& ranks) {
  std::map<int, int> per_node;
  for (GpuId g : ranks) ++per_node[c.node_of(g)];
  std::vector<int> out;
  for (const auto& [node, count] : per_node) out.push_back(node);
  return out;
}

double a2a_seconds(const ClusterSpec& s, const Shape& sh, double bytes) {
  const double g = sh.local, n = sh.n;
  double t = 0;
  if (sh.nodes <= 1) {
    if (s.intra == IntraNodeFabric::nvswitch) return (n - 1) / n * bytes / (s.intra_effective_gbyte_per_s() * 1e9);
    // PCIe: each GPU's port, each switch uplink (its GPUs to the others) and the socket link.
    const double eff = s.intra_eff();
    t = (n - 1) / n * bytes / (pcie_bw(s) * eff * 1e9);
    const double p = std::min<double>(g, std::max(1, s.gpus_per_pcie_switch));
    if (g > p) {
      const double up = (s.pcie_uplink_gbyte_per_s > 0 ? s.pcie_uplink_gbyte_per_s : pcie_bw(s)) * eff;
      t = std::max(t, p * (g - p) / n * bytes / (up * 1e9));
    }
    const int sockets = std::max(1, std::min(s.sockets, s.gpus_per_node));
    if (sockets > 1 && s.inter_socket_gbyte_per_s > 0 && g > s.gpus_per_node / sockets) {
      const double half = g / 2;
      t = std::max(t, half * half / n * bytes / (s.inter_socket_gbyte_per_s * 1e9));
    }
    return t;
  }
  // Across nodes with PXN: a GPU's node-fabric port carries its intra-node share and what it
  // forwards for the other GPUs of its node to its rail, (g-1)/g of the buffer; each NIC carries
  // its rail's share of every GPU's remote traffic; leaf uplinks the traffic leaving the pod.
  const double k = std::min<double>(nics(s), g);
  const double nodes = sh.nodes;
  if (g > 1) t = (g - 1) / g * bytes / (intra_ring(s, sh.local) * 1e9);
  t = std::max(t, (nodes - 1) / nodes * g / k * bytes / (nic_bw(s) * 1e9));
  const double pod = std::min<double>(pod_nodes(s), s.nodes);
  if (s.fabric != InterNodeFabric::single_switch && nodes > pod) {
    t = std::max(t, (nodes - pod) / nodes * g / k * std::max(1.0, s.oversubscription) * bytes / (nic_bw(s) * 1e9));
  }
  return t;
}

// The time model of one (algorithm, protocol) pair; false when it does not apply.
bool candidate(const Cluster& c, const CollectiveCall& call, const Shape& sh, CollectiveAlgo a, Protocol p,
               Candidate& out) {
  const ClusterSpec& s = c.spec;
  const int pi = proto_index(p);
  const bool multi = sh.nodes > 1;
  const double S = call.bytes;
  const double intra_hop = s.intra_latency_us;
  const double net_hop = s.inter_latency_us;
  const NcclModel& nm = s.nccl;
  switch (a) {
    case CollectiveAlgo::p2p: {
      if (p != Protocol::simple) return false;
      const double hop = (multi ? net_hop + nm.ring_net_extra_us[2] : intra_hop + nm.ring_nvlink_extra_us[2]);
      out.latency_s = (nm.base_ring_us[2] + hop) * 1e-6;
      if (call.op == CollectiveOp::all_to_all) {
        out.bandwidth_s = a2a_seconds(s, sh, S);
        if (!multi && s.intra == IntraNodeFabric::nvswitch && sh.n > 1) {
          // The ramp inside an NVSwitch node (enqueue.cc addP2pToPlan, paths.cc): each peer's
          // share runs on some of the p2p channels by size, in parts of `steps` chunks of
          // P2P_NVL_CHUNKSIZE; each step past the first waits a hop, and a part's first step is
          // copied in by the sender before the receiver copies it out (two stages: one step of
          // fill, a step's share of the call's bandwidth time).
          out.tuner_s = out.latency_s + out.bandwidth_s;
          const P2pRamp r = p2p_ramp(nm, S / sh.n, sh.n);
          out.channels = std::min(r.comm_channels, (sh.n - 1) * r.channels_per_peer);
          out.latency_s += (r.steps - 1) * hop * 1e-6 + out.bandwidth_s / r.steps;
        }
      } else {
        double bw = multi ? std::min(nic_bw(s), intra_ring(s, 2)) : intra_ring(s, 2);
        if (s.intra == IntraNodeFabric::nvlink_mesh && !multi) bw = nvlink_pair_effective_gbps(s);
        out.bandwidth_s = S / (bw * 1e9);
      }
      return true;
    }
    case CollectiveAlgo::ring: {
      if (p == Protocol::ll128 && !nvlink_node(s)) return false;  // NCCL enables LL128 on NVLink only
      const double steps = ring_steps(call.op, sh.n);
      const double inter_steps = !multi ? 0 : call.op == CollectiveOp::all_reduce ? 2.0 * (sh.nodes - 1) : sh.nodes - 1;
      double intra_lat =
          intra_hop + (s.intra == IntraNodeFabric::nvswitch ? nm.ring_nvlink_extra_us[pi] : nm.ring_pcie_extra_us[pi]);
      if (multi)
        intra_lat =
            std::max(intra_lat, s.net_overhead_us * (p == Protocol::simple ? nm.simple_net_overhead_factor : 1));
      out.latency_s = (nm.base_ring_us[pi] + (steps - inter_steps) * intra_lat +
                       inter_steps * (net_hop + nm.ring_net_extra_us[pi])) *
                      1e-6;
      const bool quarter = multi || call.op == CollectiveOp::all_reduce || call.op == CollectiveOp::reduce;
      out.efficiency = p == Protocol::ll      ? (quarter ? nm.ring_ll_efficiency : nm.ring_ll_copy_efficiency)
                       : p == Protocol::ll128 ? nm.ring_ll128_efficiency
                                              : 1.0;
      // NCCL's tuner ceilings on the whole ring (tuning.cc): LL's bus bandwidth at most llMaxBw,
      // LL128's at most perChMaxRingLL128Bw per channel.
      const int arch = nccl_arch_index(s.gpu);
      const int N = std::max(1, nm.channels);
      double full = ring_bw(s, sh) * out.efficiency;
      if (p == Protocol::ll) full = std::min(full, ll_max_bus_gbps(s, sh.nodes));
      if (p == Protocol::ll128)
        full = std::min(full, N * nm.ring_ll128_per_channel_gbps[static_cast<std::size_t>(arch)]);
      const double bus = bus_factor(call.op, sh.n) * S;
      out.bandwidth_s = bus / (full * 1e9);
      if (multi) {
        // One ring channel per NIC visits the nodes in order: edge i -> i+1, and back to the first.
        const auto nodes = nodes_of(c, call.ranks);
        std::vector<std::pair<int, int>> edges;
        for (std::size_t i = 0; i < nodes.size(); ++i) edges.emplace_back(nodes[i], nodes[(i + 1) % nodes.size()]);
        const int ch = std::min(nics(s), sh.local);
        out.bandwidth_s =
            std::max(out.bandwidth_s,
                     tier_seconds(s, edges, bus_factor(call.op, sh.n) * S / ch, ch, call.groups) / out.efficiency);
      }
      // The tuner's plateau effect: a multi-node Simple ring all_reduce past 64 bytes per channel
      // and rank is predicted at a multiple of its latency.
      const bool plateau =
          multi && p == Protocol::simple && call.op == CollectiveOp::all_reduce && S / (N * sh.n) >= 64;
      out.tuner_s = out.latency_s * (plateau ? nm.ring_plateau_latency_factor[static_cast<std::size_t>(arch)] : 1.0) +
                    out.bandwidth_s;
      // The ramp (enqueue.cc, device/prims): the call runs on nc of the N channels, each at most
      // 1/N of the ring's rate, so a small call moves at nc/N of it; and every step a channel
      // takes sends its share in chunks of slices, each a flagged transfer the next rank waits
      // a hop for: past the first slice of a step, each further one costs another intra-node hop
      // (network steps are posted by the proxy, NCCL_STEPS deep, and overlap).
      const int nc = ring_channels(nm, p, S, sh.n);
      out.channels = nc;
      out.rate_cap_gbps = full * nc / N;
      out.bandwidth_s = std::max(out.bandwidth_s, bus / (out.rate_cap_gbps * 1e9));
      const double step_bytes = bus / steps / nc;
      const int slices = ring_slices(nm, p, step_bytes);
      const double hop =
          intra_hop + (s.intra == IntraNodeFabric::nvswitch ? nm.ring_nvlink_extra_us[pi] : nm.ring_pcie_extra_us[pi]);
      out.latency_s += (slices - 1) * (steps - inter_steps) * hop * 1e-6;
      return true;
    }
    case CollectiveAlgo::tree: {
      if (call.op != CollectiveOp::all_reduce) return false;
      if (p == Protocol::ll128 && !nvlink_node(s)) return false;
      const int log2n = sh.nodes > 1 ? static_cast<int>(std::floor(std::log2(sh.nodes))) : 0;
      const double intra_lat = intra_hop + nm.tree_nvlink_extra_us[pi], inter_lat = net_hop + nm.tree_net_extra_us[pi];
      out.latency_s = (nm.base_tree_us[pi] + 2 * ((sh.local - 1) * intra_lat + log2n * inter_lat)) * 1e-6;
      // NCCL's protocol factors (tuning.cc); the ceilings and the mid-size correction follow.
      out.efficiency = nm.tree_efficiency * (p == Protocol::ll ? nm.tree_ll_efficiency
                                             : p == Protocol::ll128
                                                 ? (multi ? nm.tree_ll128_efficiency : nm.tree_ll128_intra_efficiency)
                                                 : 1.0);
      // Per channel a chain through the node's GPUs feeds the inter-node trees: reduce up, then
      // broadcast down, pipelined. A GPU's port sends 2(g-1)/g of the buffer; a node's NICs send
      // what its places in the two trees need.
      double t = 0;
      if (sh.local > 1) t = 2.0 * (sh.local - 1) / sh.local * S / (intra_ring(s, sh.local) * 1e9);
      const int ch = std::min(nics(s), sh.local);  // the tree's channels across nodes, one a NIC
      if (multi) {
        t = std::max(t, tree_node_egress(sh.nodes) * S / (ch * nic_bw(s) * 1e9));
        // Each tree edge carries half the buffer per channel each way.
        const auto nodes = nodes_of(c, call.ranks);
        std::vector<std::pair<int, int>> edges;
        for (int tr = 0; tr < 2; ++tr) {
          for (int j = 0; j < sh.nodes; ++j) {
            const int up = dtree(sh.nodes, j, tr).up;
            if (up >= 0) edges.emplace_back(nodes[static_cast<std::size_t>(j)], nodes[static_cast<std::size_t>(up)]);
          }
        }
        // An edge loads both pods' uplinks each way: count it out of and into both.
        std::vector<std::pair<int, int>> both;
        for (const auto& [a, b] : edges) {
          both.emplace_back(a, b);
          both.emplace_back(b, a);
        }
        t = std::max(t, tier_seconds(s, both, S / 2 / ch, ch, call.groups));
      }
      // The tuner's ceilings on a tree's bus bandwidth, twice its algorithm bandwidth (tuning.cc:
      // ratio .5): LL at most llMaxBw; LL128 across nodes at most perChMaxTreeLL128Bw on each of
      // the tree's channels, one a NIC here. As a lower efficiency, so the flow fidelity's bytes
      // carry them too. Then NCCL's measured shortfall at mid sizes (tree_correction).
      if (t > 0) {
        if (p == Protocol::ll)
          out.efficiency = std::min(out.efficiency, t * ll_max_bus_gbps(s, sh.nodes) * 1e9 / (2 * S));
        if (p == Protocol::ll128 && multi) {
          const double per_channel =
              nm.tree_ll128_net_per_channel_gbps[static_cast<std::size_t>(nccl_arch_index(s.gpu))]
                                                [sh.nodes > 2 ? 1 : 0];
          out.efficiency = std::min(out.efficiency, t * ch * per_channel * 1e9 / (2 * S));
        }
      }
      out.efficiency *= tree_tuner_correction(nm, p, S, 23);
      out.bandwidth_s = t / out.efficiency;
      return true;
    }
    case CollectiveAlgo::nvls: {
      if (p != Protocol::simple || !nvls_eligible(c, call)) return false;
      // In-switch reduction at nvls_rate (the GPU count's traffic through the switch). NCCL's
      // tuner predicts its latency plus the bytes at that rate.
      const double rate = nvls_rate(s, sh.n);
      out.latency_s = nm.nvls_latency_us * 1e-6;
      out.tuner_s = out.latency_s + S / rate;
      const NvlsLoops r = nvls_loops(nm, s, sh.n, S, rate);
      out.channels = std::max(1, nm.nvls_channels[static_cast<std::size_t>(nccl_arch_index(s.gpu))]);
      out.bandwidth_s = r.stream_s;
      out.latency_s += r.handoff_s + r.fill_s;
      return true;
    }
    case CollectiveAlgo::nvls_tree: {
      if (p != Protocol::simple || !algo_applies(c, call, a)) return false;
      // tuning.cc: NVLS inside the node once, then a network hop up and down each level of the
      // trees over the nodes.
      const int log2n = static_cast<int>(std::floor(std::log2(sh.nodes)));
      const double tuner_latency_s =
          (nm.nvls_tree_latency_us + 2 * log2n * (net_hop + nm.nvls_tree_net_extra_us)) * 1e-6;
      // Pipelined: each node's NVSwitch reduces its GPUs' buffers and multicasts the result (NVLS's
      // time for the whole buffer, as inside one node), while every GPU's 1/g of the node's sum
      // runs NCCL's two trees over the nodes on its own NIC: a node sends what its places in the
      // trees need (tree_node_egress: the buffer once with 2 nodes, where each tree is one edge,
      // twice from 4), over its k NICs.
      const double rate = nvls_rate(s, sh.local);
      const int k = std::min(nics(s), sh.local);
      double net = tree_node_egress(sh.nodes) * S / (k * nic_bw(s) * 1e9);
      const auto nodes = nodes_of(c, call.ranks);
      std::vector<std::pair<int, int>> both;
      for (int tr = 0; tr < 2; ++tr) {
        for (int j = 0; j < sh.nodes; ++j) {
          const int up = dtree(sh.nodes, j, tr).up;
          if (up < 0) continue;
          both.emplace_back(nodes[static_cast<std::size_t>(j)], nodes[static_cast<std::size_t>(up)]);
          both.emplace_back(nodes[static_cast<std::size_t>(up)], nodes[static_cast<std::size_t>(j)]);
        }
      }
      net = std::max(net, tier_seconds(s, both, S / 2 / k, k, call.groups));
      // NCCL's tuner sees NVLS at its measured rate; the kernel's node part runs NVLS's loops over
      // the whole buffer, its scatter, reduce and gather warps handing off each loop as in one
      // node (the ramp of the NVLS case above; the tree's warps add stages it leaves out). The
      // network's part runs beside the loops: the slower of the two, then the first loop's fill.
      const NvlsLoops r = nvls_loops(nm, s, sh.local, S, rate);
      out.latency_s = tuner_latency_s + r.fill_s;
      out.node_s = r.stream_s + r.handoff_s;
      out.bandwidth_s = std::max(out.node_s, net);
      out.tuner_s = tuner_latency_s + std::max(S / rate, net);
      // From 2.29 the tuner derates NVLSTree as it does trees on Blackwell hosts (x86, as the
      // presets are), over one more size.
      if (nccl_arch_index(s.gpu) >= 3)
        out.tuner_s = tuner_latency_s + std::max(S / rate, net) / tree_tuner_correction(nm, p, S, 24);
      return true;
    }
    case CollectiveAlgo::collnet: {
      if (p != Protocol::simple || !algo_applies(c, call, a)) return false;
      out.latency_s = (nm.collnet_latency_us + 2 * (sh.local - 1) * (intra_hop + nm.ring_nvlink_extra_us[2])) * 1e-6;
      // Reduce-scatter and all-gather inside the node; each GPU's 1/g share goes up to the
      // switch and comes back reduced: a node's NICs carry the buffer once each way.
      double t = 0;
      if (sh.local > 1) t = 2.0 * (sh.local - 1) / sh.local * S / (intra_ring(s, sh.local) * 1e9);
      const double k = std::min(nics(s), sh.local);
      t = std::max(t, S / (k * nic_bw(s) * 1e9));
      out.bandwidth_s = t;
      return true;
    }
    case CollectiveAlgo::automatic:
      return false;
  }
  return false;
}

}  // namespace

int ring_channels(const NcclModel& nm, Protocol p, double bytes, int ranks) {
  const auto i = static_cast<std::size_t>(proto_index(p));
  const double per_channel = nm.max_threads[i] * nm.thread_threshold_bytes[i] * (p == Protocol::ll ? ranks : 1);
  int nc = std::max(1, nm.channels);
  while (nc > 1 && bytes < nc * per_channel) --nc;
  return nc;
}

P2pRamp p2p_ramp(const NcclModel& nm, double peer_bytes, int ranks) {
  P2pRamp r;
  // paths.cc: the p2p channels are the communicator's, rounded up to a power of two; a peer may
  // use all of them on NVLink (2 x its NVLink count, rounded up, capped there).
  int pow2 = 1;
  while (pow2 < std::max(1, nm.channels)) pow2 *= 2;
  r.comm_channels = pow2;
  const int per_peer_max = pow2;
  // enqueue.cc: at least one channel per peer when all ranks run at once.
  int per_peer_min = per_peer_max;
  while (per_peer_min * ranks > r.comm_channels && per_peer_min > 1) per_peer_min /= 2;
  const double chunk = nm.p2p_nvl_chunk_bytes;
  const double min_part = chunk / 8, max_part = chunk * 32;  // one node's part limits
  int nc = static_cast<int>(std::min<double>(per_peer_min, std::max(1.0, std::ceil(peer_bytes / min_part))));
  double part = std::max(min_part, std::ceil(peer_bytes / nc));
  while (part > max_part && nc <= per_peer_max / 2) {
    nc *= 2;
    part = std::ceil(peer_bytes / nc);
  }
  r.channels_per_peer = nc;
  r.part_bytes = std::min(part, peer_bytes / nc);
  r.steps = static_cast<int>(std::max(1.0, std::ceil(r.part_bytes / chunk)));
  return r;
}

double nvls_chunk_bytes(const NcclModel& nm, double bytes, int channels, int heads) {
  const double ops = static_cast<double>(channels) * heads;  // calcCollChunking's concurrentOps
  double chunk = nm.nvls_chunk_bytes;
  if (bytes < 64 * ops * chunk && chunk > 65536) chunk = 65536;
  if (bytes < 8 * ops * chunk && chunk > 32768) chunk = 32768;
  if (bytes < 2 * ops * chunk && chunk > 16384) chunk = 16384;
  return chunk;
}

int ring_slices(const NcclModel& nm, Protocol p, double step_bytes) {
  const auto i = static_cast<std::size_t>(proto_index(p));
  const double chunks = std::max(1.0, std::ceil(step_bytes / nm.chunk_bytes[i]));
  return static_cast<int>(nm.slices_per_chunk[i] * chunks);
}

double ring_bandwidth_gbps(const Cluster& c, const std::vector<GpuId>& ranks) {
  return ring_bw(c.spec, shape_of(c, ranks));
}

bool nvls_eligible(const Cluster& c, const CollectiveCall& call) {
  if (call.op != CollectiveOp::all_reduce || c.spec.nvls_efficiency <= 0 || call.ranks.size() < 2) return false;
  const int node = c.node_of(call.ranks.front());
  for (GpuId g : call.ranks) {
    if (c.node_of(g) != node) return false;
  }
  return true;
}

bool algo_applies(const Cluster& c, const CollectiveCall& call, CollectiveAlgo algo) {
  const bool p2p_op = call.op == CollectiveOp::all_to_all || call.op == CollectiveOp::send_recv;
  switch (algo) {
    case CollectiveAlgo::automatic:
      return true;
    case CollectiveAlgo::p2p:
      return p2p_op;
    case CollectiveAlgo::ring:
      return !p2p_op;
    case CollectiveAlgo::tree:
      return call.op == CollectiveOp::all_reduce;
    case CollectiveAlgo::nvls:
      return nvls_eligible(c, call);
    case CollectiveAlgo::collnet:
      return call.op == CollectiveOp::all_reduce && c.spec.sharp && shape_of(c, call.ranks).nodes > 1;
    case CollectiveAlgo::nvls_tree: {
      // tuning.cc: NVLS needs NVLS-capable switches (nvls_efficiency > 0 on NVLink 4 and later),
      // and NVLSTree is off on one node; NCCL runs it for all-reduces only.
      if (call.op != CollectiveOp::all_reduce || c.spec.nvls_efficiency <= 0 ||
          c.spec.intra != IntraNodeFabric::nvswitch)
        return false;
      const Shape sh = shape_of(c, call.ranks);
      return sh.nodes > 1 && sh.local > 1;
    }
  }
  return false;
}

CollectiveOptions options_for(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& opt) {
  CollectiveOptions o;
  const auto i = static_cast<std::size_t>(call.op);
  o.algo = opt.algo_by_op[i] != CollectiveAlgo::automatic ? opt.algo_by_op[i] : opt.algo;
  o.protocol = opt.protocol_by_op[i] != Protocol::automatic ? opt.protocol_by_op[i] : opt.protocol;
  if (!opt.where_applicable) return o;
  if (o.algo != CollectiveAlgo::automatic && !algo_applies(c, call, o.algo)) o.algo = CollectiveAlgo::automatic;
  if (o.protocol != Protocol::automatic) {
    // Keep the protocol only if some algorithm the call may run can use it.
    const Shape sh = shape_of(c, call.ranks);
    bool runs = false;
    for (CollectiveAlgo a : {CollectiveAlgo::ring, CollectiveAlgo::tree, CollectiveAlgo::nvls, CollectiveAlgo::collnet,
                             CollectiveAlgo::p2p, CollectiveAlgo::nvls_tree}) {
      if (o.algo != CollectiveAlgo::automatic && a != o.algo) continue;
      if (!algo_applies(c, call, a)) continue;
      Candidate k;
      if (candidate(c, call, sh, a, o.protocol, k)) runs = true;
    }
    if (!runs) o.protocol = Protocol::automatic;
  }
  return o;
}

CollectivePlan plan_collective(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& options) {
  const CollectiveOptions opt = options_for(c, call, options);
  const Shape sh = shape_of(c, call.ranks);
  if (sh.n < 1) throw std::invalid_argument("plan_collective: no ranks");
  if (opt.algo != CollectiveAlgo::automatic && !algo_applies(c, call, opt.algo)) {
    throw std::invalid_argument(std::string("algorithm ") + to_string(opt.algo) + " does not apply to " +
                                to_string(call.op) + " on these ranks");
  }
  const bool p2p_op = call.op == CollectiveOp::all_to_all || call.op == CollectiveOp::send_recv;
  std::vector<CollectiveAlgo> algos;
  if (opt.algo != CollectiveAlgo::automatic) {
    algos = {opt.algo};
  } else if (p2p_op) {
    algos = {CollectiveAlgo::p2p};
  } else {
    // As NCCL: NVLS inside an NVLS-capable node, NVLSTree across such nodes; tree and CollNet
    // only across nodes.
    algos = {CollectiveAlgo::ring};
    if (sh.nodes > 1) algos.push_back(CollectiveAlgo::tree);
    if (nvls_eligible(c, call)) algos.push_back(CollectiveAlgo::nvls);
    if (algo_applies(c, call, CollectiveAlgo::nvls_tree)) algos.push_back(CollectiveAlgo::nvls_tree);
    if (algo_applies(c, call, CollectiveAlgo::collnet)) algos.push_back(CollectiveAlgo::collnet);
  }
  std::vector<Protocol> protos{Protocol::ll, Protocol::ll128, Protocol::simple};
  if (opt.protocol != Protocol::automatic) protos = {opt.protocol};
  CollectivePlan best;
  double best_t = std::numeric_limits<double>::infinity();
  for (CollectiveAlgo a : algos) {
    for (Protocol p : protos) {
      Candidate k;
      if (!candidate(c, call, sh, a, p, k)) continue;
      // NCCL chooses by its tuner's prediction, not by what the call will then take.
      const double t = k.tuner_s >= 0 ? k.tuner_s : k.latency_s + k.bandwidth_s;
      if (t < best_t) {  // ties keep the earlier (ring before tree, LL before Simple)
        best_t = t;
        best = CollectivePlan{a, p, k.latency_s, k.efficiency, k.bandwidth_s, t, k.channels, k.rate_cap_gbps, k.node_s};
      }
    }
  }
  if (!std::isfinite(best_t)) {
    throw std::invalid_argument(std::string("protocol ") + to_string(opt.protocol) + " cannot run " +
                                to_string(opt.algo) + " for " + to_string(call.op));
  }
  if (sh.n == 1 || call.bytes <= 0) {
    best.latency_s = 0;
    best.bandwidth_s = 0;
  }
  return best;
}

double group_launch_floor_s(const Cluster& c, int gpus_per_thread, int channels) {
  if (gpus_per_thread <= 1) return 0.0;
  const NcclModel& nm = c.spec.nccl;
  return gpus_per_thread * (nm.group_launch_us_per_gpu + std::max(1, channels) * nm.group_launch_us_per_channel) * 1e-6;
}

CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& opt) {
  const int n = static_cast<int>(call.ranks.size());
  if (n < 1) throw std::invalid_argument("estimate_collective: no ranks");
  CollectiveEstimate e;
  const CollectivePlan plan = plan_collective(c, call, opt);
  e.algo = to_string(plan.algo);
  e.protocol = to_string(plan.protocol);
  e.channels = plan.channels;
  // Iterations pipeline behind the host's launches: the slower of the two sets the pace.
  const double secs =
      std::max(plan.latency_s + plan.bandwidth_s, group_launch_floor_s(c, opt.gpus_per_thread, plan.channels));
  if (secs <= 0) return e;
  e.time = ctwin::seconds(secs);
  e.algbw_gbps = call.bytes / secs / 1e9;
  e.busbw_gbps = e.algbw_gbps * bus_factor(call.op, n);
  return e;
}

CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call, CollectiveAlgo algo) {
  CollectiveOptions o;
  o.algo = algo;
  return estimate_collective(c, call, o);
}

}  // namespace ctwin
