// Collectives as NCCL runs them. NCCL's algorithms (ring, double binary tree, NVLink SHARP,
// CollNet/SHARP) and protocols (LL, LL128, Simple), chosen per call by a tuner that, like
// NCCL's (src/graph/tuning.cc), predicts every applicable (algorithm, protocol) pair as
// latency + bytes / bandwidth and takes the fastest. estimate_collective is the analytical
// fidelity: an alpha-beta time from the bottleneck along the algorithm's path. The plan it is
// built on (algorithm, protocol, latency, protocol efficiency) is shared with the flow fidelity
// (collective_flow.hpp), which moves the same bytes as flows on the cluster graph.
#pragma once

#include <array>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "sim/time.hpp"
#include "topology/cluster.hpp"

namespace ctwin {

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv };

const char* to_string(CollectiveOp op);

struct CollectiveCall {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::vector<GpuId> ranks;  // members in rank order
  double bytes = 0;          // nccl-tests "size": the per-rank buffer of the operation's output
  // Communicators of this shape running at once on the same nodes, each on its own GPUs (the
  // data-parallel groups of a TP x DP job, one per GPU of a node): they share the nodes' leaf
  // uplinks, which the analytical model charges for all of them. 1: this call alone.
  int groups = 1;
};

struct CollectiveEstimate {
  Time time{};
  double algbw_gbps = 0;  // bytes / time, GB/s
  double busbw_gbps = 0;  // algbw times nccl-tests' bus factor for the op
  std::string algo;       // "ring", "tree", "nvls", "collnet", "p2p", "nvlstree"
  std::string protocol;   // "ll", "ll128", "simple"
  int channels = 0;       // channels the call runs on, as NCCL_DEBUG=INFO's nChannels (0: not known)
};

// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// all_to_all (n-1)/n; broadcast, reduce and send/recv 1.
double bus_factor(CollectiveOp op, int n);

// Per-rank bandwidth a ring over these ranks sustains (GB/s) at the Simple protocol, with one
// ring channel per NIC of a node when the ranks span nodes.
double ring_bandwidth_gbps(const Cluster& c, const std::vector<GpuId>& ranks);

// automatic: the tuner decides. p2p is what all_to_all and send/recv always use.
// nvls_tree: NCCL's NVLSTree, an all-reduce across nodes whose NVSwitches reduce: NVLS inside each
// node, NCCL's two binary trees between the nodes over the NICs.
enum class CollectiveAlgo { automatic, ring, tree, nvls, collnet, p2p, nvls_tree };
enum class Protocol { automatic, ll, ll128, simple };

const char* to_string(CollectiveAlgo a);
const char* to_string(Protocol p);
// The reverse of to_string for the names a user may choose ("auto", "ring", "tree", "nvls",
// "collnet", "nvlstree"; "auto", "ll", "ll128", "simple"); false for any other name.
bool parse_collective_algo(std::string_view name, CollectiveAlgo& out);
bool parse_protocol(std::string_view name, Protocol& out);

constexpr int kCollectiveOps = 7;  // the CollectiveOp values

struct CollectiveOptions {
  CollectiveAlgo algo = CollectiveAlgo::automatic;
  Protocol protocol = Protocol::automatic;
  // Per-operation choices, as NCCL_ALGO="allreduce:tree" does; automatic defers to the above.
  std::array<CollectiveAlgo, kCollectiveOps> algo_by_op{};
  std::array<Protocol, kCollectiveOps> protocol_by_op{};
  // A whole job's setting (a scenario's /network/algo) rather than one call's: where the
  // choice cannot run a call (tree for an all_gather, LL128 off NVLink) the tuner picks instead
  // of the call failing.
  bool where_applicable = false;
  // GPUs one host thread launches on (nccl-tests -g): above 1 an iteration takes at least that
  // many group launches (group_launch_floor_s).
  int gpus_per_thread = 1;
};

// The least time an iteration takes when one thread launches on `gpus_per_thread` GPUs: their
// launches in turn, each NcclModel::group_launch_us_per_gpu plus group_launch_us_per_channel for
// each of the `channels` the call runs on (at least one); 0 for one GPU a thread.
double group_launch_floor_s(const Cluster& c, int gpus_per_thread, int channels);

