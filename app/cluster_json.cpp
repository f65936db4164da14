#include "cluster_json.hpp"

namespace ctwin {

nlohmann::ordered_json cluster_to_json(const ClusterSpec& c) {
  const GpuSpec& g = c.gpu;
  nlohmann::ordered_json gpu{{"name", g.name},
                             {"bf16_tflops", g.bf16_tflops},
                             {"fp16_tflops", g.fp16_tflops},
                             {"fp8_tflops", g.fp8_tflops},
                             {"tf32_tflops", g.tf32_tflops},
                             {"hbm_bytes", g.hbm_bytes},
                             {"hbm_gbps", g.hbm_gbps},
                             {"nvlink_gen", g.nvlink_gen},
                             {"nvlink_gbps", g.nvlink_gbps},
                             {"pcie_gen", g.pcie_gen},
                             {"pcie_gbps", g.pcie_gbps},
                             {"gemm_efficiency", g.gemm_efficiency},
                             {"hbm_efficiency", g.hbm_efficiency},
                             {"kernel_launch_us", g.kernel_launch_us},
                             {"source", g.source}};
  return nlohmann::ordered_json{{"name", c.name},
                                {"nodes", c.nodes},
                                {"gpus_per_node", c.gpus_per_node},
                                {"gpu", gpu},
                                {"intra", c.intra == IntraNodeFabric::nvswitch        ? "nvswitch"
                                          : c.intra == IntraNodeFabric::pcie          ? "pcie"
                                          : c.intra == IntraNodeFabric::nvlink_bridge ? "nvlink_bridge"
                                                                                      : "nvlink_mesh"},
                                {"intra_gbps", c.intra_gbps},
                                {"intra_latency_us", c.intra_latency_us},
                                {"intra_efficiency", c.intra_efficiency},
                                {"nvls_efficiency", c.nvls_efficiency},
                                {"nic_gbps", c.nic_gbps},
                                {"inter_latency_us", c.inter_latency_us},
                                {"net_overhead_us", c.net_overhead_us},
                                {"nodes_per_pod", c.nodes_per_pod},
                                {"spines", c.spines},
                                {"oversubscription", c.oversubscription},
                                {"fabric", c.fabric == InterNodeFabric::single_switch    ? "single_switch"
                                           : c.fabric == InterNodeFabric::rail_optimized ? "rail_optimized"
                                           : c.fabric == InterNodeFabric::fat_tree       ? "fat_tree"
                                                                                         : "fat_tree3"},
                                {"core_switches", c.core_switches},
                                {"nics_per_node", c.nics_per_node},
                                {"nic_efficiency", c.nic_efficiency},
                                {"sharp", c.sharp},
                                {"sockets", c.sockets},
                                {"gpus_per_pcie_switch", c.gpus_per_pcie_switch},
                                {"pcie_uplink_gbps", c.pcie_uplink_gbps},
                                {"inter_socket_gbps", c.inter_socket_gbps},
                                {"nvlink_pair_gbps", c.nvlink_pair_gbps}};
}

}  // namespace ctwin
