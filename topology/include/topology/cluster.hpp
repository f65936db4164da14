// A cluster as the simulator sees it: nodes of GPUs joined inside a node by NVLink
// (through NVSwitch) or PCIe, and across nodes by one NIC per GPU into a fabric.
#pragma once

#include <string>
#include <vector>

#include "sim/id.hpp"
#include "topology/catalog.hpp"
#include "topology/nccl_model.hpp"

namespace ctwin {

struct GpuTag;
using GpuId = Id<GpuTag>;

// How GPUs inside a node reach each other: through NVSwitch; over PCIe only (PCIe switches under
// CPU root complexes, sockets joined by an inter-socket link); PCIe plus NVLink bridges joining
// GPU pairs (H100 PCIe); or a direct all-to-all NVLink mesh (HGX 4-GPU boards).
enum class IntraNodeFabric { nvswitch, pcie, nvlink_bridge, nvlink_mesh };
inline constexpr auto intra_fabric_names =
    make_names<IntraNodeFabric>({{IntraNodeFabric::nvswitch, "nvswitch"},
                                 {IntraNodeFabric::pcie, "pcie"},
                                 {IntraNodeFabric::nvlink_bridge, "nvlink_bridge"},
                                 {IntraNodeFabric::nvlink_mesh, "nvlink_mesh"}});

// The inter-node fabric: every NIC on one switch; a rail-optimised two-tier leaf-spine (NIC r of
// every node in a pod on leaf r of that pod); a plain two-tier fat-tree (all NICs of a node on the
// same leaf); or a three-tier fat-tree (pods of leaves and spines joined by a core layer).
enum class InterNodeFabric { single_switch, rail_optimized, fat_tree, fat_tree3 };
inline constexpr auto inter_fabric_names =
    make_names<InterNodeFabric>({{InterNodeFabric::single_switch, "single_switch"},
                                 {InterNodeFabric::rail_optimized, "rail_optimized"},
                                 {InterNodeFabric::fat_tree, "fat_tree"},
                                 {InterNodeFabric::fat_tree3, "fat_tree3"}});

// The host CPU's maker, as NCCL reads it (src/graph/topo.cc): its tuner takes a multi-node
// call's LL ceiling (llMaxBws) and the network post overhead (NCCL_NET_OVERHEAD) from it.
// NCCL has a row for AMD and one for everything else (Intel, Arm, POWER).
enum class HostCpu { intel, amd, arm };
inline constexpr auto host_cpu_names =
    make_names<HostCpu>({{HostCpu::intel, "intel"}, {HostCpu::amd, "amd"}, {HostCpu::arm, "arm"}});

const char* to_string(IntraNodeFabric f);
const char* to_string(InterNodeFabric f);
const char* to_string(HostCpu c);
// NCCL's network post overhead for a host CPU (tuning.cc getNetOverhead): 2 us on AMD, else 1.
double nccl_net_overhead_us(HostCpu c);

// A link slower than it was built: a cable running at a lower rate, a port retransmitting, a
// flapping link's goodput. `link` names one direction as ClusterNetwork::link_name does (and as
// the busiest-links report prints it); only the flow fidelity routes over links, so only it sees
// one.
struct DegradedLink {
  std::string link;               // "node3.nic5 -> pod0.leaf5"
  double bandwidth_fraction = 1;  // of the link's capacity, in (0, 1]
};

struct ClusterSpec {
  std::string name = "custom";  // preset name, for reports
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  IntraNodeFabric intra = IntraNodeFabric::nvswitch;
  double intra_gbyte_per_s = 0;  // per GPU per direction into the node fabric (GB/s)
  double intra_latency_us = 0;   // one hop GPU -> GPU inside a node
  double nic_gbyte_per_s = 50;   // per GPU per direction (NDR InfiniBand: 400 Gb/s = 50 GB/s)
  double inter_latency_us = 0;   // one hop GPU -> GPU across nodes
  // Host-side cost of posting one network step on a multi-node ring (NCCL's getNetOverhead,
  // NCCL_NET_OVERHEAD): 1 us on Intel hosts, 2 us on AMD hosts (DGX A100's EPYC), per tuning.cc;
  // follows host_cpu unless set.
  double net_overhead_us = 1.0;
  HostCpu host_cpu = HostCpu::intel;
  // Inter-node fabric, rail-optimised two-tier: NIC r of every node in a pod plugs into leaf r of
  // that pod; every leaf connects to every spine. Leaf uplinks carry nodes_per_pod x nic_gbyte_per_s
  // divided by the oversubscription ratio, split over the spines.
  // Fraction of the node fabric's line rate NCCL's Simple protocol moves (its per-chunk flags
  // and synchronisation): 370 of 450 GB/s on NVLink 4 per NCCL's maintainer (nccl-tests #212).
  double intra_efficiency = 1.0;
  // NVLink SHARP (NVLS, NVSwitch 3 and later): all-reduce algorithm bandwidth as a fraction of
  // the per-GPU line rate (275 of 450 GB/s on a DGX H100, same source); 0 where there is none.
  double nvls_efficiency = 0.0;
  // Nodes under one set of leaves (a pod): 0 derives it from the leaf switch's radix, the
  // oversubscription and the NICs a node plugs into one leaf (pod_nodes below).
  int nodes_per_pod = 0;
  // Ports of a leaf switch: 0 takes the switch generation matching the NIC speed (leaf_radix_of).
  int leaf_radix = 0;
  int spines = 4;                 // spine switches (per pod in a three-tier fat-tree)
  int core_switches = 4;          // core layer of a three-tier fat-tree
  double oversubscription = 1.0;  // leaf downlink over uplink capacity (and spine over core)
  InterNodeFabric fabric = InterNodeFabric::rail_optimized;
  int nics_per_node = 0;  // 0: one NIC per GPU; fewer: GPUs share NICs in order (2 GPUs per NIC, ...)
  // Fraction of NIC line rate NCCL's transport moves: 46-48 of 50 GB/s on NDR per NVIDIA's NCCL
  // team (nccl-tests #290); HDR reaches 24 of 25 GB/s (nccl #1048). Applied to every fabric link.
  double nic_efficiency = 0.96;
  bool sharp = false;  // the switches reduce in-network (SHARP): NCCL's CollNet applies
  // PCIe topology inside a node (pcie, nvlink_bridge and nvlink_mesh nodes).
  int sockets = 2;                      // CPU root complexes, GPUs split evenly
  int gpus_per_pcie_switch = 2;         // GPUs (and their NICs) under one PCIe switch
  double pcie_uplink_gbyte_per_s = 0;   // PCIe switch -> CPU, per direction (0: the GPU's PCIe rate)
  double inter_socket_gbyte_per_s = 0;  // CPU <-> CPU link, per direction (0: none modelled)
  double nvlink_pair_gbyte_per_s = 0;   // NVLink bridge or mesh: per GPU pair, per direction
  // Share of those NVLink pair links' line rate NCCL moves (a profile's nvlink_efficiency, set by
  // the h100-pcie preset and apply_profile); 0: the GPU generation's, nvlink_efficiency(gen).
  double nvlink_pair_efficiency = 0;
  // NCCL's latency tables and protocol efficiencies (defaults: NCCL's tuning.cc); a profile may
  // replace them. Every collective estimate and flow run on this cluster reads them.
  NcclModel nccl;
  std::vector<DegradedLink> degraded_links;  // flow fidelity only

