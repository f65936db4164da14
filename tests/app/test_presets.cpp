// Every shipped hardware figure against its source: the GPU catalog (topology/catalog/gpus.json,
// embedded in ctwin) against NVIDIA's datasheets, the cluster presets (topology/src/presets.cpp)
// against the DGX/HGX system specifications and NCCL's topology constants, and NCCL's latency
// tables (src/graph/tuning.cc) through the collective plans built on them. The values are loaded
// the way ctwin loads them (builtin_gpus, preset_cluster, parse_scenario), never copied.
//
// NCCL sources are NVIDIA/nccl at v2.23.4-1 and later (unchanged up to v2.30): src/graph/tuning.cc
// for baseLat/hwLat (ncclTunerConstantsDefaults since 2.27), getNetOverhead and the protocol
// factors; src/graph/topo.h for SM80/SM90/SM100_NVLINK_BW, PCI_BW and SRP_QPI_BW.
#include <doctest/doctest.h>

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const GpuSpec& gpu(const std::string& name) {
  static const GpuCatalog catalog = builtin_gpus();
  auto it = catalog.gpus.find(name);
  REQUIRE_MESSAGE(it != catalog.gpus.end(), "no GPU " << name << " in the shipped catalog");
  return it->second;
}

ClusterSpec preset(const std::string& name, int nodes = 1) {
  ClusterSpec s;
  REQUIRE_MESSAGE(preset_cluster(name, nodes, builtin_gpus(), s), "no preset " << name);
  return s;
}

std::vector<GpuId> ranks(int n) {
  std::vector<GpuId> r;
  for (int i = 0; i < n; ++i) r.emplace_back(i);
  return r;
}

// The latency (us) NCCL's model gives a tiny collective run with this algorithm and protocol.
double latency_us(const ClusterSpec& spec, CollectiveOp op, int n, CollectiveAlgo algo, Protocol proto) {
  const Cluster c = build_cluster(spec);
  CollectiveOptions o;
  o.algo = algo;
  o.protocol = proto;
  const CollectivePlan plan = plan_collective(c, CollectiveCall{op, ranks(n), 8}, o);
  CHECK(plan.algo == algo);
  CHECK(plan.protocol == proto);
  return plan.latency_s * 1e6;
}

}  // namespace

TEST_CASE("GPU catalog: dense tensor-core peaks match NVIDIA's datasheets") {
  struct Row {
    const char* name;
    double bf16, fp16, fp8, tf32;  // dense TFLOP/s (datasheets quote sparse; dense is half)
  };
  const Row rows[] = {
      // A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16/FP16 312,
      // TF32 156, no FP8.
      {"A100-SXM-40GB", 312, 312, 0, 156},
      {"A100-SXM-80GB", 312, 312, 0, 156},
      // H100 datasheet, SXM column: BF16/FP16 1,979 and FP8 3,958 with sparsity, TF32 989.
      {"H100-SXM", 989, 989, 1979, 494},
      // H100 datasheet, PCIe column: BF16/FP16 1,513, FP8 3,026, TF32 756, all with sparsity.
      {"H100-PCIe", 756, 756, 1513, 378},
      // H200 datasheet, SXM column: the H100 SXM's Tensor Core figures.
      {"H200", 989, 989, 1979, 494},
      // DGX B200 datasheet: 72 PFLOPS FP8 training with sparsity over 8 GPUs, so 4.5 dense per
      // GPU; HGX B200 datasheet: BF16/FP16 36 PFLOPS, TF32 18 PFLOPS over 8 GPUs with sparsity.
      {"B200", 2250, 2250, 4500, 1100},
      // L40S datasheet: BF16/FP16 362.05 (733 with sparsity), FP8 733 (1,466), TF32 183 (366).
      {"L40S", 362, 362, 733, 183},
  };
  for (const Row& r : rows) {
    const std::string name = r.name;
    CAPTURE(name);
    const GpuSpec& g = gpu(name);
    CHECK(g.bf16_tflops == rel_approx(r.bf16, 0.001));
    CHECK(g.fp16_tflops == rel_approx(r.fp16, 0.001));
    if (r.fp8 == 0) {
      CHECK(g.fp8_tflops == 0);  // rel_approx(0, tol) fails even an exact 0 (doctest's strict <)
    } else {
      CHECK(g.fp8_tflops == rel_approx(r.fp8, 0.001));
      CHECK(g.peak_flops(Dtype::fp8) == rel_approx(r.fp8 * 1e12, 0.001));
    }
    // B200's TF32: 18 PFLOPS / 8 / 2 = 1,125; the catalog's 1,100 is the Blackwell figure at
    // 1,000 W. Within 3% either way.
    CHECK(g.tf32_tflops == rel_approx(r.tf32, 0.03));
    // peak_flops is what the compute model uses.
    CHECK(g.peak_flops(Dtype::bf16) == rel_approx(r.bf16 * 1e12, 0.001));
  }
}

