// KV cache sizing as vLLM does it: hand-worked cases and a published vLLM log.
#include <doctest/doctest.h>

#include <cmath>

#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_memory.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Cluster preset(const std::string& name) {
  ClusterSpec s;
  REQUIRE(preset_cluster(name, 1, builtin_gpus(), s));
  apply_profile(builtin_profile(s.gpu.name), s);
  return build_cluster(s);
}

ServingDeployment llama8b_h100(int tp = 1) {
  ServingDeployment d;
  d.model = builtin_models().models.at("llama3-8b");
  d.cluster = preset("dgx-h100");
  d.overhead = builtin_profile("H100-SXM").serving;
  d.tp = tp;
  return d;
}

}  // namespace

TEST_CASE("serving weights: Llama-3-8B BF16 holds 8,030,261,248 parameters, 2 bytes each") {
  // By hand: embedding and LM head 128256 x 4096 each; per layer Q and O 4096^2, K and V
  // 4096 x 1024, MLP 3 x 4096 x 14336, two norms of 4096; 32 layers; a final norm.
  const double per_layer = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336 + 2 * 4096;
  const double params = 2 * 128256.0 * 4096 + 32 * per_layer + 4096;
  CHECK(params == 8030261248.0);
  const ServingDeployment d = llama8b_h100();
  // Plus RoPE's cos/sin cache, 8192 positions x 128, BF16.
  const double rope = 8192 * 128 * 2;
  CHECK(serving_weight_bytes(d, 0) == rel_approx(2 * params + rope, 1e-12));
  ServingDeployment f = d;
  f.quantization = Quantization::fp8;
  // FP8 halves the layers' GEMM weights; embedding, LM head and norms stay BF16.
  const double bf16_part = 2 * (2 * 128256.0 * 4096 + 32 * 2 * 4096 + 4096);
  CHECK(serving_weight_bytes(f, 0) == rel_approx(bf16_part + (2 * params - bf16_part) / 2 + rope, 1e-12));
}

TEST_CASE("kv_capacity: Llama-3-8B on one H100 80GB at 0.9 has 28,431 blocks (hand-worked)") {
  // total 85,520,809,984 B (nvidia-smi's 81,559 MiB) x 0.9 = 76,968,728,985.6
  //  - weights 16,060,522,496 + RoPE cache 2,097,152
  //  - activations 8192 x (3 x 14336 + 3 x 4096) x 2 = 905,969,664
  //  - non-torch 0.35 GiB = 375,809,638.4  -> 59,624,330,035.2 B
  // block: 16 tokens x 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 2,097,152 B -> 28,431.1
  const ServingDeployment d = llama8b_h100();
  SchedulerConfig s;  // vLLM's defaults: 0.9, 8192 batched tokens, block 16, 4 GiB swap
  const KvCapacity c = kv_capacity(d, s);
  CHECK(c.block_bytes == 2097152.0);
  CHECK(c.activation_bytes == 905969664.0);
  CHECK(c.available_bytes == rel_approx(59624330035.2, 1e-9));
  CHECK(c.num_gpu_blocks == 28431);
  CHECK(c.tokens == 28431 * 16);
  CHECK(c.num_cpu_blocks == 2048);  // 4 GiB / 2 MiB
  CHECK(c.max_concurrency == rel_approx(28431.0 * 16 / 8192, 1e-12));
  CHECK(c.refusal.empty());
}

TEST_CASE("kv_capacity matches vLLM's published log for Llama-3.1-8B on a 24 GB GPU (vllm#10517)") {
  // vllm-project/vllm issue #10517 (RTX 3090, max_model_len 20000, so the profile run has 20000
  // tokens): "Loading model weights took 14.9888 GB ... total_gpu_memory=23.58GiB
  // peak_torch_memory=17.06GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB
  // gpu_memory_utilization=0.90 / # GPU blocks: 1952, # CPU blocks: 2048"; at max_model_len 29000
  // peak_torch_memory=17.98GiB and 1478 GPU blocks.
  ServingDeployment d = llama8b_h100();
  d.model.max_seq = 131072;  // Llama-3.1: Llama-3's shapes, 128K positions
  ClusterSpec cs;
  cs.gpu.name = "RTX-3090";
  cs.gpu.bf16_tflops = 71;
  cs.gpu.hbm_gbyte_per_s = 936;
  cs.gpu.hbm_bytes = 23.58 * kGiB;
  cs.gpus_per_node = 1;
  cs.intra = IntraNodeFabric::pcie;
  d.cluster = build_cluster(cs);
  d.overhead.non_torch_gib = 0.35;
  SchedulerConfig s;
  s.max_num_batched_tokens = 20000;
  s.max_model_len = 20000;
  const KvCapacity c = kv_capacity(d, s);
  // HF's 8,030,261,248 parameters and the RoPE cache (131072 x 128 x 2 B = 0.03125 GiB).
  CHECK(c.weight_bytes / kGiB == rel_approx(14.9888, 0.001));
  CHECK(c.activation_bytes / kGiB == rel_approx(17.06 - 14.9888, 0.01));
  CHECK(std::abs(c.num_gpu_blocks - 1952) <= 10);  // within 0.5% of the log's count
  CHECK(c.num_cpu_blocks == 2048);
  CHECK(c.max_concurrency == rel_approx(1.56, 0.01));  // "Maximum concurrency ... 1.56x"
  s.max_num_batched_tokens = s.max_model_len = 29000;
  const KvCapacity c29 = kv_capacity(d, s);
  CHECK(c29.activation_bytes / kGiB == rel_approx(17.98 - 14.9888, 0.01));
  CHECK(std::abs(c29.num_gpu_blocks - 1478) <= 8);
  // The log's refusal: 1478 x 16 = 23,648 tokens < 29,000.
  CHECK(c29.refusal.find("max_model_len") != std::string::npos);
}

