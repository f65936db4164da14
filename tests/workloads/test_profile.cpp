#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/error.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/profile.hpp"

#include "test_paths.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

nlohmann::json gpu_catalog() {
  std::ifstream in(ctwin::test::source_dir() + "/topology/catalog/gpus.json");
  return nlohmann::json::parse(in);
}

GpuSpec catalog_gpu(const nlohmann::json& cat, const std::string& name) {
  const auto& g = cat.at(name);
  GpuSpec s;
  s.name = name;
  s.bf16_tflops = g.at("bf16_tflops");
  s.hbm_gbyte_per_s = g.at("hbm_gbyte_per_s");
  s.nvlink_gen = g.at("nvlink_gen");
  s.gemm_efficiency = g.at("gemm_efficiency");
  s.hbm_efficiency = g.at("hbm_efficiency");
  s.kernel_launch_us = g.at("kernel_launch_us");
  return s;
}

InputError parse_error(const std::string& text) {
  try {
    parse_profile(text, "bad.json");
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError");
  return InputError("", "", "");
}

}  // namespace

TEST_CASE("every catalog GPU has a shipped profile agreeing with the catalog and the cluster presets") {
  const auto cat = gpu_catalog();
  int covered = 0;
  for (const auto& item : cat.items()) {
    // Named copies, not structured bindings: clang 14 cannot capture those (CAPTURE is a lambda).
    const std::string name = item.key();
    const auto& g = item.value();
    if (name == "_comment") continue;
    CAPTURE(name);
    const Profile p = builtin_profile(name);
    CHECK(p.name != "default");
    ++covered;
    // The catalog's own figures (topology/catalog/gpus.json), which a scenario may override there.
    CHECK(p.compute.gemm_efficiency == g.at("gemm_efficiency").get<double>());
    CHECK(p.compute.hbm_efficiency == g.at("hbm_efficiency").get<double>());
    CHECK(p.compute.kernel_launch_us == g.at("kernel_launch_us").get<double>());
    // NCCL's effective NVLink rates (topo.h) as the presets use them.
    const int gen = g.at("nvlink_gen").get<int>();
    if (gen > 0) CHECK(p.links.nvlink_efficiency == nvlink_efficiency(gen));
    // Every coefficient carries its source.
    for (const ProfileKey& k : profile_keys()) {
      CAPTURE(k.pointer);
      CHECK(p.sources.count(k.pointer) == 1);
    }
  }
  CHECK(covered == 7);
}

TEST_CASE("the shipped profiles hold NCCL's tuning.cc tables (the NcclModel defaults)") {
  const NcclModel d;
  for (const std::string& n : builtin_profile_names()) {
    CAPTURE(n);
    const NcclModel& m = builtin_profile(n).nccl;
    CHECK(m.base_ring_us == d.base_ring_us);
    CHECK(m.base_tree_us == d.base_tree_us);
    CHECK(m.ring_nvlink_extra_us == d.ring_nvlink_extra_us);
    CHECK(m.ring_pcie_extra_us == d.ring_pcie_extra_us);
    CHECK(m.ring_net_extra_us == d.ring_net_extra_us);
    CHECK(m.tree_nvlink_extra_us == d.tree_nvlink_extra_us);
    CHECK(m.tree_net_extra_us == d.tree_net_extra_us);
    CHECK(m.nvls_latency_us == d.nvls_latency_us);
    CHECK(m.collnet_latency_us == d.collnet_latency_us);
    CHECK(m.simple_net_overhead_factor == d.simple_net_overhead_factor);
    CHECK(m.ring_ll_efficiency == d.ring_ll_efficiency);
    CHECK(m.ring_ll_copy_efficiency == d.ring_ll_copy_efficiency);
    CHECK(m.ring_ll128_efficiency == d.ring_ll128_efficiency);
    CHECK(m.tree_efficiency == d.tree_efficiency);
    CHECK(m.tree_ll_efficiency == d.tree_ll_efficiency);
    CHECK(m.tree_ll128_efficiency == d.tree_ll128_efficiency);
    CHECK(m.tree_ll128_intra_efficiency == d.tree_ll128_intra_efficiency);
  }
}