TEST_CASE("GPU catalog: INT8 and FP4 peaks match the datasheets; a GPU without int8_tops gets FP8's or twice BF16") {
  // Datasheets quote INT8 with sparsity: A100 1,248 TOPS, H100 SXM 3,958, H100 PCIe 3,026,
  // H200 3,958, L40S 1,466; HGX B200 72 POPS over 8 GPUs. FP4: DGX B200 144 PFLOPS over 8 GPUs.
  const std::pair<const char*, std::pair<double, double>> rows[] = {
      {"A100-SXM-80GB", {624, 0}}, {"H100-SXM", {1979, 0}}, {"H100-PCIe", {1513, 0}},
      {"H200", {1979, 0}},         {"B200", {4500, 9000}},  {"L40S", {733, 0}}};
  for (const auto& row : rows) {
    const std::string name = row.first;  // a structured binding cannot be captured (clang 14)
    const auto& v = row.second;
    CAPTURE(name);
    CHECK(gpu(name).int8_tops == rel_approx(v.first, 0.001));
    if (v.second == 0) {
      CHECK(gpu(name).fp4_tflops == 0);
    } else {
      CHECK(gpu(name).fp4_tflops == rel_approx(v.second, 0.001));
    }
  }
  // A scenario's own GPU without the key: its FP8 peak, or twice BF16 without FP8 (as A100).
  const auto own = [](const char* text) {
    const Json j = Json::parse(text);
    return gpu_from_json(JsonObject(j, "/catalog/gpus/X", "s.json"), "X");
  };
  CHECK(own(R"({"bf16_tflops": 300, "fp8_tflops": 600, "hbm_bytes": 8e10, "hbm_gbyte_per_s": 2000})").int8_tops ==
        rel_approx(600, 1e-12));
  CHECK(own(R"({"bf16_tflops": 300, "hbm_bytes": 8e10, "hbm_gbyte_per_s": 2000})").int8_tops == rel_approx(600, 1e-12));
  CHECK(own(R"({"bf16_tflops": 300, "int8_tops": 450, "hbm_bytes": 8e10, "hbm_gbyte_per_s": 2000})").int8_tops ==
        rel_approx(450, 1e-12));
}

TEST_CASE("GPU catalog: memory is nvidia-smi's total and the datasheet's bandwidth") {
  struct Row {
    const char* name;
    double mib;        // nvidia-smi memory.total, MiB (ECC on, as shipped)
    double datasheet;  // capacity on the datasheet, GB: a sanity bound on the MiB figure
    double gbps;       // HBM (L40S: GDDR6) bandwidth, GB/s
  };
  const Row rows[] = {
      // A100 datasheet: 40 GB HBM2 at 1,555 GB/s, 80 GB HBM2e at 2,039 GB/s (SXM).
      {"A100-SXM-40GB", 40960, 40, 1555},
      {"A100-SXM-80GB", 81920, 80, 2039},
      // H100 datasheet: 80 GB HBM3 at 3.35 TB/s (SXM), 80 GB HBM2e at 2 TB/s (PCIe).
      {"H100-SXM", 81559, 80, 3350},
      {"H100-PCIe", 81559, 80, 2000},
      // H200 datasheet: 141 GB HBM3e at 4.8 TB/s; nvidia-smi reports 143771 MiB.
      {"H200", 143771, 141, 4800},
      // DGX B200 datasheet: 1,440 GB and 64 TB/s over 8 GPUs; nvidia-smi reports 183359 MiB.
      {"B200", 183359, 180, 8000},
      // L40S datasheet: 48 GB GDDR6 with ECC at 864 GB/s; nvidia-smi reports 46068 MiB.
      {"L40S", 46068, 48, 864},
  };
  for (const Row& r : rows) {
    const std::string name = r.name;
    CAPTURE(name);
    const GpuSpec& g = gpu(name);
    CHECK(g.hbm_bytes == r.mib * kMiB);
    CHECK(g.hbm_bytes > 0.9 * r.datasheet * 1e9);
    CHECK(g.hbm_bytes < 1.1 * r.datasheet * 1e9);
    CHECK(g.hbm_gbyte_per_s == rel_approx(r.gbps, 0.001));
  }
}

