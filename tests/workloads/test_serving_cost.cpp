// The serving iteration cost against closed forms and the collective estimator.
#include <doctest/doctest.h>

#include <cmath>

#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "topology/collective.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_cost.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

Cluster dgx_h100() {
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-h100", 1, builtin_gpus(), s));
  apply_profile(builtin_profile(s.gpu.name), s);
  return build_cluster(s);
}

ServingDeployment deployment(const std::string& model, int tp = 1, Quantization q = Quantization::none) {
  ServingDeployment d;
  d.model = builtin_models().models.at(model);
  d.cluster = dgx_h100();
  d.overhead = builtin_profile("H100-SXM").serving;
  d.tp = tp;
  d.quantization = q;
  return d;
}

// `seqs` decode sequences of context n each (one query token, n keys).
BatchShape decode(std::int64_t seqs, double n) {
  BatchShape b;
  b.decode_seqs = seqs;
  b.decode_tokens = seqs;
  b.decode_attended_pairs = seqs * n;
  b.decode_kv_tokens = seqs * n;
  return b;
}

BatchShape prefill(std::int64_t tokens) {
  BatchShape b;
  b.prefill_seqs = 1;
  b.prefill_tokens = tokens;
  const double c = static_cast<double>(tokens);
  b.prefill_attended_pairs = c * (c + 1) / 2;
  b.prefill_kv_tokens = c;
  return b;
}

// H100 SXM: 3350 GB/s at the catalog's 0.85, 2 us a kernel, 989 TFLOP/s at 0.62.
constexpr double kHbm = 3350e9 * 0.85, kLaunch = 2e-6, kPeak = 989e12 * 0.62;
// The H100 profile's /serving: GEMM weights read at 0.74 of the streaming rate, 1 us of host time
// a sequence (both fit across the serving validation cases, docs/validation.md).
constexpr double kWeightRead = 0.74, kPerSeqUs = 1;
// Llama-3-8B's GEMM weights per layer (Q, K, V, O; gate, up, down) and LM head, parameters.
constexpr double kLayerParams = 2 * 4096.0 * 4096 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336;
constexpr double kHeadParams = 128256.0 * 4096;

}  // namespace

TEST_CASE("decode at batch 1 of Llama-3-8B BF16 on H100 is weight-read bound") {
  const ServingCostModel cm(deployment("llama3-8b"));
  const double n = 1000;
  const IterationTime it = cm.iteration(decode(1, n));
  // Every GEMM weight read once (the layers' at the weight-read share), the KV of 1000 tokens (32 layers x 2 x 1024 x 2
  // B), and 324 kernels: 10 a layer (2 norms, 2 residuals, QKV, attention, O, gate/up, activation, down), the
  // embedding, final norm, LM head and sampling.
  const double bytes = 2 * (32 * kLayerParams / kWeightRead + kHeadParams) + n * 32 * 2 * 1024 * 2;
  const double expected = bytes / kHbm + 324 * kLaunch;
  CHECK(it.decode_s == rel_approx(expected, 0.01));
  CHECK(it.prefill_s == 0);
  CHECK(it.comm_s == 0);
  // A captured CUDA graph: the graph's host overhead plus one sequence's.
  CHECK(it.overhead_s == rel_approx(1e-6 * (300 + kPerSeqUs), 1e-12));
}

TEST_CASE("prefill of 2048 tokens is compute bound near 2 x params x tokens / (peak x efficiency)") {
  const ServingCostModel cm(deployment("llama3-8b"));
  const double T = 2048;
  const IterationTime it = cm.iteration(prefill(2048));
  // GEMMs 2 N T, causal attention 2 x pairs x 32 heads x (128 + 128) a layer at 0.75 of the
  // GEMM efficiency (flash), and the memory-bound kernels of a layer: two norms (read and write
  // T x h), two residual adds (2 reads, 1 write), the SwiGLU (read 2 ffn, write ffn), BF16. The
  // knee (d / (d + 64) per GEMM dimension: 3-6% at these shapes) and launches only add.
  const double gemm = 2 * 32 * kLayerParams * T / kPeak;
  const double attn = 32 * 2 * (T * (T + 1) / 2) * 32 * 256 / (kPeak * 0.75);
  const double streaming = 32 * 2 * T * (2 * 2 * 4096 + 2 * 3 * 4096 + 3 * 14336) / kHbm;
  const double closed = gemm + attn + streaming;
  CHECK(it.prefill_s > closed);
  CHECK(it.prefill_s < 1.08 * closed);
  CHECK(it.decode_s == 0);
}

