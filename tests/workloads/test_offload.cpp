// Offloading (ZeRO-Offload, ZeRO-Infinity; workloads/offload.hpp): what leaves the GPU and where
// it lands, the bytes each step moves over PCIe and the time they take, CPU Adam's time, and the
// delayed parameter update. Hand-worked on tiny_llama (tests/support/tiny_models.hpp): per layer
// 43,136 parameters (attention 12,288, SwiGLU MLP 30,720, two norms 128), embedding and LM head
// 8,192 each, final norm 64: 4 x 43,136 + 2 x 8,192 + 64 = 188,992 parameters.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"

#include <string>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "workloads/memory.hpp"
#include "workloads/offload.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_params.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::abs_approx;
using ctwin::test::rel_approx;

namespace {

constexpr double kParams = 188992;      // tiny_llama(4), the whole model
constexpr double kLayerParams = 43136;  // one transformer layer

// h100_node8 with a PCIe Gen5 x16 link per GPU (64 GB/s per direction).
Cluster node8_pcie() {
  ClusterSpec s = ctwin::test::h100_node8().spec;
  s.gpu.pcie_gbyte_per_s = 64;
  return build_cluster(s);
}

// ZeRO-`zero` over dp GPUs, one micro-batch each, with round numbers for the offload rates:
// PCIe 64 GB/s x 0.5 = 32 GB/s per direction, CPU Adam 8 Gparams/s per node = 1 Gparam/s per GPU
// (8 GPUs a node), NVMe 16 GB/s per node = 2 GB/s per GPU.
TrainingConfig offloaded(int dp, int zero, Offload::Device optimizer, Offload::Device params) {
  TrainingConfig c = ctwin::test::tiny_layout(1, 1, dp, 1);
  c.parallel.zero_stage = zero;
  c.offload.optimizer = optimizer;
  c.offload.params = params;
  c.offload.pcie_efficiency = 0.5;
  c.offload.cpu_adam_params_per_s = 8e9;
  c.offload.nvme_gbyte_per_s = 16;
  return c;
}

struct Moved {
  double bytes = 0;
  double seconds = 0;
  int ops = 0;
};
// The ops named `name` of simulated GPU 0: their bytes and summed durations.
Moved moved(const StepProgram& p, const std::string& name) {
  Moved m;
  for (const StepOp& op : p.ops) {
    if (op.gpu != 0 || p.names.str(op.name) != name) continue;
    m.bytes += op.bytes;
    m.seconds += op.duration.seconds();
    ++m.ops;
  }
  return m;
}

TrainingOptions no_fold() {
  TrainingOptions o;
  o.fold = false;
  return o;
}

}  // namespace

TEST_CASE(
    "offload memory: ZeRO-3's weights, gradients and optimizer states leave the GPU and land in host memory "
    "byte for byte") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  const TrainingConfig plain = offloaded(2, 3, Offload::Device::none, Offload::Device::none);
  const TrainingConfig off = offloaded(2, 3, Offload::Device::cpu, Offload::Device::cpu);
  const MemoryBreakdown a = estimate_stage_memory(m, plain, cl.spec.gpu.hbm_bytes, 0);
  const MemoryBreakdown b = estimate_stage_memory(m, off, cl.spec.gpu.hbm_bytes, 0);
  // Per GPU of 2: BF16 weights 2 B, BF16 gradients 2 B, FP32 master + moments 12 B, all / 2.
  CHECK(a.weights == rel_approx(kParams * 2 / 2, 1e-12));
  CHECK(a.optimizer == rel_approx(kParams * 12 / 2, 1e-12));
  CHECK(b.weights == 0);
  CHECK(b.grads == 0);
  CHECK(b.optimizer == 0);
  CHECK(b.nvme_bytes == 0);
  CHECK(b.host_bytes == rel_approx(kParams * (2 + 2 + 12) / 2, 1e-12));
  CHECK(b.host_bytes == rel_approx(a.weights + a.grads + a.optimizer, 1e-12));
  // What is in flight stays: the gathered units and the activations.
  CHECK(b.gathered == a.gathered);
  CHECK(b.activations == a.activations);
  CHECK(b.peak == rel_approx(a.peak - b.host_bytes, 1e-12));
}