TEST_CASE("GPU catalog: NVLink and PCIe per direction are half the datasheets' bidirectional figures") {
  struct Row {
    const char* name;
    int nvlink_gen;
    double nvlink_bidir;  // GB/s, both directions, as NVIDIA quotes it
    int pcie_gen;
    double pcie_bidir;  // GB/s, x16, both directions
  };
  const Row rows[] = {
      // A100: NVLink 3 at 600 GB/s, PCIe Gen4 at 64 GB/s.
      {"A100-SXM-40GB", 3, 600, 4, 64},
      {"A100-SXM-80GB", 3, 600, 4, 64},
      // H100 SXM: NVLink 4 at 900 GB/s, PCIe Gen5 at 128 GB/s; H100 PCIe: NVLink bridge at 600 GB/s.
      {"H100-SXM", 4, 900, 5, 128},
      {"H100-PCIe", 4, 600, 5, 128},
      // H200 SXM: NVLink 900 GB/s, PCIe Gen5 128 GB/s.
      {"H200", 4, 900, 5, 128},
      // B200: NVLink 5 at 1.8 TB/s per GPU (DGX B200: 14.4 TB/s over 8); PCIe Gen6 x16 256 GB/s.
      {"B200", 5, 1800, 6, 256},
      // L40S: no NVLink; PCIe Gen4 x16 at 64 GB/s.
      {"L40S", 0, 0, 4, 64},
  };
  for (const Row& r : rows) {
    const std::string name = r.name;
    CAPTURE(name);
    const GpuSpec& g = gpu(name);
    CHECK(g.nvlink_gen == r.nvlink_gen);
    CHECK(g.nvlink_gbyte_per_s == r.nvlink_bidir / 2);
    CHECK(g.pcie_gen == r.pcie_gen);
    CHECK(g.pcie_gbyte_per_s == r.pcie_bidir / 2);
  }
}

TEST_CASE("cluster presets: GPUs, NICs and host CPUs of the DGX and HGX systems") {
  struct Row {
    const char* preset;
    const char* gpu;
    IntraNodeFabric intra;
    double nic_gbit;  // NIC line rate, Gb/s
    int nics;
    HostCpu cpu;
    double net_overhead_us;  // NCCL getNetOverhead: 1 us on Intel hosts, 2 us on AMD
  };
  const Row rows[] = {
      // DGX A100 user guide: 8x ConnectX-6 HDR 200 Gb/s for the compute fabric; AMD EPYC 7742.
      {"dgx-a100", "A100-SXM-80GB", IntraNodeFabric::nvswitch, 200, 8, HostCpu::amd, 2.0},
      // DGX H100 user guide: 8x ConnectX-7 NDR 400 Gb/s (four OSFP cages); Intel Xeon 8480C.
      {"dgx-h100", "H100-SXM", IntraNodeFabric::nvswitch, 400, 8, HostCpu::intel, 1.0},
      // HGX H200 reference configuration: one ConnectX-7 400 Gb/s per GPU; NCCL's default host.
      {"hgx-h200", "H200", IntraNodeFabric::nvswitch, 400, 8, HostCpu::intel, 1.0},
      // DGX B200 datasheet: 8x single-port ConnectX-7 VPI 400 Gb/s; Intel Xeon Platinum 8570.
      {"dgx-b200", "B200", IntraNodeFabric::nvswitch, 400, 8, HostCpu::intel, 1.0},
      // 8x L40S PCIe servers: one 200 Gb/s NIC per PCIe switch of two GPUs.
      {"l40s-pcie", "L40S", IntraNodeFabric::pcie, 200, 4, HostCpu::intel, 1.0},
      // 8x H100 PCIe in NVLink-bridged pairs: one NDR 400 Gb/s NIC per pair.
      {"h100-pcie", "H100-PCIe", IntraNodeFabric::nvlink_bridge, 400, 4, HostCpu::intel, 1.0},
  };
  for (const Row& r : rows) {
    const std::string name = r.preset;
    CAPTURE(name);
    const ClusterSpec s = preset(name, 4);
    CHECK(s.name == name);
    CHECK(s.nodes == 4);
    CHECK(s.gpu.name == r.gpu);
    CHECK(s.gpus_per_node == 8);
    CHECK(s.intra == r.intra);
    CHECK(s.nic_gbyte_per_s == r.nic_gbit / 8);  // GB/s per direction
    CHECK(s.nics() == r.nics);
    CHECK(s.host_cpu == r.cpu);
    CHECK(s.net_overhead_us == r.net_overhead_us);
  }
  std::vector<std::string> names = preset_cluster_names();
  CHECK(names.size() == std::size(rows));
}