TEST_CASE("FP8 halves the weight bytes a decode reads; W4A16 quarters them (plus scales)") {
  const double bf16 = ServingCostModel(deployment("llama3-8b")).iteration(decode(1, 1000)).decode_s;
  const double fp8 =
      ServingCostModel(deployment("llama3-8b", 1, Quantization::fp8)).iteration(decode(1, 1000)).decode_s;
  const double w4 =
      ServingCostModel(deployment("llama3-8b", 1, Quantization::w4a16)).iteration(decode(1, 1000)).decode_s;
  // Only the layers' GEMM weights change (the LM head stays BF16, as vLLM leaves it).
  const double layer_bytes = 2 * 32 * kLayerParams;
  CHECK(bf16 - fp8 == rel_approx(layer_bytes / 2 / kWeightRead / kHbm, 0.01));
  // W4A16 reads a quarter of the bytes (plus scales), but the roofline's knee prices a one-row
  // GEMM at 1/65 of the GEMM efficiency, which at 4 bits is slower than the read: the decode lies
  // between the weight-read floor and the FP8 time (a limitation of the shared roofline).
  const double w4_floor = (layer_bytes * (0.5 + 2.0 / 128) / 2 / kWeightRead + 2 * kHeadParams) / kHbm;
  CHECK(w4 > w4_floor);
  CHECK(w4 < fp8);
  // FP8 prefill runs its GEMMs at the FP8 peak: the GEMM part nearly halves.
  const double p16 = ServingCostModel(deployment("llama3-8b")).iteration(prefill(4096)).prefill_s;
  const double p8 = ServingCostModel(deployment("llama3-8b", 1, Quantization::fp8)).iteration(prefill(4096)).prefill_s;
  CHECK(p8 < 0.62 * p16);
  CHECK(p8 > 0.45 * p16);
}

TEST_CASE("TP 2: per-GPU weights halve and each layer adds two all-reduces, custom one-shot or NCCL's estimate") {
  const ServingCostModel one(deployment("llama3-8b", 1));
  ServingDeployment nccl_only = deployment("llama3-8b", 2);
  nccl_only.custom_all_reduce = false;  // vLLM --disable-custom-all-reduce
  const ServingCostModel two(nccl_only);
  const BatchShape b = decode(8, 512);
  const IterationTime t1 = one.iteration(b), t2 = two.iteration(b);
  const Cluster c = dgx_h100();
  auto est = [&](CollectiveOp op, double bytes) {
    CollectiveCall call;
    call.op = op;
    call.ranks = {GpuId(0u), GpuId(1u)};
    call.bytes = bytes;
    return estimate_collective(c, call).time.seconds();
  };
  // 2 per layer, 1 after the vocab-parallel embedding; the logits gathered once.
  const double ar = est(CollectiveOp::all_reduce, 8 * 4096 * 2.0);
  CHECK(two.tp_all_reduce_s(8) == ar);
  CHECK(t2.comm_s == rel_approx(65 * ar + est(CollectiveOp::all_gather, 8 * 128256 * 2.0), 1e-9));
  // Compute: the weight reads halve, the launches do not.
  const double launches = 324 * kLaunch;
  CHECK(t2.decode_s - launches == rel_approx((t1.decode_s - launches) / 2, 0.02));
  // By default the 64 KiB all-reduces run vLLM's custom one-shot kernel: 5.4 us and the peer's
  // buffer read at NCCL's NVLink rate (450 GB/s x 20.6/25); the logits gather stays NCCL's.
  const ServingCostModel custom(deployment("llama3-8b", 2));
  const double one_shot = 5.4e-6 + 8 * 4096 * 2.0 / (450e9 * 20.6 / 25);
  CHECK(custom.tp_all_reduce_s(8) == rel_approx(one_shot, 1e-12));
  CHECK(custom.iteration(b).comm_s ==
        rel_approx(65 * one_shot + est(CollectiveOp::all_gather, 8 * 128256 * 2.0), 1e-9));
}