TEST_CASE("default_compute_model is the GPU's profile") {
  const auto cat = gpu_catalog();
  const GpuSpec h100 = catalog_gpu(cat, "H100-SXM");
  const ComputeModel a = default_compute_model(h100, Dtype::bf16);
  const ComputeModel b = compute_model(builtin_profile("H100-SXM"), h100, Dtype::bf16);
  CHECK(a.peak_flops == b.peak_flops);
  CHECK(a.gemm_efficiency == b.gemm_efficiency);
  CHECK(a.attention_efficiency == b.attention_efficiency);
  CHECK(a.hbm_efficiency == b.hbm_efficiency);
  CHECK(a.launch_s == b.launch_s);
  CHECK(a.gemm_knee == b.gemm_knee);
  CHECK(a.grouped_gemm_efficiency == b.grouped_gemm_efficiency);
  // Hopper: 0.62 of 989 TFLOP/s for GEMMs, 0.75 of that for flash attention (docs/profiles.md).
  CHECK(a.attention_efficiency == rel_approx(0.62 * 0.75, 1e-15));
  // FlashAttention-2 on Hopper: 335 TFLOP/s (Dao 2023) of 989, 0.55 of the GEMM efficiency to two
  // places; the Triton kernel's fit, 0.29 (docs/validation.md, "Attention kernels").
  CHECK(a.flash2_attention_efficiency * 989e12 == rel_approx(335e12, 0.02));
  CHECK(a.triton_attention_efficiency == rel_approx(0.62 * 0.29, 1e-15));
  // On Ampere FlashAttention-2 is the flash reference itself.
  const GpuSpec a100 = catalog_gpu(cat, "A100-SXM-80GB");
  const ComputeModel amp = default_compute_model(a100, Dtype::bf16);
  CHECK(amp.flash2_attention_efficiency == amp.attention_efficiency);
  CHECK(amp.triton_attention_efficiency == rel_approx(0.71 * 0.48, 1e-15));
}

TEST_CASE("a profile's compute coefficients reach the roofline") {
  const Profile p = parse_profile(R"({"compute": {"gemm_efficiency": 0.5, "attention_ratio": 0.5,
      "hbm_efficiency": 0.5, "kernel_launch_us": 10, "gemm_knee": {"value": 1000, "source": "test"},
      "grouped_gemm_efficiency": 0.25}})",
                                  "p.json");
  GpuSpec gpu;
  gpu.bf16_tflops = 1000;
  gpu.hbm_gbyte_per_s = 1000;
  const RooflineCostModel cm(compute_model(p, gpu, Dtype::bf16));
  CHECK(p.sources.at("/compute/gemm_knee") == "test");
  // A 1000^3 GEMM: each dimension scales efficiency by 1000 / (1000 + 1000).
  OpCost g{OpKind::gemm, 2e9, 0, 1000, 1000, 1000};
  CHECK(cm.op_seconds(g) == rel_approx(2e9 / (1e15 * 0.5 * 0.125) + 10e-6, 1e-12));
  // Grouped: 4 groups of 1000 rows, a further 0.25.
  OpCost gg{OpKind::grouped_gemm, 2e9, 0, 4000, 1000, 1000, 4};
  CHECK(cm.op_seconds(gg) == rel_approx(2e9 / (1e15 * 0.5 * 0.25 * 0.125) + 10e-6, 1e-12));
  // Attention: 0.5 x 0.5 of peak; a streaming kernel: half the HBM rate.
  CHECK(cm.op_seconds(OpCost{OpKind::attention, 1e12, 0}) == rel_approx(1e12 / (1e15 * 0.25) + 10e-6, 1e-12));
  CHECK(cm.op_seconds(OpCost{OpKind::elementwise, 0, 1e9}) == rel_approx(1e9 / (1e12 * 0.5) + 10e-6, 1e-12));
}