TEST_CASE("cluster presets: node fabrics at NCCL's effective rates") {
  // NVSwitch nodes: the GPU's NVLink per direction, at NCCL's per-link figure over the line rate
  // (topo.h: SM80_NVLINK_BW 20.0, SM90 20.6, SM100 40.1 GB/s per link of 25, 25 and 50 GB/s).
  struct Row {
    const char* preset;
    double intra_gbyte_per_s, efficiency;
    bool nvls;  // NVLink SHARP: NVSwitch 3 (H100 and later) only
  };
  const Row rows[] = {
      {"dgx-a100", 300, 20.0 / 25, false},
      {"dgx-h100", 450, 20.6 / 25, true},
      {"hgx-h200", 450, 20.6 / 25, true},
      {"dgx-b200", 900, 40.1 / 50, true},
  };
  for (const Row& r : rows) {
    const std::string name = r.preset;
    CAPTURE(name);
    const ClusterSpec s = preset(name);
    CHECK(s.intra_gbyte_per_s == r.intra_gbyte_per_s);
    CHECK(s.intra_efficiency == rel_approx(r.efficiency, 1e-9));
    CHECK((s.nvls_efficiency > 0) == r.nvls);
  }
  CHECK(nvlink_efficiency(3) == rel_approx(20.0 / 25, 1e-9));
  CHECK(nvlink_efficiency(4) == rel_approx(20.6 / 25, 1e-9));
  CHECK(nvlink_efficiency(5) == rel_approx(40.1 / 50, 1e-9));
  // NCCL's measured DGX H100 bandwidth, 18 links x 20.6 = 370.8 of 450 GB/s (nccl-tests #212).
  const ClusterSpec h = preset("dgx-h100");
  CHECK(h.intra_gbyte_per_s * h.intra_efficiency == rel_approx(370.8, 1e-6));

  // PCIe nodes: PCI_BW is 12 GB/s for a Gen3 x16 link of 16 (topo.h), the same fraction at Gen4
  // and Gen5; two sockets joined by Sapphire Rapids UPI, SRP_QPI_BW 22 GB/s.
  for (const std::string name : {"l40s-pcie", "h100-pcie"}) {
    CAPTURE(name);
    const ClusterSpec s = preset(name);
    CHECK(s.intra_gbyte_per_s == s.gpu.pcie_gbyte_per_s);
    CHECK(s.intra_efficiency == rel_approx(12.0 / 16, 1e-9));
    CHECK(s.sockets == 2);
    CHECK(s.gpus_per_pcie_switch == 2);
    CHECK(s.inter_socket_gbyte_per_s == 22);
    CHECK(s.nvls_efficiency == 0);
  }
  CHECK(preset("l40s-pcie").nvlink_pair_gbyte_per_s == 0);
  CHECK(preset("h100-pcie").nvlink_pair_gbyte_per_s == 300);  // the bridge: 600 GB/s bidirectional
}