// The options one call runs under: its operation's entries, else the general ones; with
// where_applicable, choices the call cannot run are dropped back to automatic.
CollectiveOptions options_for(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& opt);

// True when the algorithm can run this call on this cluster (NVLS: an all-reduce within one
// node whose NVSwitch reduces; NVLSTree: an all-reduce across nodes whose NVSwitches reduce; tree:
// an all-reduce; CollNet: an all-reduce across nodes of a fabric with SHARP; p2p: all_to_all and
// send/recv, which run nothing else).
bool algo_applies(const Cluster& c, const CollectiveCall& call, CollectiveAlgo algo);
bool nvls_eligible(const Cluster& c, const CollectiveCall& call);

// What both fidelities run: the algorithm and protocol, the time before bytes move (NCCL's base
// latency plus one hop latency per step), and the fraction of link bandwidth the protocol moves.
//
// The tuner chooses by NCCL's own time model (tuner_s: base latency, one hop per step, bytes at the
// protocol's ceiling over every channel). The time the call then takes (latency_s + bandwidth_s)
// is the ramp: NCCL runs a small call on fewer channels (channels), each moving at most its share
// of the ring's rate, and a ring step that moves more than a chunk pays one hop per slice
// (collective.cpp, ring_ramp); NVLS loops over chunks NCCL sizes by the call, with hand-offs
// between loops (collective.cpp, the nvls case). rate_cap_gbps bounds the bus bytes per second a rank moves over all
// its channels; the flow fidelity turns it into per-flow rate bounds.
struct CollectivePlan {
  CollectiveAlgo algo = CollectiveAlgo::ring;
  Protocol protocol = Protocol::simple;
  double latency_s = 0;
  double efficiency = 1;
  double bandwidth_s = 0;  // analytical: the bytes over the bottleneck at that efficiency
  double tuner_s = 0;      // what NCCL's tuner predicts for this choice
  int channels = 0;        // channels the call runs on (0: not a ring, NVLS, or all_to_all in a node)
  double rate_cap_gbps = std::numeric_limits<double>::infinity();
  double node_s = 0;  // NVLSTree: its NVLS loops in a node on an idle switch (the flows' size)
};

// The ring's channel count for a call of `bytes` (NCCL's nBytes: the whole buffer) on `ranks`
// ranks at a protocol: enqueue.cc drops channels while bytes < channels x threads x threshold.
int ring_channels(const NcclModel& nm, Protocol p, double bytes, int ranks);
// Slices one ring step of `step_bytes` per channel moves: slices per chunk times the chunks.
int ring_slices(const NcclModel& nm, Protocol p, double step_bytes);

// How NCCL splits one peer's share of a one-node all_to_all over NVLink (enqueue.cc
// addP2pToPlan): channels per peer by size, each carrying a part of `steps` chunks.
struct P2pRamp {
  int comm_channels = 1;      // the communicator's p2p channels
  int channels_per_peer = 1;  // channels one peer's share runs on
  double part_bytes = 0;      // bytes one channel moves for that peer
  int steps = 1;              // chunks of P2P_NVL_CHUNKSIZE per part
};
P2pRamp p2p_ramp(const NcclModel& nm, double peer_bytes, int ranks);

// NVLS's chunk for a one-node all-reduce of `bytes` on `channels` channels over `heads` ranks
// (enqueue.cc calcCollChunking: NCCL_NVLS_CHUNKSIZE, halved for calls of few loops).
double nvls_chunk_bytes(const NcclModel& nm, double bytes, int channels, int heads);

// Throws std::invalid_argument when a forced algorithm or protocol cannot run the call.
CollectivePlan plan_collective(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& opt = {});

CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call, const CollectiveOptions& opt);
// `automatic` lets the tuner pick (NVLS inside an H100+ node for large all-reduces, as NCCL does).
CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call,
                                       CollectiveAlgo algo = CollectiveAlgo::automatic);

}  // namespace ctwin