TEST_CASE(
    "offload memory: ZeRO-Infinity puts the optimizer states on NVMe and keeps the gradient partition in host "
    "memory; a node holds its GPUs' shares") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  TrainingConfig off = offloaded(2, 3, Offload::Device::nvme, Offload::Device::nvme);
  off.offload.host_memory_bytes = 1e6;
  const MemoryBreakdown b = estimate_stage_memory(m, off, cl.spec.gpu.hbm_bytes, 0);
  CHECK(b.nvme_bytes == rel_approx(kParams * (12 + 2) / 2, 1e-12));
  CHECK(b.host_bytes == rel_approx(kParams * 2 / 2, 1e-12));
  const NodeOffloadMemory n = node_offload_memory(m, off, cl.spec);
  CHECK(n.host_bytes == rel_approx(8 * kParams, 1e-12));  // 8 GPUs x 188,992 B
  CHECK(n.nvme_bytes == rel_approx(8 * kParams * 7, 1e-12));
  CHECK(n.host_oom);  // 1.51 MB > 1 MB
  off.offload.host_memory_bytes = 2e6;
  CHECK_FALSE(node_offload_memory(m, off, cl.spec).host_oom);
  off.offload.host_memory_bytes = 0;  // unknown: no verdict
  CHECK_FALSE(node_offload_memory(m, off, cl.spec).host_oom);
}

TEST_CASE(
    "offload rates: PCIe at its efficiency, halved unpinned, shared under a PCIe switch's uplink; NVMe and CPU "
    "Adam split over the node's GPUs") {
  Offload off;
  off.pcie_efficiency = 0.5;
  off.nvme_gbyte_per_s = 16;
  off.cpu_adam_params_per_s = 8e9;
  ClusterSpec s = node8_pcie().spec;
  OffloadRates r = offload_rates(s, off);
  CHECK(r.h2d_bytes_per_s == rel_approx(32e9, 1e-12));
  CHECK(r.d2h_bytes_per_s == rel_approx(32e9, 1e-12));
  CHECK(r.nvme_bytes_per_s == rel_approx(2e9, 1e-12));
  CHECK(r.param_fetch_bytes_per_s == rel_approx(32e9, 1e-12));  // parameters in host memory
  CHECK(r.cpu_adam_params_per_s == rel_approx(1e9, 1e-12));
  off.params = Offload::Device::nvme;
  CHECK(offload_rates(s, off).param_fetch_bytes_per_s == rel_approx(2e9, 1e-12));  // NVMe's share is slower
  off.pin_memory = false;
  CHECK(offload_rates(s, off).h2d_bytes_per_s == rel_approx(16e9, 1e-12));
  off.pin_memory = true;
  // A PCIe node: two GPUs under a switch with a 24 GB/s uplink each copy at 24 x 0.5 / 2 = 6 GB/s.
  s.intra = IntraNodeFabric::pcie;
  s.gpus_per_pcie_switch = 2;
  s.pcie_uplink_gbyte_per_s = 24;
  CHECK(offload_rates(s, off).h2d_bytes_per_s == rel_approx(6e9, 1e-12));
}