TEST_CASE("cluster presets: hop latencies are NCCL's LL hwLat for the link") {
  // tuning.cc hwLat, Ring/LL: NVLink 0.6 us, PCI 1.0 us, network 2.7 us. NVLink 5 (dgx-b200):
  // 1.4 us, fitted on a published HGX B200 all_gather at 1 KiB (docs/validation-network.md).
  for (const std::string name : {"dgx-a100", "dgx-h100", "hgx-h200", "dgx-b200"}) {
    CAPTURE(name);
    const ClusterSpec s = preset(name, 2);
    CHECK(s.intra_latency_us == rel_approx(name == "dgx-b200" ? 1.4 : 0.6, 1e-9));
    CHECK(s.inter_latency_us == rel_approx(2.7, 1e-9));
  }
  for (const std::string name : {"l40s-pcie", "h100-pcie"}) {
    CAPTURE(name);
    const ClusterSpec s = preset(name, 2);
    CHECK(s.intra_latency_us == rel_approx(1.0, 1e-9));
    CHECK(s.inter_latency_us == rel_approx(2.7, 1e-9));
  }
}

TEST_CASE("NCCL latency tables: ring inside a node is baseLat + steps x hwLat") {
  // tuning.cc: baseLat Ring {LL 6.6, LL128 14.0, Simple 8.4}; hwLat NVLink Ring {0.6, 1.9, 3.4},
  // PCI Ring {1.0, 2.5, 5.7}. An all-reduce ring takes 2(n-1) steps, an all-gather n-1. Simple
  // moves a step as 2 slices, a hop each (the ramp, collective.hpp); LL and LL128 as one.
  const ClusterSpec h100 = preset("dgx-h100");
  const auto ar = CollectiveOp::all_reduce;
  const auto ring = CollectiveAlgo::ring;
  CHECK(latency_us(h100, ar, 8, ring, Protocol::ll) == rel_approx(6.6 + 14 * 0.6, 1e-9));
  CHECK(latency_us(h100, ar, 8, ring, Protocol::ll128) == rel_approx(14.0 + 14 * 1.9, 1e-9));
  CHECK(latency_us(h100, ar, 8, ring, Protocol::simple) == rel_approx(8.4 + 2 * 14 * 3.4, 1e-9));
  CHECK(latency_us(h100, CollectiveOp::all_gather, 8, ring, Protocol::ll) == rel_approx(6.6 + 7 * 0.6, 1e-9));
  CHECK(latency_us(h100, CollectiveOp::all_gather, 4, ring, Protocol::simple) == rel_approx(8.4 + 2 * 3 * 3.4, 1e-9));

  const ClusterSpec l40s = preset("l40s-pcie");
  CHECK(latency_us(l40s, ar, 8, ring, Protocol::ll) == rel_approx(6.6 + 14 * 1.0, 1e-9));
  CHECK(latency_us(l40s, ar, 8, ring, Protocol::simple) == rel_approx(8.4 + 2 * 14 * 5.7, 1e-9));
}

TEST_CASE("NCCL latency tables: rings across nodes add the network hop and the host's post overhead") {
  // Two nodes of 8: 30 ring steps, 2(nodes-1) = 2 of them over the network at hwLat NET Ring
  // {2.7, 4.0, 14.0}; every intra-node step costs at least getNetOverhead (x3 for Simple), and at
  // Simple its second slice one more NVLink hop (0.6 + 2.8 us; network steps keep one).
  const auto ar = CollectiveOp::all_reduce;
  const auto ring = CollectiveAlgo::ring;
  const ClusterSpec h100 = preset("dgx-h100", 2);  // Intel hosts: 1 us
  CHECK(latency_us(h100, ar, 16, ring, Protocol::ll) == rel_approx(6.6 + 28 * 1.0 + 2 * 2.7, 1e-9));
  CHECK(latency_us(h100, ar, 16, ring, Protocol::ll128) == rel_approx(14.0 + 28 * 1.9 + 2 * 4.0, 1e-9));
  CHECK(latency_us(h100, ar, 16, ring, Protocol::simple) == rel_approx(8.4 + 28 * 3.4 + 2 * 14.0 + 28 * 3.4, 1e-9));
  const ClusterSpec a100 = preset("dgx-a100", 2);  // AMD hosts: 2 us, 6 us for Simple
  CHECK(latency_us(a100, ar, 16, ring, Protocol::ll) == rel_approx(6.6 + 28 * 2.0 + 2 * 2.7, 1e-9));
  CHECK(latency_us(a100, ar, 16, ring, Protocol::simple) == rel_approx(8.4 + 28 * 6.0 + 2 * 14.0 + 28 * 3.4, 1e-9));
}

