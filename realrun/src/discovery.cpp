#include "realrun/discovery.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <system_error>

#include "realrun/cuda_plan.hpp"

namespace ctwin::realrun {

namespace {

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

}  // namespace

double parse_ib_rate_gbit(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return 0;
  const std::string_view rest = std::string_view(s).substr(static_cast<std::size_t>(end - s.c_str()));
  // sysfs writes "Gb/sec"; a rate in another unit is not one this reader knows.
  if (rest.find("Gb/s") == std::string_view::npos) return 0;
  return v;
}

std::vector<DiscoveredNic> read_infiniband(const std::filesystem::path& root) {
  std::vector<DiscoveredNic> nics;
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return nics;
  std::vector<std::filesystem::path> devices;
  for (const auto& d : std::filesystem::directory_iterator(root, ec)) devices.push_back(d.path());
  std::sort(devices.begin(), devices.end());  // directory order is not deterministic
  for (const auto& dev : devices) {
    std::vector<std::filesystem::path> ports;
    for (const auto& p : std::filesystem::directory_iterator(dev / "ports", ec)) ports.push_back(p.path());
    std::sort(ports.begin(), ports.end());
    for (const auto& port : ports) {
      // "4: ACTIVE"; a port that is down carries nothing.
      if (read_line(port / "state").find("ACTIVE") == std::string::npos) continue;
      DiscoveredNic nic;
      nic.name = dev.filename().string();
      nic.port = std::atoi(port.filename().string().c_str());
      nic.gbit_per_s = parse_ib_rate_gbit(read_line(port / "rate"));
      nic.link_layer = read_line(port / "link_layer");
      nics.push_back(nic);
    }
  }
  return nics;
}

double nvlink_gbyte_per_s_per_link(int sm) {
  // NVLink 3 (sm 80): 12 links x 25 GB/s = 300 GB/s each way on A100; NVLink 4 (sm 90): 18 x
  // 25 = 450 GB/s on H100; NVLink 5 (sm 100): 18 x 50 = 900 GB/s on B200 (NVIDIA datasheets).
  if (sm >= 100) return 50;
  if (sm >= 80) return 25;
  return 0;
}

double pcie_gbyte_per_s(int gen, int width) {
  if (gen < 1 || width < 1) return 0;
  // Gen1/2 use 8b/10b at 2.5/5 GT/s (0.25/0.5 GB/s a lane); Gen3 on 128b/130b at 8 GT/s, doubling.
  if (gen == 1) return 0.25 * width;
  if (gen == 2) return 0.5 * width;
  return 8.0 * 128 / 130 / 8 * static_cast<double>(1 << (gen - 3)) * width;
}

nlohmann::ordered_json cluster_json_from_discovery(const DiscoveredNode& node, int nodes) {
  nlohmann::ordered_json j;
  const DiscoveredGpu first = node.gpus.empty() ? DiscoveredGpu{} : node.gpus.front();
  const std::string catalog = catalog_gpu_name(first.name, first.memory_bytes);
  j["name"] = node.hostname.empty() ? std::string("discovered") : "discovered on " + node.hostname;
  // An unknown GPU keeps its device name: loading the file then asks for a /catalog/gpus entry
  // of that name instead of pricing it as some other GPU.
  j["gpu"] = catalog.empty() ? first.name : catalog;
  j["gpus_per_node"] = std::max<std::size_t>(1, node.gpus.size());
  j["nodes"] = std::max(1, nodes);
  const int gpus = static_cast<int>(node.gpus.size());
  int nvlinks = gpus > 0 ? first.nvlinks : 0;
  for (const DiscoveredGpu& g : node.gpus) nvlinks = std::min(nvlinks, g.nvlinks);
  if (nvlinks > 0 && gpus >= 2) {
    j["intra"] = gpus > 2 ? "nvswitch" : "nvlink_bridge";
    const double rate = nvlinks * nvlink_gbyte_per_s_per_link(first.sm);
    if (rate > 0) j["intra_gbyte_per_s"] = rate;
  } else if (gpus >= 2) {
    j["intra"] = "pcie";
    const double rate = pcie_gbyte_per_s(first.pcie_gen, first.pcie_width);
    if (rate > 0) j["intra_gbyte_per_s"] = rate;
  }
  // NICs that move NCCL's traffic: InfiniBand (or RoCE, also under /sys/class/infiniband).
  double nic_rate = 0;
  int nic_count = 0;
  for (const DiscoveredNic& n : node.nics) {
    if (n.gbit_per_s <= 0) continue;
    nic_rate = std::max(nic_rate, n.gbit_per_s);
    ++nic_count;
  }
  if (nic_count > 0) {
    j["nic_gbit_per_s"] = nic_rate;
    // Fewer NICs than GPUs are shared in order; one a GPU or more is cluster_json's default (0).
    if (nic_count < gpus) j["nics_per_node"] = nic_count;
  }
  return j;
}

}  // namespace ctwin::realrun
