// Offloading's rates, node memory and scenario keys (workloads/offload.hpp).
#include "workloads/offload.hpp"

#include <algorithm>

#include "sim/params.hpp"
#include "workloads/memory.hpp"
#include "workloads/training_params.hpp"

namespace ctwin {

OffloadRates offload_rates(const ClusterSpec& cluster, const Offload& off) {
  OffloadRates r;
  const double gpn = std::max(1, cluster.gpus_per_node);
  // Pinned copies reach pcie_efficiency of the link; pageable ones stage through a bounce buffer.
  double pcie = cluster.gpu.pcie_gbyte_per_s * 1e9 * off.pcie_efficiency * (off.pin_memory ? 1.0 : 0.5);
  if (cluster.intra != IntraNodeFabric::nvswitch && cluster.pcie_uplink_gbyte_per_s > 0) {
    // The GPUs under one PCIe switch copy at once and share its uplink to the CPU.
    const double sharing = std::max(1, std::min(cluster.gpus_per_pcie_switch, cluster.gpus_per_node));
    pcie = std::min(pcie, cluster.pcie_uplink_gbyte_per_s * 1e9 * off.pcie_efficiency / sharing);
  }
  r.h2d_bytes_per_s = r.d2h_bytes_per_s = pcie;
  r.nvme_bytes_per_s = off.nvme_gbyte_per_s * 1e9 / gpn;
  r.param_fetch_bytes_per_s = off.params == Offload::Device::nvme ? std::min(pcie, r.nvme_bytes_per_s) : pcie;
  r.cpu_adam_params_per_s = off.cpu_adam_params_per_s / gpn;
  return r;
}

double cpu_step_seconds(double shard_params, const Precision& pr, const Offload& off, const OffloadRates& r) {
  double t = shard_params / r.cpu_adam_params_per_s;
  if (off.optimizer == Offload::Device::nvme) {
    const double swap = 2 * shard_params * (pr.master_bytes + pr.optimizer_state_bytes);
    t = std::max(t, swap / r.nvme_bytes_per_s);
  }
  return t;
}

double preset_host_memory_bytes(const std::string& cluster_name) {
  constexpr double gib = 1024.0 * 1024 * 1024;
  // NVIDIA DGX A100 datasheet: 1 TB system memory (2 TB with the 640 GB GPU option);
  // DGX H100 datasheet: 2 TB.
  if (cluster_name == "dgx-a100") return 1024 * gib;
  if (cluster_name == "dgx-h100") return 2048 * gib;
  return 0;
}

NodeOffloadMemory node_offload_memory(const ModelSpec& m, const TrainingConfig& cfg, const ClusterSpec& cluster) {
  NodeOffloadMemory n;
  double host = 0, nvme = 0;
  for (int s = 0; s < std::max(1, cfg.parallel.pp); ++s) {
    const MemoryBreakdown mb = estimate_stage_memory(m, cfg, cluster.gpu.hbm_bytes, s);
    host = std::max(host, mb.host_bytes);
    nvme = std::max(nvme, mb.nvme_bytes);
  }
  const double gpn = std::max(1, cluster.gpus_per_node);
  n.host_bytes = host * gpn;
  n.nvme_bytes = nvme * gpn;
  n.host_capacity = cfg.offload.host_memory_bytes;
  n.host_oom = n.host_capacity > 0 && n.host_bytes > n.host_capacity;
  return n;
}

Offload read_offload(const JsonObject& o, const ClusterSpec& cluster, int zero_stage) {
  const ParamReader r(o, offload_params);
  Offload f;
  f.optimizer = r.choice("optimizer", offload_device_names);
  f.params = r.choice("params", offload_device_names);
  f.pin_memory = r.boolean("pin_memory");
  f.pcie_efficiency = r.number("pcie_efficiency");
  f.nvme_gbyte_per_s = r.bandwidth("nvme_gbyte_per_s");
  f.cpu_adam_params_per_s = r.number("cpu_adam_gparams_per_s") * 1e9;
  f.delayed_param_update = r.boolean("delayed_param_update");
  constexpr double gib = 1024.0 * 1024 * 1024;
  f.host_memory_bytes = r.number("host_memory_gib", preset_host_memory_bytes(cluster.name) / gib) * gib;
  if (zero_stage >= 0 && f.optimizer != Offload::Device::none && zero_stage < 1) {
    o.fail("optimizer", "found \"" + std::string(offload_device_names.name(f.optimizer)) + "\" with zero_stage 0",
           "/training/parallelism/zero_stage 1, 2 or 3 (DeepSpeed offloads the optimizer of ZeRO 1 to 3), or "
           "\"none\"");
  }
  if (zero_stage >= 0 && f.params != Offload::Device::none && zero_stage < 3) {
    o.fail("params",
           "found \"" + std::string(offload_device_names.name(f.params)) + "\" with zero_stage " +
               std::to_string(zero_stage),
           "/training/parallelism/zero_stage 3 (only ZeRO-3 partitions the parameters), or \"none\"");
  }
  if (f.delayed_param_update && f.optimizer == Offload::Device::none) {
    o.fail("delayed_param_update", "found true with optimizer \"none\"",
           "optimizer \"cpu\" or \"nvme\" (DPU delays the CPU step), or false");
  }
  if (cluster.gpu.pcie_gbyte_per_s <= 0 && f.active()) {
    o.fail("optimizer", "found offloading, but " + cluster.gpu.name + " has no pcie_gbyte_per_s",
           "a GPU with pcie_gbyte_per_s (/catalog/gpus/NAME)");
  }
  return f;
}

}  // namespace ctwin