TEST_CASE("kv_capacity: TP 2 halves the KV heads per GPU; an FP8 cache halves the block") {
  const ServingDeployment d2 = llama8b_h100(2);
  SchedulerConfig s;
  const KvCapacity c = kv_capacity(d2, s);
  CHECK(c.block_bytes == 2097152.0 / 2);
  ServingDeployment f = llama8b_h100();
  f.kv_dtype = KvCacheDtype::fp8;
  CHECK(kv_capacity(f, s).block_bytes == 2097152.0 / 2);
  // TP 16 beyond the 8 KV heads: each rank keeps one replicated head, as at TP 8.
  CHECK(kv_block_bytes(llama8b_h100(16), 16, 0) == kv_block_bytes(llama8b_h100(8), 16, 0));
  // Pipeline stages split 32 layers 16/16; 30 layers over 4 stages go 7/8/8/7 (vLLM's
  // get_pp_indices gives the remainder to the stages before the last).
  ServingDeployment p = llama8b_h100();
  p.pp = 4;
  p.model.layers = 30;
  CHECK(stage_layers(p, 0) == 7);
  CHECK(stage_layers(p, 1) == 8);
  CHECK(stage_layers(p, 2) == 8);
  CHECK(stage_layers(p, 3) == 7);
}

TEST_CASE("kv_capacity refuses Llama-3-70B BF16 on one H100: the weights do not fit") {
  ServingDeployment d = llama8b_h100();
  d.model = builtin_models().models.at("llama3-70b");
  const KvCapacity c = kv_capacity(d, SchedulerConfig{});
  CHECK(c.num_gpu_blocks == 0);
  CHECK(c.weight_bytes > 130e9);  // ~70.6e9 parameters x 2 bytes
  CHECK(c.refusal.find("weights") != std::string::npos);
  d.tp = 4;  // 35 GB a GPU
  CHECK(kv_capacity(d, SchedulerConfig{}).refusal.empty());
}

TEST_CASE("kv_block_bytes: MLA caches its latent and RoPE key once a token, on every TP rank") {
  // DeepSeek-V3: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B x 16 tokens.
  ServingDeployment d = llama8b_h100(8);
  d.model = builtin_models().models.at("deepseek-v3");
  CHECK(kv_block_bytes(d, 16, 0) == 16.0 * 61 * (512 + 64) * 2);
  d.tp = 1;
  CHECK(kv_block_bytes(d, 16, 0) == 16.0 * 61 * (512 + 64) * 2);
}

TEST_CASE("serving weights: gpt-oss-120b with its MXFP4 experts on one H100 holds 65,185,376,896 bytes (hand-worked)") {
  // By hand, per the preset (36 layers, hidden 2880, 64 heads and 8 KV heads of 64, 128 experts
  // of a SwiGLU 2880 wide, vocabulary 201,088, untied):
  //   experts 36 x 128 x 3 x 2880 x 2880 = 114,661,785,600 at 4.25 bits (E2M1 and one E8M0 scale
  //     per 32): x 0.53125 = 60,914,073,600 B
  //   attention 36 x 2880 x (4096 + 512 + 512 + 4096) = 955,514,880, BF16
  //   norms 36 x 2 x 2880 = 207,360; routers 36 x 2880 x 128 = 13,271,040; final norm 2,880
  //   embedding and LM head 201,088 x 2880 = 579,133,440 each
  //   RoPE's cos/sin cache 131,072 positions x 64 = 8,388,608
  // BF16 part: 2 x (955,514,880 + 207,360 + 13,271,040 + 2 x 579,133,440 + 2,880 + 8,388,608)
  //   = 4,271,303,296 B; total 65,185,376,896 B (60.7 GiB).
  ServingDeployment d;
  d.model = builtin_models().models.at("gpt-oss-120b");
  d.cluster = preset("dgx-h100");
  d.overhead = builtin_profile("H100-SXM").serving;
  d.quantization = Quantization::mxfp4;
  CHECK(serving_weight_bytes(d, 0) == rel_approx(65185376896.0, 1e-12));
  CHECK(expert_weight_bytes_per_param(Quantization::mxfp4) == 0.53125);
  CHECK(weight_bytes_per_param(Quantization::mxfp4) == 2);  // every GEMM but the experts' stays BF16
  // In BF16 the experts alone would not fit: 2 x 114,661,785,600 B.
  d.quantization = Quantization::none;
  CHECK(serving_weight_bytes(d, 0) == rel_approx(4271303296.0 + 2 * 114661785600.0, 1e-12));
}