TEST_CASE("each attention kernel runs at its own profile ratio") {
  const Profile p = parse_profile(
      R"({"compute": {"gemm_efficiency": 0.5, "attention_ratio": 0.8, "attention_ratio_flash2": 0.4,
      "attention_ratio_triton": 0.2, "kernel_launch_us": 0}})",
      "p.json");
  GpuSpec gpu;
  gpu.bf16_tflops = 1000;
  gpu.hbm_gbyte_per_s = 1000;
  const RooflineCostModel cm(compute_model(p, gpu, Dtype::bf16));
  OpCost a{OpKind::attention, 1e12, 0};
  CHECK(cm.op_seconds(a) == rel_approx(1e12 / (1e15 * 0.5 * 0.8), 1e-12));
  a.attention_impl = AttentionImpl::flash2;
  CHECK(cm.op_seconds(a) == rel_approx(1e12 / (1e15 * 0.5 * 0.4), 1e-12));
  a.attention_impl = AttentionImpl::triton;
  CHECK(cm.op_seconds(a) == rel_approx(1e12 / (1e15 * 0.5 * 0.2), 1e-12));
  // A GEMM ignores the field.
  OpCost g{OpKind::gemm, 2e9, 0, 1e6, 1e6, 1e6};
  const double t = cm.op_seconds(g);
  g.attention_impl = AttentionImpl::triton;
  CHECK(cm.op_seconds(g) == t);
  // Kernels of different implementations are different shapes to a table of measured kernels.
  OpCost f{OpKind::attention, 1e12, 0};
  OpCost tr = f;
  tr.attention_impl = AttentionImpl::triton;
  CHECK_FALSE(f == tr);
  CHECK(OpCostHash{}(f) != OpCostHash{}(tr));
}

TEST_CASE("a profile's NCCL tables and links reach the cluster's collectives") {
  Profile p = builtin_profile("H100-SXM");
  p.nccl.base_ring_us[2] = 50;
  p.links.nvlink_latency_us = 1;
  ClusterSpec s;
  s.gpu.nvlink_gen = 4;
  s.intra_gbyte_per_s = 450;
  apply_profile(p, s);
  CHECK(s.intra_efficiency == 20.6 / 25);
  CHECK(s.nvls_efficiency == 275.0 / 450);
  CHECK(s.nic_efficiency == 0.96);
  CHECK(s.inter_latency_us == 2.7);
  CollectiveCall call;
  call.op = CollectiveOp::all_reduce;
  for (int i = 0; i < 8; ++i) call.ranks.emplace_back(i);
  call.bytes = 1e6;
  CollectiveOptions o;
  o.algo = CollectiveAlgo::ring;
  o.protocol = Protocol::simple;
  // 50 us base plus 14 steps, each 2 slices (one Simple chunk) of an NVLink hop of 1 + 2.8 us.
  CHECK(plan_collective(build_cluster(s), call, o).latency_s == rel_approx((50 + 2 * 14 * 3.8) * 1e-6, 1e-12));
}

TEST_CASE("a profile written to JSON reads back the same, sources included") {
  Profile p = builtin_profile("B200");
  p.nccl.tree_net_extra_us[1] = 7.5;
  p.compute.gemm_knee = 96;
  const Profile q = parse_profile(profile_to_json(p), "round.json");
  CHECK(q.name == "B200");
  CHECK(q.gpus == p.gpus);
  CHECK(q.sources == p.sources);
  for (const ProfileKey& k : profile_keys()) {
    CAPTURE(k.pointer);
    for (int i = 0; i < k.count; ++i) CHECK(k.ref(const_cast<Profile&>(q))[i] == k.ref(p)[i]);
  }
}

TEST_CASE("bad profile JSON names the file, the JSON path, what was found and what is expected") {
  InputError e = parse_error(R"({"compute": {"gemm_efficiency": "high"}})");
  CHECK(e.file == "bad.json");
  CHECK(e.path == "/compute/gemm_efficiency");
  CHECK(e.problem == "found string \"high\"");
  CHECK(e.expected == "a number");
  e = parse_error(R"({"compute": {"gemm_efficiency": {"value": 1.5, "source": "x"}}})");
  CHECK(e.path == "/compute/gemm_efficiency/value");
  CHECK(e.problem == "found number 1.5");
  CHECK(e.expected == "a number from 0.01 to 1 (fraction)");
  // A link at a millionth of its line rate passes no sanity check (it used to reach the clock).
  e = parse_error(R"({"links": {"nic_efficiency": 1e-300}})");
  CHECK(e.path == "/links/nic_efficiency");
  CHECK(e.expected == "a number from 0.01 to 1 (fraction)");
  CHECK(parse_error(R"({"links": {"pcie_efficiency": 0}})").path == "/links/pcie_efficiency");
  // 0 means "no NVLink" / "no NVLS" (the L40S and A100 profiles); just above it is still refused.
  CHECK(
      parse_profile(R"({"links": {"nvlink_efficiency": 0, "nvls_efficiency": 0}})", "ok.json").links.nvls_efficiency ==
      0);
  e = parse_error(R"({"links": {"nvls_efficiency": 1e-300}})");
  CHECK(e.path == "/links/nvls_efficiency");
  CHECK(e.expected == "0 (none) or a number from 0.01 to 2 (fraction)");
  e = parse_error(R"({"nccl": {"base_ring_us": [1, 2]}})");
  CHECK(e.path == "/nccl/base_ring_us");
  CHECK(e.expected == "an array of 3 numbers [LL, LL128, Simple]");
  e = parse_error(R"({"nccl": {"base_ring_us": [1, -2, 3]}})");
  CHECK(e.path == "/nccl/base_ring_us/1");
  e = parse_error(R"({"links": {"nvlink_eff": 0.8}})");
  CHECK(e.path == "/links/nvlink_eff");
  CHECK(e.problem == "unknown key");
  e = parse_error("{");
  CHECK(e.file == "bad.json");
  CHECK_THROWS_AS(load_profile("/nonexistent/profile.json"), InputError);
}