TEST_CASE(
    "ZeRO-Offload on one GPU: every gradient goes down and every parameter comes up once a step, at the PCIe "
    "rate; CPU Adam takes parameters / rate") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  const TrainingConfig cfg = offloaded(1, 2, Offload::Device::cpu, Offload::Device::none);
  const StepProgram p = build_training_step(m, cfg, cl, no_fold());
  CHECK(p.offload);
  // BF16 gradients down: 188,992 x 2 = 377,984 bytes; at 32 GB/s, 11.812 us.
  const Moved down = moved(p, "offload_grads");
  CHECK(down.bytes == rel_approx(kParams * 2, 1e-6));
  CHECK(down.seconds == rel_approx(kParams * 2 / 32e9, 1e-6));
  // BF16 parameters up, in CPU Adam's four tiles: the same bytes.
  const Moved up = moved(p, "upload_params");
  CHECK(up.ops == 4);
  CHECK(up.bytes == rel_approx(kParams * 2, 1e-6));
  CHECK(up.seconds == rel_approx(kParams * 2 / 32e9, 1e-6));
  // CPU Adam: 188,992 parameters at 1 Gparam/s = 188.992 us; no GPU optimizer kernel.
  const Moved adam = moved(p, "cpu_adam");
  CHECK(adam.seconds == rel_approx(kParams / 1e9, 1e-6));
  CHECK(moved(p, "adam_step").ops == 0);
  // The optimizer on NVMe: its states read and written back, 2 x 188,992 x 12 B at 2 GB/s =
  // 2.268 ms, longer than the update: the CPU step is that.
  const TrainingConfig nvme = offloaded(1, 2, Offload::Device::nvme, Offload::Device::none);
  const StepProgram pn = build_training_step(m, nvme, cl, no_fold());
  CHECK(moved(pn, "cpu_adam").seconds == rel_approx(2 * kParams * 12 / 2e9, 1e-6));
}

TEST_CASE("ZeRO-Offload over DP: each GPU moves its partition of the gradients, after their reduce-scatter") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  const TrainingConfig cfg = offloaded(4, 2, Offload::Device::cpu, Offload::Device::none);
  const StepProgram p = build_training_step(m, cfg, cl, no_fold());
  CHECK(moved(p, "offload_grads").bytes == rel_approx(kParams * 2 / 4, 1e-6));
  CHECK(moved(p, "upload_params").bytes == rel_approx(kParams * 2 / 4, 1e-6));
  CHECK(moved(p, "cpu_adam").seconds == rel_approx(kParams / 4 / 1e9, 1e-6));
  for (const StepOp& op : p.ops) {
    if (op.gpu != 0 || p.names.str(op.name) != "offload_grads") continue;
    // Its one dependency is the reduce-scatter of the bucket it copies.
    REQUIRE(op.deps_end - op.deps_begin == 1);
    const StepOp& before = p.ops[p.deps[op.deps_begin].value];
    CHECK(p.names.str(before.name) == "grad_reduce_scatter");
  }
}

TEST_CASE(
    "ZeRO-Infinity: each layer's parameter shard is fetched before its all-gather, in forward and backward, "
    "at the slower of PCIe and the GPU's NVMe share") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  const TrainingConfig cfg = offloaded(2, 3, Offload::Device::cpu, Offload::Device::nvme);
  const StepProgram p = build_training_step(m, cfg, cl, no_fold());
  // 4 layers x (forward + backward) x a shard of 43,136 x 2 B / 2 GPUs.
  const Moved f = moved(p, "fetch_params");
  CHECK(f.ops == 8);
  CHECK(f.bytes == rel_approx(8 * kLayerParams * 2 / 2, 1e-6));
  CHECK(f.seconds == rel_approx(8 * kLayerParams * 2 / 2 / 2e9, 1e-6));
  int gathers = 0;
  for (std::size_t t = 0; t + 1 < p.ops.size(); ++t) {
    const StepOp& op = p.ops[t];
    // The all-gather's host work (the op before it) waits for the fetch of the same layer.
    if (op.gpu != 0 || p.names.str(op.name) != "zero3_host" || p.names.str(p.ops[t + 1].name) != "fsdp_all_gather")
      continue;
    ++gathers;
    REQUIRE(op.deps_end - op.deps_begin == 1);
    const StepOp& before = p.ops[p.deps[op.deps_begin].value];
    CHECK(p.names.str(before.name) == "fetch_params");
    CHECK(before.layer == op.layer);
  }
  CHECK(gathers == 8);
  // The parameters live where they are updated: nothing is uploaded after CPU Adam.
  CHECK(moved(p, "upload_params").ops == 0);
}

