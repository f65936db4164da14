// The DGX H100 cluster the benchmarks run on, written out so benchmarks do not depend on the
// catalog files (which only app/ parses): 8 H100 SXM per node on NVSwitch (450 GB/s per
// direction), one 400 Gb/s NDR NIC (50 GB/s) per GPU.
#pragma once

#include "topology/cluster.hpp"

namespace ctwin {

inline ClusterSpec bench_dgx_h100(int nodes) {
  ClusterSpec s;
  s.name = "dgx-h100";
  s.gpu.name = "H100-SXM";
  s.gpu.bf16_tflops = 989;
  s.gpu.hbm_bytes = 85520809984;
  s.gpu.hbm_gbps = 3350;
  s.gpu.nvlink_gbps = 450;
  s.gpu.pcie_gbps = 64;
  s.gpu.gemm_efficiency = 0.62;
  s.nodes = nodes;
  s.gpus_per_node = 8;
  s.intra_gbps = 450;
  s.intra_latency_us = 0.6;
  s.nic_gbps = 50;
  s.inter_latency_us = 3.0;
  return s;
}

}  // namespace ctwin
