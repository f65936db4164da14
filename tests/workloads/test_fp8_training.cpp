// FP8 training as Transformer Engine runs it: FP8 GEMMs only for the linear layers (their own
// efficiency, split accumulation in backward), the rest in BF16, TE's cast kernels, and the FP8
// weight cache and activations in memory; each against a closed form worked here.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/memory.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

ComputeModel fp8_model() {
  ComputeModel cm;
  cm.dtype = Dtype::fp8;
  cm.peak_flops = 2000e12;
  cm.bf16_peak_flops = 1000e12;
  cm.fp8_peak_flops = 2000e12;
  cm.hbm_bytes_per_s = 3e12;
  cm.gemm_efficiency = 0.6;
  cm.fp8_gemm_efficiency = 0.5;
  cm.fp8_split_accumulator_efficiency = 0.8;
  cm.attention_efficiency = 0.45;
  cm.launch_s = 0;
  cm.gemm_knee = 0;  // shape factors of 1: the efficiencies alone
  return cm;
}

const LayerItem& item(const std::vector<LayerItem>& items, const std::string& name) {
  for (const auto& it : items) {
    if (it.name == name) return it;
  }
  FAIL("no item " << name);
  return items.front();
}

TrainingConfig llama_config(Dtype compute) {
  TrainingConfig cfg;
  cfg.micro_batch = 1;
  cfg.seq_len = 4096;
  cfg.global_batch = 16;
  cfg.parallel.dp = 2;  // 8 micro-batches per step
  cfg.parallel.tp = 2;
  cfg.parallel.sequence_parallel = true;
  cfg.precision.compute = compute;
  return cfg;
}

// The bytes of the distributed optimizer's parameter all-gather over a group of `ranks` GPUs.
double param_gather_bytes(const ModelSpec& m, const TrainingConfig& cfg, std::size_t ranks) {
  const StepProgram p = build_training_step(m, cfg, ctwin::test::h100_node8(), TrainingOptions{});
  double bytes = -1;
  for (const auto& op : p.ops) {
    if (!op.call.valid() || p.names.str(op.name) != "param_all_gather") continue;
    if (p.groups[p.calls[op.call.value].group].size() == ranks) bytes = p.calls[op.call.value].bytes;
  }
  return bytes;
}

}  // namespace

TEST_CASE("fp8: an FP8 GEMM runs at the FP8 peak and efficiency, slower with split accumulation") {
  const ComputeModel cm = fp8_model();
  const double m = 8192, n = 8192, k = 8192, flops = 2 * m * n * k;
  OpCost fwd{OpKind::gemm, flops, 0, m, n, k};
  fwd.dtype = Dtype::fp8;
  CHECK(op_seconds(cm, fwd) == rel_approx(flops / (2000e12 * 0.5), 1e-12));
  OpCost bwd = fwd;
  bwd.split_accumulator = true;
  CHECK(op_seconds(cm, bwd) == rel_approx(flops / (2000e12 * 0.5 * 0.8), 1e-12));
  // A BF16 GEMM (the LM head) in the same model: the BF16 peak at the BF16 efficiency; split
  // accumulation is an FP8 matter.
  OpCost head = bwd;
  head.dtype = Dtype::bf16;
  CHECK(op_seconds(cm, head) == rel_approx(flops / (1000e12 * 0.6), 1e-12));
  // Attention in BF16 at the attention efficiency of the BF16 peak.
  OpCost attn{OpKind::attention, flops, 0};
  attn.dtype = Dtype::bf16;
  CHECK(op_seconds(cm, attn) == rel_approx(flops / (1000e12 * 0.45), 1e-12));
  // Serving's untyped GEMMs in an FP8 model: FP8 with fast accumulation.
  const OpCost untyped{OpKind::gemm, flops, 0, m, n, k};
  CHECK(op_seconds(cm, untyped) == rel_approx(flops / (2000e12 * 0.5), 1e-12));
}

TEST_CASE("fp8: the H100 profile prices BF16 ops at 989 and FP8 GEMMs at 1979 TFLOP/s") {
  const GpuSpec gpu = builtin_gpus().gpus.at("H100-SXM");
  const ComputeModel cm = compute_model(builtin_profile(gpu.name), gpu, Dtype::fp8);
  // The H100 datasheet's dense figures (topology/catalog/gpus.json source).
  CHECK(cm.bf16_peak_flops == rel_approx(989e12, 1e-12));
  CHECK(cm.fp8_peak_flops == rel_approx(1979e12, 1e-12));
  CHECK(cm.fp8_gemm_efficiency == rel_approx(gpu.fp8_gemm_efficiency, 1e-12));
  const ComputeModel bf16 = compute_model(builtin_profile(gpu.name), gpu, Dtype::bf16);
  CHECK(bf16.peak_flops == rel_approx(989e12, 1e-12));
}

