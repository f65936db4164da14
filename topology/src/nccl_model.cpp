#include "topology/nccl_model.hpp"

namespace ctwin {

// src/graph/tuning.cc (NCCL 2.23 and later); the comments in nccl_model.hpp say which is which.
NcclModel::NcclModel() {
  base_ring_us = {6.6, 14.0, 8.4};
  base_tree_us = {6.8, 14.0, 8.4};
  ring_nvlink_extra_us = {0.0, 1.3, 2.8};
  ring_pcie_extra_us = {0.0, 1.5, 4.7};
  ring_net_extra_us = {0.0, 1.3, 11.3};
  tree_nvlink_extra_us = {0.0, 0.65, 3.4};
  tree_net_extra_us = {2.3, 5.8, 11.3};
  nvls_latency_us = 25.0;
  nvls_tree_latency_us = 25.0;
  nvls_tree_net_extra_us = 18.2;  // 20.9 less the link's LL 2.7
  collnet_latency_us = 3.7 + 31.0;
  simple_net_overhead_factor = 3;
  ring_ll_efficiency = 0.25;
  ring_ll_copy_efficiency = 1.0 / 3;
  ring_ll128_efficiency = 0.92;
  tree_efficiency = 0.92;
  tree_ll_efficiency = 1 / 3.8;
  tree_ll128_efficiency = 120.0 / 128;
  tree_ll128_intra_efficiency = 7.0 / 9;
  channels = 24;
  max_threads = {512, 640, 512};
  thread_threshold_bytes = {8, 8, 64};
  chunk_bytes = {32768, 576000, 2097152};
  slices_per_chunk = {1, 1, 2};
  ll_max_gbps = {39.0, 87.7, 141.0, 282.0};
  ll_max_net_gbps = {{{39.0, 20.4}, {22.5, 19.0}}};
  tree_ll128_net_per_channel_gbps = {{{20.0, 20.0}, {20.0, 20.0}, {36.7, 29.0}, {2 * 36.7, 2 * 29.0}}};
  ring_ll128_per_channel_gbps = {20.0, 20.0, 36.7, 40.0};
  tree_correction = {{
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
  }};
  ring_plateau_latency_factor = {1.9, 1.4, 1.4, 1.4};
  p2p_nvl_chunk_bytes = 524288;
  nvls_channels = {0, 0, 16, 24};
  nvls_chunk_bytes = 131072;
  nvls_fill_loops_per_rank = 0.25;
  nvls_handoff_hops_per_rank = 0.29;
  group_launch_us_per_gpu = 4.42;
  group_launch_us_per_channel = 0.033;
}

int nccl_arch_index(const GpuSpec& gpu) {
  if (gpu.nvlink_gen > 0) return gpu.nvlink_gen >= 5 ? 3 : gpu.nvlink_gen == 4 ? 2 : gpu.nvlink_gen == 3 ? 1 : 0;
  return gpu.pcie_gen >= 6 ? 3 : gpu.pcie_gen == 5 ? 2 : 1;
}

}  // namespace ctwin
