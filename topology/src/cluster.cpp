#include "topology/cluster.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace ctwin {

const char* to_string(IntraNodeFabric f) { return intra_fabric_names.name(f); }

const char* to_string(InterNodeFabric f) { return inter_fabric_names.name(f); }

const char* to_string(HostCpu c) { return host_cpu_names.name(c); }

double nccl_net_overhead_us(HostCpu c) { return c == HostCpu::amd ? 2.0 : 1.0; }

int leaf_radix_of(const ClusterSpec& s) {
  if (s.leaf_radix > 0) return s.leaf_radix;
  const double gbit = s.nic_gbyte_per_s * 8;  // line rate in Gb/s
  if (gbit <= 200) return 40;                 // Quantum QM8700 (HDR)
  if (gbit <= 400) return 64;                 // Quantum-2 QM9700 (NDR)
  return 144;                                 // Quantum-X800 Q3400 (XDR)
}

int pod_nodes(const ClusterSpec& s) {
  if (s.nodes_per_pod > 0) return s.nodes_per_pod;
  const double r = std::max(1.0, s.oversubscription);
  const int down = static_cast<int>(leaf_radix_of(s) * r / (r + 1) + 1e-9);
  const int per_node = s.fabric == InterNodeFabric::fat_tree ? std::max(1, std::min(s.nics(), s.gpus_per_node)) : 1;
  return std::max(1, down / per_node);
}

std::vector<std::string> fabric_warnings(const ClusterSpec& s) {
  const ClusterSpec d;
  std::vector<std::string> changed;  // the fabric keys set away from their defaults
  if (s.oversubscription > 1) changed.emplace_back("oversubscription");
  if (s.nodes_per_pod != d.nodes_per_pod) changed.emplace_back("nodes_per_pod");
  if (s.leaf_radix != d.leaf_radix) changed.emplace_back("leaf_radix");
  if (s.spines != d.spines) changed.emplace_back("spines");
  if (s.core_switches != d.core_switches) changed.emplace_back("core_switches");
  auto list = [](const std::vector<std::string>& keys) {
    std::string out;
    for (const auto& k : keys) out += (out.empty() ? "/cluster/" : ", /cluster/") + k;
    return out;
  };
  std::vector<std::string> w;
  if (s.nodes <= 1) {
    if (s.sharp) changed.emplace_back("sharp");
    if (!changed.empty()) w.push_back(list(changed) + ": no effect on one node (no inter-node fabric)");
    return w;
  }
  if (s.fabric == InterNodeFabric::single_switch) {
    std::erase(changed, "core_switches");
    if (!changed.empty())
      w.push_back(list(changed) + ": no effect with fabric single_switch (every NIC on one non-blocking switch)");
    if (s.core_switches != d.core_switches)
      w.emplace_back("/cluster/core_switches: no effect outside fabric fat_tree3");
    return w;
  }
  const int per_pod = pod_nodes(s);
  if (per_pod >= s.nodes) {
    std::vector<std::string> idle;
    for (const char* k : {"oversubscription", "spines", "core_switches"}) {
      if (std::find(changed.begin(), changed.end(), k) != changed.end()) idle.emplace_back(k);
    }
    if (!idle.empty()) {
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    ": no effect: all %d nodes fit in one pod of %d (leaf radix %d), so no traffic crosses a spine; "
                    "set /cluster/nodes_per_pod or /cluster/leaf_radix for a smaller pod",
                    s.nodes, per_pod, leaf_radix_of(s));
      w.push_back(list(idle) + buf);
    }
  } else if (s.core_switches != d.core_switches && s.fabric != InterNodeFabric::fat_tree3) {
    w.emplace_back("/cluster/core_switches: no effect outside fabric fat_tree3");
  }
  return w;
}

Cluster build_cluster(const ClusterSpec& spec) {
  if (spec.nodes < 1 || spec.gpus_per_node < 1) throw std::invalid_argument("build_cluster: empty cluster");
  if (!(spec.intra_gbyte_per_s > 0) && spec.gpus_per_node > 1 && !(spec.gpu.pcie_gbyte_per_s > 0))
    throw std::invalid_argument("build_cluster: no intra-node bandwidth");
  if (spec.nics_per_node < 0 || spec.nics_per_node > spec.gpus_per_node)
    throw std::invalid_argument("build_cluster: nics_per_node must be 0 (one per GPU) up to gpus_per_node");
  return Cluster{spec};
}

}  // namespace ctwin