TEST_CASE("fp8: only the linear GEMMs are FP8, on 1-byte operands; attention and the LM head stay BF16") {
  const ModelSpec m = builtin_models().models.at("llama2-7b");
  const TrainingConfig cfg = llama_config(Dtype::fp8);
  const LayerShape s = layer_shape(m, cfg);
  const auto layer = transformer_layer(m, s, false, 1);
  const double T = 4096, h = 4096, t = 2;
  for (const char* name : {"qkv", "attn_out", "mlp_up", "mlp_down"}) {
    CAPTURE(name);
    const LayerItem& it = item(layer, name);
    CHECK(it.fwd.dtype == Dtype::fp8);
    CHECK(it.bwd.dtype == Dtype::fp8);
    CHECK_FALSE(it.fwd.split_accumulator);
    CHECK(it.bwd.split_accumulator);
  }
  // (T x h) @ (h x 3h/t): FP8 input and weight, BF16 output.
  const LayerItem& qkv = item(layer, "qkv");
  CHECK(qkv.fwd.bytes == rel_approx(T * h + h * 3 * h / t + 2 * T * 3 * h / t, 1e-12));
  CHECK(qkv.bwd.bytes == rel_approx(2 * qkv.fwd.bytes, 1e-12));
  CHECK(item(layer, "attention").fwd.dtype == Dtype::bf16);
  CHECK(item(layer, "attn_norm").fwd.dtype == Dtype::bf16);
  CHECK(item(layer, "mlp_swiglu").fwd.dtype == Dtype::bf16);
  const auto head = head_items(m, s);
  CHECK(item(head, "lm_head").fwd.dtype == Dtype::bf16);
  CHECK_FALSE(item(head, "lm_head").bwd.split_accumulator);
  // The FLOPs are the BF16 layer's: FP8 changes the rate, not the work; casts add none.
  const auto bf16_layer = transformer_layer(m, layer_shape(m, llama_config(Dtype::bf16)), false, 1);
  CHECK(forward_flops(layer) == rel_approx(forward_flops(bf16_layer), 1e-12));
  CHECK(layer.size() == bf16_layer.size() + 4);  // one cast item per linear layer
}

TEST_CASE("fp8: TE's casts per GEMM and pass, fused into the norm and the activation where TE fuses them") {
  const ModelSpec m = builtin_models().models.at("llama2-7b");
  const LayerShape s = layer_shape(m, llama_config(Dtype::fp8));
  const auto layer = transformer_layer(m, s, false, 1);
  const double T = 4096, h = 4096, t = 2, ffn = 11008, e = 2, micro = 8;
  // Weights: cast and transposed once per step (read 2, write 1 + 1 bytes), over 8 micro-batches.
  auto weights = [&](double k, double n) { return (e + 2) * k * n / micro; };
  // QKV (LayerNormLinear): input cast fused into the norm; its transpose in backward (2 bytes),
  // and the output gradient's cast_transpose (4 bytes per element).
  const LayerItem& qkv = item(layer, "qkv_fp8_cast");
  CHECK(qkv.fwd.bytes == rel_approx(weights(h, 3 * h / t), 1e-12));
  CHECK(qkv.bwd.bytes == rel_approx(2 * T * h + 4 * T * 3 * h / t, 1e-12));
  // Output projection (Linear): the attention output cast in forward, the gradient in backward.
  const LayerItem& out = item(layer, "attn_out_fp8_cast");
  CHECK(out.fwd.bytes == rel_approx(4 * T * h / t + weights(h / t, h), 1e-12));
  CHECK(out.bwd.bytes == rel_approx(4 * T * h, 1e-12));
  // fc1 (LayerNormMLP): input fused into the norm, gradient fused into dSwiGLU.
  const LayerItem& up = item(layer, "mlp_up_fp8_cast");
  CHECK(up.fwd.bytes == rel_approx(weights(h, 2 * ffn / t), 1e-12));
  CHECK(up.bwd.bytes == rel_approx(2 * T * h, 1e-12));
  // fc2: input cast fused into SwiGLU, its transpose and the gradient's cast in backward.
  const LayerItem& down = item(layer, "mlp_down_fp8_cast");
  CHECK(down.fwd.bytes == rel_approx(weights(ffn / t, h), 1e-12));
  CHECK(down.bwd.bytes == rel_approx(2 * T * ffn / t + 4 * T * h, 1e-12));
  CHECK(down.fwd.dtype == Dtype::bf16);
  CHECK(down.fwd.flops == 0);
}

TEST_CASE("fp8: a cast goes before the TP collective that leads into its GEMM") {
  const ModelSpec m = builtin_models().models.at("llama2-7b");
  const auto layer = transformer_layer(m, layer_shape(m, llama_config(Dtype::fp8)), false, 1);
  // attn_norm, cast, all-gather, qkv: tp_comm_overlap overlaps the all-gather with the GEMM.
  REQUIRE(layer.size() > 3);
  CHECK(layer[0].name == "attn_norm");
  CHECK(layer[1].name == "qkv_fp8_cast");
  CHECK(layer[2].name == "tp_all_gather");
  CHECK(layer[3].name == "qkv");
}