  int nics() const { return nics_per_node > 0 ? nics_per_node : gpus_per_node; }
  // intra_efficiency, 0 read as 1 (the line rate); and the node fabric's per-GPU rate NCCL's
  // Simple protocol moves at it, GB/s.
  double intra_eff() const { return intra_efficiency > 0 ? intra_efficiency : 1.0; }
  double intra_effective_gbyte_per_s() const { return intra_gbyte_per_s * intra_eff(); }
};

// Ports of one leaf switch: leaf_radix, else NVIDIA's InfiniBand switch of the NIC's generation:
// up to 200 Gb/s (HDR) the Quantum QM8700's 40 ports, up to 400 Gb/s (NDR) the Quantum-2
// QM9700's 64, faster (XDR, 800 Gb/s) the Quantum-X800 Q3400's 144.
int leaf_radix_of(const ClusterSpec& s);
// Nodes per pod: nodes_per_pod, else what one leaf holds. A leaf gives r/(r+1) of its ports to
// nodes at r:1 oversubscription (the rest are uplinks); a rail leaf (rail_optimized, fat_tree3)
// takes one NIC of each node, a fat_tree leaf all of a node's NICs. At least 1.
int pod_nodes(const ClusterSpec& s);
// Fabric settings that cannot change any result on this cluster, one sentence each saying why
// (one node; a single switch has no pods, spines or uplinks; every node in one pod, so nothing
// crosses a spine; core switches outside a multi-pod fat_tree3). Settings are judged against
// ClusterSpec's defaults.
std::vector<std::string> fabric_warnings(const ClusterSpec& s);

struct Cluster {
  ClusterSpec spec;
  int gpu_count() const { return spec.nodes * spec.gpus_per_node; }
  int node_of(GpuId g) const { return static_cast<int>(g.value) / spec.gpus_per_node; }
};

Cluster build_cluster(const ClusterSpec& spec);

}  // namespace ctwin

namespace ctwin {

// Named cluster presets (dgx-a100, dgx-h100, hgx-h200, dgx-b200, l40s-pcie), `nodes` of them.
// Returns false if the name is unknown. GPUs are taken from the catalog by name.
// NCCL's effective NVLink bandwidth over line rate for an NVLink generation (0.8, 0.824, 0.802).
double nvlink_efficiency(int gen);
// What NCCL moves over one NVLink bridge or mesh link, per direction (GB/s): nvlink_pair_gbyte_per_s
// (else intra_gbyte_per_s) times nvlink_pair_efficiency (else the generation's nvlink_efficiency).
double nvlink_pair_effective_gbps(const ClusterSpec& s);
bool preset_cluster(const std::string& name, int nodes, const GpuCatalog& gpus, ClusterSpec& out);
// The preset names, for messages and --help.
std::vector<std::string> preset_cluster_names();

}  // namespace ctwin
