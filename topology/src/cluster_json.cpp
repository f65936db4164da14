#include "topology/cluster_json.hpp"

#include <algorithm>
#include <functional>

#include "sim/error.hpp"
#include "topology/catalog_json.hpp"
#include "topology/network.hpp"

namespace ctwin {
namespace {

// /cluster/degraded_links: each names a link of this cluster's graph (one direction).
std::vector<DegradedLink> read_degraded_links(const JsonObject& o, const ClusterSpec& c) {
  const Json& list = o.raw("degraded_links");
  if (!list.is_array()) {
    o.fail("degraded_links", std::string("a ") + list.type_name(), "a list of {link, bandwidth_fraction} objects");
  }
  ClusterSpec plain = c;
  plain.degraded_links.clear();
  const Cluster built = build_cluster(plain);
  Engine engine;
  FlowNetwork net(engine);
  const ClusterNetwork routes(built, net);
  const std::vector<std::string> names = routes.link_names();
  std::vector<DegradedLink> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = o.child("degraded_links") + "/" + std::to_string(i);
    if (!list[i].is_object()) {
      JsonObject(Json::object(), o.child("degraded_links"), o.file())
          .fail(std::to_string(i), std::string("a ") + list[i].type_name(), "an object {link, bandwidth_fraction}");
    }
    const JsonObject e(list[i], path, o.file());
    const ParamReader r(e, degraded_link_params);
    DegradedLink d{r.string("link"), r.number("bandwidth_fraction")};
    if (!std::binary_search(names.begin(), names.end(), d.link)) {
      // A suggestion from the nearest names where the cluster is small enough to search them all.
      const std::string guess = names.size() <= 20000 ? closest(d.link, names) : std::string();
      e.fail("link",
             "no link \"" + d.link + "\" in this cluster" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "a link as `ctwin run` names it under \"busiest links\" (at /network/fidelity \"flow\"): "
             "\"nodeN.gpuK -> nodeN.nvswitch\", \"nodeN.nicK -> podP.leafK\", ...");
    }
    for (const auto& seen : out) {
      if (seen.link == d.link) e.fail("link", "\"" + d.link + "\" listed twice", "each link once");
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

ClusterSpec cluster_from_json(const JsonObject& o, const CatalogEntries& gpus_json,
                              const std::function<void(ClusterSpec&)>& link_defaults,
                              std::vector<std::string>* warnings) {
  const ParamReader r(o, cluster_params);
  GpuCatalog gpus;
  auto gpu_named = [&](const std::string& name, const std::string& key) {
    auto it = gpus_json.find(name);
    if (it == gpus_json.end()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : gpus_json) names.push_back(k);
      const std::string guess = closest(name, names);
      o.fail(key, "unknown GPU \"" + name + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "one of " + list_of(names) + ", or a new entry under /catalog/gpus");
    }
    return gpu_from_json(JsonObject(it->second.value, it->second.path, it->second.file), name, warnings);
  };
  for (const auto& [name, e] : gpus_json) gpus.gpus[name] = gpu_named(name, "gpu");
  const int nodes = static_cast<int>(r.integer("nodes"));
  ClusterSpec c;
  if (o.has("preset")) {
    const std::string preset = r.string("preset");
    if (!preset_cluster(preset, nodes, gpus, c)) {
      const auto names = preset_cluster_names();
      const std::string guess = closest(preset, names);
      o.fail("preset",
             "unknown cluster preset \"" + preset + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "one of " + list_of(names));
    }
  } else {
    if (!o.has("gpu"))
      o.fail("gpu", "missing required key (no preset given)", "a GPU name from the catalog, or a preset");
    c.name = "custom";
    c.nodes = nodes;
    c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node"));
  }
  if (o.has("gpu")) {
    // A catalog name, or a whole GPU description (as `ctwin cluster --write` emits).
    if (o.raw("gpu").is_object()) {
      const JsonObject g = o.object("gpu");
      const std::string name = g.string("name");
      Json fields = o.raw("gpu");
      fields.erase("name");
      c.gpu = gpu_from_json(JsonObject(fields, g.path(), o.file()), name, warnings);
    } else {
      c.gpu = gpu_named(r.string("gpu"), "gpu");
    }
    if (!o.has("preset")) {
      // The fabric first (the user's, else NVSwitch where the GPU has NVLink): the generation's
      // link figures depend on it.
      if (o.has("intra")) {
        c.intra = r.choice("intra", intra_fabric_names);
      } else {
        c.intra = c.gpu.nvlink_gbyte_per_s > 0 ? IntraNodeFabric::nvswitch : IntraNodeFabric::pcie;
      }
      c.intra_gbyte_per_s = c.intra == IntraNodeFabric::nvswitch ? c.gpu.nvlink_gbyte_per_s : c.gpu.pcie_gbyte_per_s;
      c.nic_gbyte_per_s = 50;
    }
  }
  // NCCL's tables, link efficiencies and hop latencies (a calibration profile's), once the GPU
  // and fabric are known; the keys read below override any of them.
  if (link_defaults) link_defaults(c);
  c.name = r.string("name", c.name);
  c.intra_efficiency = r.number("intra_efficiency", c.intra_efficiency);
  c.nvls_efficiency = r.number("nvls_efficiency", c.nvls_efficiency);
  c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", c.gpus_per_node));
  if (o.has("intra")) c.intra = r.choice("intra", intra_fabric_names);
  c.intra_gbyte_per_s = r.bandwidth("intra_gbyte_per_s", c.intra_gbyte_per_s, warnings);
  c.intra_latency_us = r.number("intra_latency_us", c.intra_latency_us);
  c.nic_gbyte_per_s = r.bandwidth("nic_gbit_per_s", c.nic_gbyte_per_s, warnings);
  c.inter_latency_us = r.number("inter_latency_us", c.inter_latency_us);
  if (o.has("host_cpu")) {
    c.host_cpu = r.choice("host_cpu", host_cpu_names);
    c.net_overhead_us = nccl_net_overhead_us(c.host_cpu);
  }
  c.net_overhead_us = r.number("net_overhead_us", c.net_overhead_us);
  c.nodes_per_pod = static_cast<int>(r.integer("nodes_per_pod", c.nodes_per_pod));
  c.leaf_radix = static_cast<int>(r.integer("leaf_radix", c.leaf_radix));
  c.spines = static_cast<int>(r.integer("spines", c.spines));
  c.oversubscription = r.number("oversubscription", c.oversubscription);
  if (o.has("fabric")) c.fabric = r.choice("fabric", inter_fabric_names);
  c.core_switches = static_cast<int>(r.integer("core_switches", c.core_switches));
  c.nics_per_node = static_cast<int>(r.integer("nics_per_node", c.nics_per_node));
  c.nic_efficiency = r.number("nic_efficiency", c.nic_efficiency);
  c.sharp = r.boolean("sharp", c.sharp);
  c.sockets = static_cast<int>(r.integer("sockets", c.sockets));
  c.gpus_per_pcie_switch = static_cast<int>(r.integer("gpus_per_pcie_switch", c.gpus_per_pcie_switch));
  c.pcie_uplink_gbyte_per_s = r.bandwidth("pcie_uplink_gbyte_per_s", c.pcie_uplink_gbyte_per_s, warnings);
  c.inter_socket_gbyte_per_s = r.bandwidth("inter_socket_gbyte_per_s", c.inter_socket_gbyte_per_s, warnings);
  c.nvlink_pair_gbyte_per_s = r.bandwidth("nvlink_pair_gbyte_per_s", c.nvlink_pair_gbyte_per_s, warnings);
  if (o.has("degraded_links")) c.degraded_links = read_degraded_links(o, c);
  if (c.nics_per_node > c.gpus_per_node) {
    o.fail("nics_per_node",
           "found " + std::to_string(c.nics_per_node) + ", more NICs than the node's " +
               std::to_string(c.gpus_per_node) + " GPUs",
           "0 (one per GPU) or at most gpus_per_node");
  }
  return c;
}

nlohmann::ordered_json cluster_to_json(const ClusterSpec& c) {
  const GpuSpec& g = c.gpu;
  nlohmann::ordered_json gpu{{"name", g.name},
                             {"bf16_tflops", g.bf16_tflops},
                             {"fp16_tflops", g.fp16_tflops},
                             {"fp8_tflops", g.fp8_tflops},
                             {"fp4_tflops", g.fp4_tflops},
                             {"int8_tops", g.int8_tops},
                             {"tf32_tflops", g.tf32_tflops},
                             {"hbm_bytes", g.hbm_bytes},
                             {"hbm_gbyte_per_s", g.hbm_gbyte_per_s},
                             {"nvlink_gen", g.nvlink_gen},
                             {"nvlink_gbyte_per_s", g.nvlink_gbyte_per_s},
                             {"pcie_gen", g.pcie_gen},
                             {"pcie_gbyte_per_s", g.pcie_gbyte_per_s},
                             {"gemm_efficiency", g.gemm_efficiency},
                             {"fp8_gemm_efficiency", g.fp8_gemm_efficiency},
                             {"hbm_efficiency", g.hbm_efficiency},
                             {"kernel_launch_us", g.kernel_launch_us},
                             {"source", g.source},
                             {"tdp_w", g.tdp_w},
                             {"idle_w", g.idle_w},
                             {"gpu_hour_usd", g.gpu_hour_usd},
                             {"power_source", g.power_source},
                             {"price_source", g.price_source}};
  nlohmann::ordered_json out{{"name", c.name},
                             {"nodes", c.nodes},
                             {"gpus_per_node", c.gpus_per_node},
                             {"gpu", gpu},
                             {"intra", to_string(c.intra)},
                             {"intra_gbyte_per_s", c.intra_gbyte_per_s},
                             {"intra_latency_us", c.intra_latency_us},
                             {"intra_efficiency", c.intra_efficiency},
                             {"nvls_efficiency", c.nvls_efficiency},
                             {"nic_gbit_per_s", 8 * c.nic_gbyte_per_s},
                             {"inter_latency_us", c.inter_latency_us},
                             {"host_cpu", to_string(c.host_cpu)},
                             {"net_overhead_us", c.net_overhead_us},
                             {"nodes_per_pod", c.nodes_per_pod},
                             {"leaf_radix", c.leaf_radix},
                             {"spines", c.spines},
                             {"oversubscription", c.oversubscription},
                             {"fabric", to_string(c.fabric)},
                             {"core_switches", c.core_switches},
                             {"nics_per_node", c.nics_per_node},
                             {"nic_efficiency", c.nic_efficiency},
                             {"sharp", c.sharp},
                             {"sockets", c.sockets},
                             {"gpus_per_pcie_switch", c.gpus_per_pcie_switch},
                             {"pcie_uplink_gbyte_per_s", c.pcie_uplink_gbyte_per_s},
                             {"inter_socket_gbyte_per_s", c.inter_socket_gbyte_per_s},
                             {"nvlink_pair_gbyte_per_s", c.nvlink_pair_gbyte_per_s}};
  if (!c.degraded_links.empty()) {
    out["degraded_links"] = nlohmann::ordered_json::array();
    for (const auto& d : c.degraded_links) {
      out["degraded_links"].push_back({{"link", d.link}, {"bandwidth_fraction", d.bandwidth_fraction}});
    }
  }
  return out;
}

}  // namespace ctwin