TEST_CASE("fp8: memory adds the FP8 weight and its transpose and saves the linear inputs in FP8") {
  const ModelSpec m = builtin_models().models.at("llama2-7b");
  TrainingConfig bf16 = llama_config(Dtype::bf16);
  bf16.parallel.dp = 1;
  bf16.global_batch = 8;
  TrainingConfig fp8 = bf16;
  fp8.precision.compute = Dtype::fp8;
  const double capacity = 80e9;
  const MemoryBreakdown a = estimate_memory(m, bf16, capacity);
  const MemoryBreakdown b = estimate_memory(m, fp8, capacity);
  // Llama 2 7B's linear weights per TP rank: 32 layers of (4 h^2 + 3 h ffn) / t, 1 byte each twice.
  const double h = 4096, ffn = 11008, t = 2, layers = 32;
  const double linear = layers * (4 * h * h + 3 * h * ffn) / t;
  CHECK(b.weights - a.weights == rel_approx(2 * linear, 1e-9));
  // Per layer and micro-batch, one byte less per element of the QKV and MLP inputs (h each), the
  // attention output (h) and fc2's input (ffn), all split over TP with sequence parallelism.
  const double s = 4096;
  const double saved = layers * s * (2 * h + h + ffn) / t;
  CHECK(a.activations_per_microbatch - b.activations_per_microbatch == rel_approx(saved, 1e-9));
}

TEST_CASE("fp8: every FP8 GPU's shipped profile carries the catalog's FP8 GEMM efficiency") {
  const GpuCatalog cat = builtin_gpus();
  int fp8_gpus = 0;
  for (const auto& entry : cat.gpus) {
    const GpuSpec& g = entry.second;
    if (g.fp8_tflops <= 0) continue;
    const std::string name = g.name;
    CAPTURE(name);
    ++fp8_gpus;
    CHECK(builtin_profile(name).compute.fp8_gemm_efficiency == rel_approx(g.fp8_gemm_efficiency, 1e-12));
    // Datasheet rates: FP8 dense is twice BF16 dense on every GPU that has it (L40S's sheet:
    // 733 FP8 against 362.05 BF16, 1.2% over twice).
    CHECK(g.fp8_tflops == rel_approx(2 * g.bf16_tflops, 0.015));
  }
  CHECK(fp8_gpus == 5);  // H100 SXM and PCIe, H200, B200, L40S
}

TEST_CASE("fp8_param_gather keeps the linear weights in FP8 only and the distributed optimizer gathers them in FP8") {
  // Megatron's --fp8-param-gather (TE fp8_model_init): the FP8 weight (and its transpose) is the
  // parameter, so the BF16 copy of every linear weight goes; the parameter all-gather after the
  // step sends 1 byte per linear weight. The tiny Llama's linear weights per layer, by hand:
  // q 64x64, k and v 64x32 each, o 64x64, SwiGLU 3 x 64 x 160 = 43,008; 2 layers over TP 2.
  const ModelSpec m = ctwin::test::tiny_llama(2);
  TrainingConfig c;
  c.micro_batch = 1;
  c.global_batch = 4;
  c.seq_len = 32;
  c.parallel.tp = 2;
  c.parallel.dp = 4;
  c.parallel.zero_stage = 1;
  c.precision.compute = Dtype::fp8;
  TrainingConfig fpg = c;
  fpg.precision.fp8_param_gather = true;
  const double linear = 2 * 43008.0 / 2;
  CHECK(stage_linear_params(m, c, 0) == rel_approx(linear, 1e-12));
  const MemoryBreakdown a = estimate_memory(m, c, 80e9), b = estimate_memory(m, fpg, 80e9);
  CHECK(a.weights - b.weights == rel_approx(2 * linear, 1e-12));  // the BF16 copy, 2 bytes each
  TrainingConfig bf16 = c;
  bf16.precision.compute = Dtype::bf16;  // 1 + 1 bytes of FP8 and transpose: BF16's 2 again
  CHECK(b.weights == rel_approx(estimate_memory(m, bf16, 80e9).weights, 1e-12));
  const double plain = param_gather_bytes(m, c, 4);
  REQUIRE(plain > 0);
  CHECK(plain - param_gather_bytes(m, fpg, 4) == rel_approx(linear * (2 - 1), 1e-12));
}

TEST_CASE("fp8_param_gather: routed experts are gathered in FP8 over their expert-data-parallel group") {
  // The tiny Llama with 8 SwiGLU experts of width 48 per layer over EP 2: each GPU holds 2 layers x
  // 4 experts x 3 x 64 x 48 = 73,728 expert weights, gathered over dp / ep = 4 ranks.
  ModelSpec m = ctwin::test::tiny_llama(2);
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 48;
  TrainingConfig c;
  c.micro_batch = 1;
  c.global_batch = 8;
  c.seq_len = 32;
  c.parallel.dp = 8;
  c.parallel.ep = 2;
  c.parallel.zero_stage = 1;
  c.precision.compute = Dtype::fp8;
  CHECK(param_gather_bytes(m, c, 4) == rel_approx(2 * 73728.0, 1e-12));
  c.precision.fp8_param_gather = true;
  CHECK(param_gather_bytes(m, c, 4) == rel_approx(73728.0, 1e-12));
}
