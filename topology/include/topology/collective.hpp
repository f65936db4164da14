// Collectives as NCCL runs them, reduced to a time. This is the analytical fidelity: an
// alpha-beta time from the bottleneck along the algorithm's path.
#pragma once

#include <string>
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
};

struct CollectiveEstimate {
  Time time{};
  double algbw_gbps = 0;  // bytes / time, GB/s
  double busbw_gbps = 0;  // algbw times nccl-tests' bus factor for the op
  std::string algo;       // "ring", ...
  std::string protocol;   // "simple", ...
};

// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// all_to_all (n-1)/n; broadcast, reduce and send/recv 1.
double bus_factor(CollectiveOp op, int n);

// Per-rank bandwidth a ring over these ranks sustains (GB/s), with every NIC of a node used
// by one ring channel when the ranks span nodes.
double ring_bandwidth_gbps(const Cluster& c, const std::vector<GpuId>& ranks);

enum class CollectiveAlgo { automatic, ring, nvls };

// True when NVLink SHARP can run this call: an all-reduce within one node whose NVSwitch has it.
bool nvls_eligible(const Cluster& c, const CollectiveCall& call);

// `automatic` picks NVLS where eligible (as NCCL does on H100 for all-reduce), else ring.
CollectiveEstimate estimate_collective(const Cluster& c, const CollectiveCall& call,
                                       CollectiveAlgo algo = CollectiveAlgo::automatic);

}  // namespace ctwin