TEST_CASE(
    "delayed parameter update: a CPU step shorter than the GPU's step is hidden; a longer one sets the step "
    "time; without it the CPU step follows the step") {
  const Cluster cl = node8_pcie();
  const ModelSpec m = ctwin::test::tiny_llama(4);
  TrainingConfig cfg = offloaded(1, 2, Offload::Device::cpu, Offload::Device::none);
  cfg.offload.delayed_param_update = true;
  // The GPU's own step: CPU Adam made negligible (1e9 x faster).
  TrainingConfig fast = cfg;
  fast.offload.cpu_adam_params_per_s = 8e18;
  const double gpu_step = simulate_training(m, fast, cl, no_fold()).step_time_s;
  const double up_tile = kParams * 2 / 4 / 32e9;  // one of the four uploads
  // CPU Adam at half the GPU step: hidden, and the breakdown charges nothing to the optimizer.
  TrainingConfig shorter = cfg;
  shorter.offload.cpu_adam_params_per_s = 8 * kParams / (0.5 * gpu_step);
  const TrainingResult rs = simulate_training(m, shorter, cl, no_fold());
  CHECK(rs.step_time_s == rel_approx(gpu_step, 1e-9));
  CHECK(rs.breakdown.optimizer_s == abs_approx(0, 1e-12));  // seconds
  // At twice the GPU step: the step is the CPU step and its last tile's upload.
  TrainingConfig longer = cfg;
  longer.offload.cpu_adam_params_per_s = 8 * kParams / (2 * gpu_step);
  CHECK(simulate_training(m, longer, cl, no_fold()).step_time_s == rel_approx(2 * gpu_step + up_tile, 1e-6));
  // Without DPU the CPU step (and the last upload) waits for the gradients: GPU step + CPU step + a tile.
  TrainingConfig serial = shorter;
  serial.offload.delayed_param_update = false;
  CHECK(simulate_training(m, serial, cl, no_fold()).step_time_s ==
        rel_approx(gpu_step + 0.5 * gpu_step + up_tile, 1e-6));
}

TEST_CASE("offload keys: optimizer offload needs ZeRO >= 1, parameter offload ZeRO-3, DPU an offloaded optimizer") {
  const ClusterSpec s = node8_pcie().spec;
  auto read = [&](const char* text, int zero) {
    const Json j = Json::parse(text);
    return read_offload(JsonObject(j, "/training/offload", "t.json"), s, zero);
  };
  const Offload ok = read(R"({"optimizer": "nvme", "params": "cpu", "cpu_adam_gparams_per_s": 2})", 3);
  CHECK(ok.optimizer == Offload::Device::nvme);
  CHECK(ok.params == Offload::Device::cpu);
  CHECK(ok.cpu_adam_params_per_s == rel_approx(2e9, 1e-12));
  CHECK_THROWS_AS(read(R"({"optimizer": "cpu"})", 0), InputError);
  CHECK_THROWS_AS(read(R"({"params": "cpu", "optimizer": "cpu"})", 2), InputError);
  CHECK_THROWS_AS(read(R"({"delayed_param_update": true})", 3), InputError);
  CHECK_THROWS_AS(read(R"({"optimizer": "disk"})", 3), InputError);
  // The host memory of a DGX H100 (2 TB, datasheet) when the cluster is the preset.
  ClusterSpec dgx = s;
  dgx.name = "dgx-h100";
  const Json j = Json::parse(R"({"optimizer": "cpu"})");
  CHECK(read_offload(JsonObject(j, "/training/offload", "t.json"), dgx, 3).host_memory_bytes ==
        rel_approx(2048.0 * 1024 * 1024 * 1024, 1e-12));
}

TEST_CASE("offload keys: the declared defaults are Offload's") {
  const Offload d;
  CHECK(offload_device_names.parse(param_decl(offload_params, "optimizer").def_name) == d.optimizer);
  CHECK(offload_device_names.parse(param_decl(offload_params, "params").def_name) == d.params);
  CHECK(param_decl(offload_params, "pin_memory").def == (d.pin_memory ? 1 : 0));
  CHECK(param_decl(offload_params, "pcie_efficiency").def == d.pcie_efficiency);
  CHECK(param_decl(offload_params, "nvme_gbyte_per_s").def == d.nvme_gbyte_per_s);
  CHECK(param_decl(offload_params, "cpu_adam_gparams_per_s").def * 1e9 == d.cpu_adam_params_per_s);
  CHECK(param_decl(offload_params, "delayed_param_update").def == (d.delayed_param_update ? 1 : 0));
}