TEST_CASE("applying a GPU's shipped profile to its preset cluster changes nothing") {
  const auto cat = gpu_catalog();
  GpuCatalog gpus;
  for (const auto& [name, g] : cat.items()) {
    if (name == "_comment") continue;
    GpuSpec s = catalog_gpu(cat, name);
    s.nvlink_gbyte_per_s = g.at("nvlink_gbyte_per_s");
    s.pcie_gbyte_per_s = g.at("pcie_gbyte_per_s");
    gpus.gpus[name] = s;
  }
  for (const std::string& name : preset_cluster_names()) {
    CAPTURE(name);
    ClusterSpec preset;
    REQUIRE(preset_cluster(name, 2, gpus, preset));
    ClusterSpec s = preset;
    apply_profile(builtin_profile(s.gpu.name), s);
    CHECK(s.intra_efficiency == preset.intra_efficiency);
    CHECK(s.intra_latency_us == preset.intra_latency_us);
    CHECK(s.nvls_efficiency == preset.nvls_efficiency);
    CHECK(s.nvlink_pair_efficiency == preset.nvlink_pair_efficiency);
    CHECK(s.nic_efficiency == preset.nic_efficiency);
    CHECK(s.inter_latency_us == preset.inter_latency_us);
  }
}

TEST_CASE("a custom cluster takes its generation's link figures from the profile") {
  // What the scenario loader's custom clusters should get (it sets 370/450 for every generation
  // and a 3.0 us network hop today): NCCL's topo.h rates per generation, hwLat's 2.7 us.
  const std::pair<const char*, double> cases[] = {
      {"A100-SXM-80GB", 20.0 / 25}, {"H200", 20.6 / 25}, {"B200", 40.1 / 50}};
  for (const auto& c : cases) {
    const char* gpu = c.first;  // not a structured binding: clang 14 cannot capture those
    const double eff = c.second;
    CAPTURE(gpu);
    ClusterSpec s;
    s.intra = IntraNodeFabric::nvswitch;
    apply_profile(builtin_profile(gpu), s);
    CHECK(s.intra_efficiency == rel_approx(eff, 1e-15));
    CHECK(s.inter_latency_us == rel_approx(2.7, 1e-15));
  }
}

TEST_CASE("NVLink bridge links move at the profile's NVLink efficiency") {
  // The h100-pcie preset's bridged pairs: 600 GB/s bidirectional, 300 per direction (H100 PCIe
  // datasheet), at NCCL's SM90 20.6 of 25 GB/s per link (topo.h); a profile measuring half the
  // line rate moves 150.
  GpuCatalog gpus;
  GpuSpec h100 = catalog_gpu(gpu_catalog(), "H100-PCIe");
  h100.nvlink_gbyte_per_s = 300;
  h100.pcie_gbyte_per_s = 64;
  gpus.gpus["H100-PCIe"] = h100;
  ClusterSpec s;
  REQUIRE(preset_cluster("h100-pcie", 1, gpus, s));
  CHECK(nvlink_pair_effective_gbps(s) == rel_approx(300 * 20.6 / 25, 1e-15));
  Profile p = builtin_profile("H100-PCIe");
  p.links.nvlink_efficiency = 0.5;
  apply_profile(p, s);
  CHECK(nvlink_pair_effective_gbps(s) == rel_approx(150.0, 1e-15));
  CHECK(s.intra_efficiency == rel_approx(12.0 / 16, 1e-15));  // the PCIe links keep PCI_BW's share
}
