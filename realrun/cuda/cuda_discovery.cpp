// Topology discovery on a GPU node: the CUDA runtime's devices and peer access, NVML's NVLink
// links, PCIe link and UUIDs where the driver's libnvidia-ml is present (opened at run time, so
// the build needs no NVML headers and a node without it still runs), and the InfiniBand NICs.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <array>

#ifdef CTWIN_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef CTWIN_HAVE_MPI
#include <mpi.h>
#endif

#include "realrun/cuda_device.hpp"

namespace ctwin::realrun {

namespace {

// The few NVML entry points discovery reads, by their C signatures (nvml.h): every handle is a
// pointer and every enum an int, so they are declared here without the header.
struct Nvml {
  using Device = void*;
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*uuid)(Device, char*, unsigned) = nullptr;
  int (*nvlink_state)(Device, unsigned, int*) = nullptr;
  int (*pcie_gen)(Device, unsigned*) = nullptr;
  int (*pcie_width)(Device, unsigned*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;

  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    bool ok = sym(init, "nvmlInit_v2") && sym(shutdown, "nvmlShutdown") &&
              sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2") && sym(uuid, "nvmlDeviceGetUUID") &&
              sym(nvlink_state, "nvmlDeviceGetNvLinkState") && sym(pcie_gen, "nvmlDeviceGetMaxPcieLinkGeneration") &&
              sym(pcie_width, "nvmlDeviceGetMaxPcieLinkWidth") && sym(driver, "nvmlSystemGetDriverVersion");
    if (!ok || init() != 0) {
      dlclose(lib);
      lib = nullptr;
    }
  }
  ~Nvml() {
    if (lib != nullptr) {
      shutdown();
      dlclose(lib);
    }
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  template <class F>
  bool sym(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
  }
};

constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

}  // namespace

DiscoveredNode discover_node() {
  DiscoveredNode node;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) node.hostname = host.data();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  Nvml nvml;
  if (nvml.lib != nullptr) {
    std::array<char, 96> v{};
    if (nvml.driver(v.data(), static_cast<unsigned>(v.size())) == 0) node.driver = v.data();
  }
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    DiscoveredGpu g;
    g.name = prop.name;
    g.memory_bytes = static_cast<double>(prop.totalGlobalMem);
    g.sm = prop.major * 10 + prop.minor;
    std::array<char, 32> bus{};
    if (cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), d) == cudaSuccess) g.pci_bus_id = bus.data();
    Nvml::Device h = nullptr;
    if (nvml.lib != nullptr && nvml.by_pci(g.pci_bus_id.c_str(), &h) == 0) {
      std::array<char, 96> uuid{};
      if (nvml.uuid(h, uuid.data(), static_cast<unsigned>(uuid.size())) == 0) g.uuid = uuid.data();
      for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
        int active = 0;
        if (nvml.nvlink_state(h, link, &active) == 0 && active != 0) ++g.nvlinks;
      }
      unsigned gen = 0, width = 0;
      if (nvml.pcie_gen(h, &gen) == 0) g.pcie_gen = static_cast<int>(gen);
      if (nvml.pcie_width(h, &width) == 0) g.pcie_width = static_cast<int>(width);
    }
    node.gpus.push_back(g);
  }
  node.peer_access.assign(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(n), false));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      int can = 0;
      if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess) {
        node.peer_access[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = can != 0;
      }
    }
  }
  node.nics = read_infiniband();
  return node;
}

nlohmann::json cuda_versions() {
  const auto dotted = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  nlohmann::json j = nlohmann::json::object();
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) j["cuda"] = dotted(v);
  if (cudaDriverGetVersion(&v) == cudaSuccess) j["cuda_driver"] = dotted(v);
  // cuBLASLt: major * 10000 + minor * 100 + patch.
  const std::size_t lt = cublasLtGetVersion();
  j["cublas"] = std::to_string(lt / 10000) + "." + std::to_string(lt / 100 % 100) + "." + std::to_string(lt % 100);
#ifdef CTWIN_HAVE_NCCL
  // NCCL 2.9+: major * 10000 + minor * 100 + patch.
  if (ncclGetVersion(&v) == ncclSuccess) {
    j["nccl"] = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  }
#endif
#ifdef CTWIN_HAVE_MPI
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> mpi{};
  int len = 0;
  if (MPI_Get_library_version(mpi.data(), &len) == MPI_SUCCESS) {
    std::string s(mpi.data(), static_cast<std::size_t>(len));
    j["mpi"] = s.substr(0, s.find_first_of(",\n"));
  }
#endif
  return j;
}

}  // namespace ctwin::realrun
