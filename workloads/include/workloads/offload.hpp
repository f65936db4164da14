// Offloading (docs/training.md, "Offloading"): what ZeRO-Offload (Ren et al., ATC'21) and
// ZeRO-Infinity (Rajbhandari et al., SC'21) move off the GPU, where it lands (host memory or
// NVMe, per node), and the rates the step program prices its PCIe copies and CPU Adam with.
#pragma once

#include <string>

#include "topology/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

class JsonObject;

// One GPU's share of its node's offload bandwidths, in bytes (or parameters) per second.
struct OffloadRates {
  double h2d_bytes_per_s = 0;   // host -> device over its PCIe link (shared per switch where the topology says so)
  double d2h_bytes_per_s = 0;   // device -> host
  double nvme_bytes_per_s = 0;  // its share of the node's NVMe aggregate
  double param_fetch_bytes_per_s = 0;  // where the parameters live -> device: PCIe, or the slower of PCIe and NVMe
  double cpu_adam_params_per_s = 0;    // its share of the host's CPU Adam rate
};

OffloadRates offload_rates(const ClusterSpec& cluster, const Offload& off);

// Seconds one GPU's CPU step takes for `shard_params` parameters: CPU Adam at its rate, and with
// the optimizer on NVMe the states read and written back (master + moments, twice) at its NVMe
// share, overlapped with the update (ZeRO-Infinity's overlap-centric design): the slower of the two.
double cpu_step_seconds(double shard_params, const Precision& pr, const Offload& off, const OffloadRates& r);

// Host memory of a node preset (DGX datasheets), 0 where not known.
double preset_host_memory_bytes(const std::string& cluster_name);

// Host memory and NVMe a node holds for offloaded states: the GPUs of the node, each at the
// most any pipeline stage's GPU offloads (an upper bound when a node spans stages), against the
// node's host memory (cfg.offload.host_memory_bytes, 0: no verdict).
struct NodeOffloadMemory {
  double host_bytes = 0;
  double nvme_bytes = 0;
  double host_capacity = 0;  // 0: unknown
  bool host_oom = false;
};
NodeOffloadMemory node_offload_memory(const ModelSpec& m, const TrainingConfig& cfg, const ClusterSpec& cluster);

// /training/offload (offload_params): `zero_stage` checks that optimizer offload has ZeRO >= 1
// and parameter offload ZeRO-3 (-1: not checked, the layout is searched). host_memory_gib
// defaults to the cluster preset's.
Offload read_offload(const JsonObject& o, const ClusterSpec& cluster, int zero_stage);

}  // namespace ctwin