TEST_CASE("MoE decode reads the distinct experts its tokens touch: E (1 - (1 - k/E)^T)") {
  // Hand count: 2 tokens picking 2 of 8 experts each touch 2 + 2 - 2 x 2/8 = 3.5 on average.
  CHECK(expected_distinct_experts(8, 2, 1) == rel_approx(2, 1e-12));
  CHECK(expected_distinct_experts(8, 2, 2) == rel_approx(3.5, 1e-12));
  CHECK(expected_distinct_experts(8, 2, 1000) == rel_approx(8, 1e-9));
  // Mixtral: one token reads 2 of 8 experts; 64 tokens read all 8. The extra expert weight read
  // at 64 tokens is 6 experts x 3 x 4096 x 14336 x 2 B a layer, at the weight-read share.
  const ServingCostModel cm(deployment("mixtral-8x7b"));
  const double t1 = cm.iteration(decode(1, 100)).decode_s;
  const double t64 = cm.iteration(decode(64, 100)).decode_s;
  const double extra = 32 * 6 * 3 * 4096.0 * 14336 * 2 / kWeightRead / kHbm;
  CHECK(t64 - t1 == rel_approx(extra, 0.05));
}

TEST_CASE("the parts of an iteration add up to its total, and split prefill from decode") {
  ServingDeployment d = deployment("llama3-8b", 2);
  d.spec_method = SpecMethod::draft_model;
  d.draft = builtin_models().models.at("llama3.2-1b");
  const ServingCostModel cm(d);
  BatchShape b = decode(32, 700);
  const BatchShape p = prefill(512);
  b.prefill_seqs = p.prefill_seqs;
  b.prefill_tokens = p.prefill_tokens;
  b.prefill_attended_pairs = p.prefill_attended_pairs;
  b.prefill_kv_tokens = p.prefill_kv_tokens;
  b.spec_k = 3;
  b.decode_tokens = 32 * 4;
  const IterationTime it = cm.iteration(b);
  CHECK(it.total_s == rel_approx(it.prefill_s + it.decode_s + it.comm_s + it.overhead_s + it.draft_s, 1e-12));
  CHECK(it.prefill_s > 0);
  CHECK(it.decode_s > 0);
  CHECK(it.draft_s > 0);
  CHECK(it.comm_s > 0);
}

TEST_CASE("CUDA graphs cut the host overhead of decode-only batches up to the capture size") {
  ServingDeployment d = deployment("llama3-8b");
  const ServingCostModel graph(d);
  d.cuda_graphs = false;
  const ServingCostModel eager(d);
  const BatchShape b = decode(64, 1000);
  CHECK(eager.iteration(b).overhead_s - graph.iteration(b).overhead_s == rel_approx(700e-6, 1e-9));
  CHECK(graph.uses_cuda_graph(b));
  CHECK_FALSE(graph.uses_cuda_graph(decode(513, 1000)));  // beyond vLLM's 512
  CHECK_FALSE(graph.uses_cuda_graph(prefill(64)));        // mixed / prefill batches run eagerly
  CHECK(graph.iteration(prefill(64)).overhead_s == rel_approx(1e-6 * (1000 + kPerSeqUs), 1e-12));
}