TEST_CASE("NCCL latency tables: tree, NVLS and CollNet") {
  // Tree all-reduce: baseLat Tree {6.8, 14.0, 8.4} + 2 x ((g-1) x hwLat NVLink Tree {0.6, 1.25,
  // 4.0} + log2(nodes) x hwLat NET Tree {5.0, 8.5, 14}).
  const auto ar = CollectiveOp::all_reduce;
  const ClusterSpec h100 = preset("dgx-h100", 2);
  const auto tree = CollectiveAlgo::tree;
  CHECK(latency_us(h100, ar, 16, tree, Protocol::ll) == rel_approx(6.8 + 2 * (7 * 0.6 + 5.0), 1e-9));
  CHECK(latency_us(h100, ar, 16, tree, Protocol::ll128) == rel_approx(14.0 + 2 * (7 * 1.25 + 8.5), 1e-9));
  CHECK(latency_us(h100, ar, 16, tree, Protocol::simple) == rel_approx(8.4 + 2 * (7 * 4.0 + 14.0), 1e-9));
  const ClusterSpec four = preset("dgx-h100", 4);
  CHECK(latency_us(four, ar, 32, tree, Protocol::ll) == rel_approx(6.8 + 2 * (7 * 0.6 + 2 * 5.0), 1e-9));

  // NVLS inside a node: hwLat NVLink NVLS Simple 25 us, base 0; and the pipeline's fill, two
  // stages' worth of the call's one loop (8 B) at NVLS's streaming rate (collective.cpp).
  const double stream_s = 1 / 275e9 - 0.29 * 8 * 3.4e-6 / (16.0 * 8 * 131072);
  CHECK(latency_us(preset("dgx-h100"), ar, 8, CollectiveAlgo::nvls, Protocol::simple) ==
        rel_approx(25.0 + 2 * 8 * stream_s * 1e6, 1e-9));

  // CollNet Direct over SHARP switches: hwLat NVLink 3.7 + NET 31 us, plus the chain through
  // the node's GPUs both ways at the NVLink Ring Simple hop (3.4 us).
  ClusterSpec sharp = preset("dgx-h100", 2);
  sharp.sharp = true;
  CHECK(latency_us(sharp, ar, 16, CollectiveAlgo::collnet, Protocol::simple) ==
        rel_approx(3.7 + 31.0 + 2 * 7 * 3.4, 1e-9));
}

TEST_CASE("a scenario naming a preset gets the preset's values") {
  // The path ctwin run takes: /cluster/preset through parse_scenario.
  const nlohmann::json j = nlohmann::json::parse(R"({
    "name": "t", "kind": "training",
    "cluster": {"preset": "dgx-b200", "nodes": 2},
    "model": "llama3-8b",
    "training": {"micro_batch": 1, "global_batch": 16, "seq_len": 4096,
                 "parallelism": {"tp": 8, "pp": 1, "dp": 2}}
  })");
  const Scenario s = parse_scenario(j.dump(), "presets.json");
  const ClusterSpec direct = preset("dgx-b200", 2);
  CHECK(s.cluster.gpu.name == "B200");
  CHECK(s.cluster.gpu.bf16_tflops == direct.gpu.bf16_tflops);
  CHECK(s.cluster.gpu.hbm_bytes == direct.gpu.hbm_bytes);
  CHECK(s.cluster.nic_gbyte_per_s == 50);
  CHECK(s.cluster.intra_gbyte_per_s == 900);
  CHECK(s.cluster.intra_efficiency == direct.intra_efficiency);
  CHECK(s.cluster.inter_latency_us == direct.inter_latency_us);
  CHECK(s.cluster.net_overhead_us == direct.net_overhead_us);
}