TEST_CASE("speculative proposers: k draft-model steps, an n-gram lookup on the CPU") {
  ServingDeployment d = deployment("llama3-8b");
  d.spec_method = SpecMethod::draft_model;
  d.draft = builtin_models().models.at("llama3.2-1b");
  const ServingCostModel cm(d);
  BatchShape b = decode(16, 500);
  b.spec_k = 4;
  b.decode_tokens = 16 * 5;
  // One draft step: the draft's decode of 16 tokens without the host overhead.
  ServingDeployment dd = deployment("llama3.2-1b");
  const IterationTime step = ServingCostModel(dd).iteration(decode(16, 500));
  CHECK(cm.iteration(b).draft_s == rel_approx(4 * (step.total_s - step.overhead_s), 1e-9));
  d.spec_method = SpecMethod::ngram;
  d.draft.reset();
  CHECK(ServingCostModel(d).iteration(b).draft_s == rel_approx(16 * 2e-6, 1e-12));
  // The target verifies 1 + k tokens a sequence: more than a plain decode, far less than 5x.
  const double plain = ServingCostModel(deployment("llama3-8b")).iteration(decode(16, 500)).decode_s;
  const double verify = ServingCostModel(deployment("llama3-8b")).iteration(b).decode_s;
  CHECK(verify > plain);
  CHECK(verify < 1.5 * plain);
}

TEST_CASE("DeepSeek-V3 (MLA, 3 dense + 58 MoE layers) at TP 8 with expert parallelism: parts add up") {
  ServingDeployment d = deployment("deepseek-v3", 8, Quantization::fp8);
  d.expert_parallel = true;
  const ServingCostModel cm(d);
  const IterationTime it = cm.iteration(decode(64, 2000));
  CHECK(std::isfinite(it.total_s));
  CHECK(it.total_s == rel_approx(it.prefill_s + it.decode_s + it.comm_s + it.overhead_s + it.draft_s, 1e-12));
  // 64 tokens x top-8 of 256 experts touch 256 (1 - (1 - 8/256)^64) = 222.4 experts in all, so
  // each EP rank reads about 222.4 / 8 of its 32: most, not all of them.
  CHECK(expected_distinct_experts(256, 8, 64) == rel_approx(256 * (1 - std::pow(248.0 / 256, 64)), 1e-12));
  // 61 layers, two all-reduces each, one after the embedding (and the logits' gather).
  CHECK(it.comm_s > 123 * cm.tp_all_reduce_s(64));
}

TEST_CASE("mxfp4: the routed experts' GEMMs read 4.25-bit weights, every other GEMM reads BF16") {
  // One decode token of gpt-oss-120b at TP1: each layer's up projection runs its 4 routed rows
  // through (2880 x 5760) experts. The op's bytes are the weights read (at the profile's read
  // share) plus the activations, 2 x 4 x (2880 + 5760) = 69,120 B; MXFP4 changes only the first
  // term, by 0.53125 / 2.
  const ServingDeployment bf16 = deployment("gpt-oss-120b");
  const ServingDeployment mx = deployment("gpt-oss-120b", 1, Quantization::mxfp4);
  BatchShape b;
  b.window = bf16.model.attention_window;
  add_decode_sequence(b, 100, 0);
  const auto ops_b = ServingCostModel(bf16).iteration_ops(b);
  const auto ops_m = ServingCostModel(mx).iteration_ops(b);
  REQUIRE(ops_b.size() == ops_m.size());
  int experts = 0, other = 0;
  for (std::size_t i = 0; i < ops_b.size(); ++i) {
    const std::string name = ops_b[i].name;
    CAPTURE(name);
    if (name == "experts_up") {
      const double act = 69120;
      CHECK((ops_m[i].cost.bytes - act) == rel_approx((ops_b[i].cost.bytes - act) * 0.53125 / 2, 1e-12));
      ++experts;
    } else if (name == "qkv" || name == "o_proj" || name == "router" || name == "lm_head") {
      CHECK(ops_m[i].cost.bytes == ops_b[i].cost.bytes);
      ++other;
    }
  }
  CHECK(experts == 36);
  CHECK(other == 3 * 36 + 1);
}
