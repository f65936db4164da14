// Memory per GPU against closed forms, at made-up dimensions small enough to check by hand.
//
// References:
// - Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
//   Models", Sec. 5 and Fig. 1: mixed-precision Adam keeps 2 (fp16 weights) + 2 (fp16 grads)
//   + K = 12 (fp32 master weights, momentum, variance) bytes per parameter; P_os divides the
//   12 by N_d, P_os+g also the gradients' 2, P_os+g+p also the weights' 2.
// - Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
//   Sec. 4: per layer sbh(34 + 5as/h) bytes without parallelism; sbh(10 + 24/t + 5as/(ht))
//   with TP; sbh/t (34 + 5as/h) with TP + SP; selective recompute drops the 5as/h term; full
//   recompute keeps the 2sbh layer input. 1F1B's first stage holds p micro-batches of its L/p
//   layers; interleaving multiplies that by 1 + (p - 1)/(pv) (Sec. 4.2.3).
//
// Where the model deliberately deviates from the papers (each checked below):
// - Korthikanti assumes dropout; the model counts its masks only with dropout on (2 sbh).
// - Flash attention keeps no s x s scores (the 5as/h term is gone, as with selective
//   recompute); its per-row softmax statistics are not counted.
// - GQA and SwiGLU generalise the per-layer form: Q, K, V and the attention output are stored
//   at their own widths; a SwiGLU MLP keeps three ffn-wide tensors (gate, up, product).
// - In-flight micro-batches come from the schedule's order (stage s of 1F1B holds
//   min(p - s, m); GPipe holds all m on every stage; interleaved counts chunk forwards / v).
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// A GPT-style layer small enough to count by hand: s = 32, b = 2, h = 64, a = 4, 4h MLP.
ModelSpec tiny_gpt() { return ctwin::test::tiny_gpt(); }

using ctwin::test::tiny_llama;  // GQA 4 x 16 / 2 KV heads, SwiGLU 160, RMSNorm, 128 vocab

TrainingConfig korthikanti_cfg(int tp, bool sp, Recompute rc) {
  TrainingConfig c;
  c.parallel.tp = tp;
  c.parallel.sequence_parallel = sp;
  c.micro_batch = 2;
  c.global_batch = 2;
  c.seq_len = 32;
  c.attention = AttentionKernel::standard;
  c.dropout = true;
  c.recompute = rc;
  return c;
}

constexpr double s = 32, b = 2, h = 64, a = 4;

}  // namespace

TEST_CASE("Korthikanti, no parallelism: a GPT layer keeps sbh(34 + 5as/h) bytes = 4096 * 44 at s=32 b=2 h=64 a=4") {
  const double expected = s * b * h * (34 + 5 * a * s / h);  // 4096 * (34 + 10) = 180,224
  CHECK(expected == 180224);
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(1, false, Recompute::none), false) ==
        rel_approx(expected, 1e-12));
}

TEST_CASE("Korthikanti, TP without SP: sbh(10 + 24/t + 5as/(ht)) at t = 2 and t = 4") {
  for (double t : {2.0, 4.0}) {
    CAPTURE(t);
    const double expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
    CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(static_cast<int>(t), false, Recompute::none), false) ==
          rel_approx(expected, 1e-12));
  }
}

TEST_CASE("Korthikanti, TP with SP: sbh/t (34 + 5as/h)") {
  const double t = 4;
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(4, true, Recompute::none), false) ==
        rel_approx(s * b * h / t * (34 + 5 * a * s / h), 1e-12));
}

TEST_CASE("Korthikanti, selective recompute: sbh(10 + 24/t) without SP, 34 sbh/t with SP") {
  const double t = 2;
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(2, false, Recompute::selective), false) ==
        rel_approx(s * b * h * (10 + 24 / t), 1e-12));
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(2, true, Recompute::selective), false) ==
        rel_approx(34 * s * b * h / t, 1e-12));
}

TEST_CASE("Korthikanti, full recompute keeps only the 2sbh layer input (2sbh/t with SP)") {
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(1, false, Recompute::full), false) ==
        rel_approx(2 * s * b * h, 1e-12));
  CHECK(activation_bytes_per_layer(tiny_gpt(), korthikanti_cfg(4, true, Recompute::full), false) ==
        rel_approx(2 * s * b * h / 4, 1e-12));
}

TEST_CASE("deviation: without dropout a GPT layer keeps 32 sbh + 2as^2b (no masks, no dropped-out scores)") {
  TrainingConfig c = korthikanti_cfg(1, false, Recompute::none);
  c.dropout = false;
  // Korthikanti's 34 less the two 1-byte masks; 5as^2b less the mask (1) and the copy (2).
  CHECK(activation_bytes_per_layer(tiny_gpt(), c, false) == rel_approx(32 * s * b * h + 2 * a * s * s * b, 1e-12));
}

TEST_CASE("deviation: flash attention keeps no s x s term: 34 sbh with dropout") {
  TrainingConfig c = korthikanti_cfg(1, false, Recompute::none);
  c.attention = AttentionKernel::flash;
  CHECK(activation_bytes_per_layer(tiny_gpt(), c, false) == rel_approx(34 * s * b * h, 1e-12));
}

TEST_CASE("GQA + SwiGLU layer: 8sbh replicated + 2sb(q + k + v + o widths) + 2sb * 3 ffn, by hand 118,784 bytes") {
  TrainingConfig c = korthikanti_cfg(1, false, Recompute::none);
  c.attention = AttentionKernel::flash;
  c.dropout = false;
  // sb = 64 tokens. Replicated: 2 norm inputs + QKV input + MLP input at 2 bytes = 8 * 64 * 64.
  // Split: Q 64 + K 32 + V 32 + attention output 64 wide at 2 bytes; gate, up, product 160 wide.
  const double expected = 8 * 64 * 64 + 2 * 64 * (64 + 32 + 32 + 64) + 2 * 64 * 3 * 160;
  CHECK(expected == 118784);
  CHECK(activation_bytes_per_layer(tiny_llama(), c, false) == rel_approx(expected, 1e-12));
  // With TP = 2 the split part halves, the replicated part does not.
  c.parallel.tp = 2;
  CHECK(activation_bytes_per_layer(tiny_llama(), c, false) ==
        rel_approx(8 * 64 * 64 + (2 * 64 * (64 + 32 + 32 + 64) + 2 * 64 * 3 * 160) / 2, 1e-12));
}

namespace {

// Parameters of the tiny Llama by hand: per layer q 64x64, k and v 64x32, o 64x64 (12,288),
// MLP 3 x 64 x 160 (30,720), two RMSNorm scales (128): 43,136. Embedding and LM head 128 x 64
// each; the final norm 64.
constexpr double kLayer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
constexpr double kVocab = 128 * 64;

TrainingConfig zero_cfg(int dp, int zero) {
  TrainingConfig c;
  c.parallel.dp = dp;
  c.parallel.zero_stage = zero;
  c.micro_batch = 1;
  c.global_batch = dp;
  c.seq_len = 32;
  c.recompute = Recompute::full;
  return c;
}

}  // namespace

TEST_CASE("a single-stage tiny Llama holds 4 layers + embedding + LM head + final norm = 180,864 parameters") {
  static_assert(kLayer == 43136);
  CHECK(stage_params(tiny_llama(), zero_cfg(1, 0), 0) == rel_approx(4 * kLayer + 2 * kVocab + 64, 1e-12));
}

TEST_CASE("two pipeline stages split layers; the embedding sits on the first, the LM head and final norm on the last") {
  TrainingConfig c = zero_cfg(1, 0);
  c.parallel.pp = 2;
  CHECK(stage_params(tiny_llama(), c, 0) == rel_approx(2 * kLayer + kVocab, 1e-12));
  CHECK(stage_params(tiny_llama(), c, 1) == rel_approx(2 * kLayer + kVocab + 64, 1e-12));
}

TEST_CASE("ZeRO stages 0-3 at dp = 4: 16, 4 + 12/4, 2 + 14/4 and 16/4 bytes per parameter") {
  const double p = 4 * kLayer + 2 * kVocab + 64;
  struct Row {
    int zero;
    double weights, grads, optimizer;  // bytes per parameter
  };
  for (const Row& r : {Row{0, 2, 2, 12}, Row{1, 2, 2, 3}, Row{2, 2, 0.5, 3}, Row{3, 0.5, 0.5, 3}}) {
    CAPTURE(r.zero);
    const auto mem = estimate_memory(tiny_llama(), zero_cfg(4, r.zero), 80e9);
    CHECK(mem.weights == rel_approx(r.weights * p, 1e-12));
    CHECK(mem.grads == rel_approx(r.grads * p, 1e-12));
    CHECK(mem.optimizer == rel_approx(r.optimizer * p, 1e-12));
  }
}

TEST_CASE("ZeRO's published figure: 7.5B parameters on 64 GPUs need 120, 31.4, 16.6 and 1.9 GB") {
  // Rajbhandari et al. 2020, Fig. 1. Model states per parameter from estimate_memory, scaled to
  // 7.5B; the paper rounds to 0.1 GB.
  const double p = 4 * kLayer + 2 * kVocab + 64;
  const double published_gb[] = {120, 31.4, 16.6, 1.9};
  for (int z = 0; z < 4; ++z) {
    CAPTURE(z);
    const auto mem = estimate_memory(tiny_llama(), zero_cfg(64, z), 80e9);
    const double per_param = (mem.weights + mem.grads + mem.optimizer) / p;
    CHECK(per_param * 7.5 == ctwin::test::abs_approx(published_gb[z], 0.05));  // GB
  }
}

TEST_CASE("ZeRO shards nothing at dp = 1") {
  const double p = 4 * kLayer + 2 * kVocab + 64;
  const auto mem = estimate_memory(tiny_llama(), zero_cfg(1, 3), 80e9);
  CHECK(mem.weights + mem.grads + mem.optimizer == rel_approx(16 * p, 1e-12));
}

namespace {

// The tiny Llama on p = 2 stages, 4 micro-batches of b = 2, s = 32, flash, no dropout: every
// layer keeps 118,784 bytes per micro-batch (see above); each stage has 2 layers (4 / p, or 2
// chunks of 1 layer when interleaved with v = 2).
TrainingConfig pipe_cfg(PipelineSchedule sc, int pp, int m, int v = 1) {
  TrainingConfig c;
  c.parallel.pp = pp;
  c.parallel.schedule = sc;
  c.parallel.virtual_stages = v;
  c.micro_batch = 2;
  c.global_batch = 2 * m;
  c.seq_len = 32;
  c.attention = AttentionKernel::flash;
  return c;
}
constexpr double kAct = 118784;
// The last stage also keeps one micro-batch's logits: 64 tokens x 128 vocab x (2 + 4) bytes.
constexpr double kLogits = 64 * 128 * 6;

}  // namespace

TEST_CASE("1F1B on 2 stages, 4 micro-batches: stage 0 keeps 2 micro-batches of 2 layers, stage 1 keeps 1 + logits") {
  const auto c = pipe_cfg(PipelineSchedule::one_f_one_b, 2, 4);
  CHECK(inflight_microbatches(c, 0) == 2);
  CHECK(inflight_microbatches(c, 1) == 1);
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).activations == rel_approx(2 * 2 * kAct, 1e-12));
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 1).activations == rel_approx(1 * 2 * kAct + kLogits, 1e-12));
}

TEST_CASE("1F1B on 4 stages, 8 micro-batches: stage s keeps p - s = 4, 3, 2, 1 micro-batches") {
  ModelSpec m = tiny_llama();
  m.layers = 8;
  const auto c = pipe_cfg(PipelineSchedule::one_f_one_b, 4, 8);
  for (int st = 0; st < 4; ++st) {
    CAPTURE(st);
    CHECK(inflight_microbatches(c, st) == 4 - st);
    const double logits = st == 3 ? kLogits : 0;
    CHECK(estimate_stage_memory(m, c, 80e9, st).activations == rel_approx((4 - st) * 2 * kAct + logits, 1e-12));
  }
}

TEST_CASE("1F1B with fewer micro-batches than stages: stage s keeps min(p - s, m)") {
  const auto c = pipe_cfg(PipelineSchedule::one_f_one_b, 4, 2);
  CHECK(inflight_microbatches(c, 0) == 2);
  CHECK(inflight_microbatches(c, 1) == 2);
  CHECK(inflight_microbatches(c, 2) == 2);
  CHECK(inflight_microbatches(c, 3) == 1);
}

TEST_CASE("GPipe keeps all m micro-batches on every stage, the last one included") {
  const auto c = pipe_cfg(PipelineSchedule::gpipe, 2, 4);
  CHECK(inflight_microbatches(c, 0) == 4);
  CHECK(inflight_microbatches(c, 1) == 4);
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 1).activations == rel_approx(4 * 2 * kAct + kLogits, 1e-12));
}

TEST_CASE("interleaved, p = 2, v = 2: stage 0 keeps p (1 + (p - 1)/(pv)) = 2.5 stage micro-batches") {
  const auto c = pipe_cfg(PipelineSchedule::interleaved, 2, 4, 2);
  const double p = 2, v = 2;
  CHECK(inflight_microbatches(c, 0) == rel_approx(p * (1 + (p - 1) / (p * v)), 1e-12));
  CHECK(inflight_microbatches(c) == rel_approx(2.5, 1e-12));
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).activations == rel_approx(2.5 * 2 * kAct, 1e-12));
}

TEST_CASE("interleaved, p = 4, v = 4, 8 micro-batches: stage s keeps (2(p-s-1) + p(v-1) + 1)/v stage micro-batches") {
  // Stage 0: (6 + 12 + 1) / 4 = 4.75 = 4 (1 + 3/16), Megatron's factor; the last stage:
  // (0 + 12 + 1) / 4 = 3.25 (it runs chunks 0..2 of 4 micro-batches before its first backward).
  const auto c = pipe_cfg(PipelineSchedule::interleaved, 4, 8, 4);
  CHECK(inflight_microbatches(c, 0) == rel_approx(4.75, 1e-12));
  CHECK(inflight_microbatches(c, 1) == rel_approx(4.25, 1e-12));
  CHECK(inflight_microbatches(c, 3) == rel_approx(3.25, 1e-12));
}

TEST_CASE("zero-bubble keeps 1F1B's activation memory: p - s micro-batches") {
  const auto c = pipe_cfg(PipelineSchedule::zero_bubble, 2, 4);
  CHECK(inflight_microbatches(c, 0) == 2);
  CHECK(inflight_microbatches(c, 1) == 1);
}

TEST_CASE("estimate_memory reports the stage with the higher peak") {
  // 1F1B, p = 2: stage 0 keeps 4 layer-micro-batches (475,136 bytes), stage 1 two plus the
  // logits (286,720); their static states differ by the final norm (64 x 16 bytes).
  const auto c = pipe_cfg(PipelineSchedule::one_f_one_b, 2, 4);
  const auto worst = estimate_memory(tiny_llama(), c, 80e9);
  CHECK(worst.activations == rel_approx(2 * 2 * kAct, 1e-12));
  CHECK(worst.peak == rel_approx(estimate_stage_memory(tiny_llama(), c, 80e9, 0).peak, 1e-12));
}

TEST_CASE("out-of-memory advice proposes only what the current settings leave to try") {
  const ModelSpec m = test::tiny_llama();
  // Activations dominate: 64 sequences a micro-batch (about 15 MB of activations against 2.6 MB
  // of optimizer states for the tiny model's 214k parameters); 1 byte of memory so nothing fits.
  TrainingConfig c = test::tiny_layout(2, 1, 2, 1);
  c.micro_batch = 64;
  c.global_batch = 128;
  c.recompute = Recompute::none;
  MemoryBreakdown mb = estimate_memory(m, c, 1.0);
  REQUIRE(mb.oom);
  REQUIRE(mb.dominant == "activations");
  // A fused attention kernel keeps no scores, so selective recomputation would free nothing.
  CHECK(mb.advice.find("recompute \"full\"") != std::string::npos);
  CHECK(mb.advice.find("selective") == std::string::npos);
  CHECK(mb.advice.find("sequence_parallel") != std::string::npos);
  c.attention = AttentionKernel::standard;  // unfused: selective frees the softmax output
  mb = estimate_memory(m, c, 1.0);
  REQUIRE(mb.dominant == "activations");
  CHECK(mb.advice.find("recompute \"selective\" or \"full\"") != std::string::npos);
  c.attention = AttentionKernel::flash;
  c.recompute = Recompute::selective;
  c.parallel.sequence_parallel = true;
  mb = estimate_memory(m, c, 1.0);
  REQUIRE(mb.dominant == "activations");
  CHECK(mb.advice.find("recompute \"full\"") != std::string::npos);
  CHECK(mb.advice.find("selective") == std::string::npos);
  CHECK(mb.advice.find("sequence_parallel") == std::string::npos);  // already on
  // Full recomputation keeps only each layer's input (2 x 32 x 512 x 64 bytes a layer at 512
  // sequences, halved by sequence parallelism over TP 2: 4.2 MB over 4 layers): activations
  // still dominate, and recompute is not proposed.
  c.recompute = Recompute::full;
  c.micro_batch = 512;
  c.global_batch = 1024;
  mb = estimate_memory(m, c, 1.0);
  REQUIRE(mb.dominant == "activations");
  CHECK(mb.advice.find("recompute") == std::string::npos);
  CHECK(mb.advice.find("a smaller micro_batch") != std::string::npos);
  c.micro_batch = 1;
  c.global_batch = 2;
  mb = estimate_memory(m, c, 1.0);
  CHECK(mb.advice.find("recompute") == std::string::npos);    // already full
  CHECK(mb.advice.find("micro_batch") == std::string::npos);  // already 1
  // Optimizer states dominate with full recomputation: ZeRO is the next step until it is 3.
  REQUIRE(mb.dominant == "optimizer");
  c.parallel.zero_stage = 1;
  CHECK(estimate_memory(m, c, 1.0).advice.find("zero_stage 2") != std::string::npos);
  c.parallel.zero_stage = 3;
  CHECK(estimate_memory(m, c, 1.0).advice.find("zero_stage") == std::string::npos);
  CHECK(estimate_memory(m, c, 1.0).advice.find("more pp or tp") != std::string::npos);
}

TEST_CASE("MLP saved tensors by activation: 3 ffn-wide for swiglu and geglu, 2 for gelu and relu2, 1 for relu") {
  // The tiny Llama (flash, no dropout, s b = 64 tokens): 8 sbh + 2 sb (64 + 32 + 32 + 64) for
  // norms and attention, then k tensors 160 wide at 2 bytes. Gated: gate and up outputs (the
  // activation's inputs) and their product (fc2's input). GELU: its input and output. Squared
  // ReLU: relu(x), which the square's backward needs, and the square (fc2's input). ReLU: its
  // output only, which is also fc2's input.
  TrainingConfig c = korthikanti_cfg(1, false, Recompute::none);
  c.attention = AttentionKernel::flash;
  c.dropout = false;
  const double common = 8 * 64 * 64 + 2 * 64 * (64 + 32 + 32 + 64);
  const std::pair<Activation, double> kinds[] = {{Activation::swiglu, 3},
                                                 {Activation::geglu, 3},
                                                 {Activation::gelu, 2},
                                                 {Activation::relu2, 2},
                                                 {Activation::relu, 1}};
  for (const auto& [act, widths] : kinds) {
    ModelSpec m = tiny_llama();
    m.activation = act;
    const std::string name = to_string(m.activation);  // clang 14 cannot CAPTURE a binding
    CAPTURE(name);
    CHECK(activation_bytes_per_layer(m, c, false) == rel_approx(common + 2 * 64 * widths * 160, 1e-12));
  }
}

TEST_CASE("MLP weights by activation: gated kinds 3 h f, the others 2 h f") {
  // Gate, up and down for SwiGLU (Llama) and GeGLU (Gemma); up and down for GELU, ReLU and
  // squared ReLU (Nemotron-4).
  const std::pair<Activation, double> kinds[] = {{Activation::swiglu, 3},
                                                 {Activation::geglu, 3},
                                                 {Activation::gelu, 2},
                                                 {Activation::relu, 2},
                                                 {Activation::relu2, 2}};
  for (const auto& [act, matrices] : kinds) {
    ModelSpec m = tiny_llama();  // RMSNorm: no biases
    m.activation = act;
    const std::string name = to_string(m.activation);  // clang 14 cannot CAPTURE a binding
    CAPTURE(name);
    CHECK(dense_mlp_params(m, 160) == rel_approx(matrices * 64.0 * 160, 1e-12));
  }
}

TEST_CASE("uneven interleaved chunks: each in-flight chunk forward holds its own layers, not 1/v of the stage") {
  // p = 2, v = 2, 4 micro-batches, layers per virtual stage (chunk * p + stage) 0, 2, 1, 1: stage
  // 0's first chunk holds no layer (Llama 3's embedding-only chunk), its second one. Stage 0's
  // Megatron order: F(c0,0) F(c0,1) F(c1,0) F(c1,1) | F(c0,2) B(c1,0) | F(c0,3) B(c1,1) |
  // F(c1,2) B(c0,0) | F(c1,3) B(c0,1) | B... : at most two chunk-1 forwards (one layer each)
  // are held at once, 2 layer-micro-batches; an even 1/v share would count 2.5 x 1 layer.
  auto c = pipe_cfg(PipelineSchedule::interleaved, 2, 4, 2);
  c.parallel.pipeline_layers = {0, 2, 1, 1};
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).activations == rel_approx(2 * kAct, 1e-12));
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).activations_per_microbatch == rel_approx(kAct, 1e-12));
}

TEST_CASE("ZeRO shards over dp x cp: context-parallel ranks hold the same layers and share the optimizer states") {
  // dp = 2, cp = 2: the distributed optimizer's 12 bytes per parameter over 4 ranks (Megatron's
  // data-parallel group with context parallelism); ZeRO-2 shards the 2-byte gradients too.
  const double p = 4 * kLayer + 2 * kVocab + 64;
  auto c = zero_cfg(2, 1);
  c.parallel.cp = 2;
  c.global_batch = 2;
  const auto z1 = estimate_memory(tiny_llama(), c, 80e9);
  CHECK(z1.optimizer == rel_approx(12 * p / 4, 1e-12));
  CHECK(z1.grads == rel_approx(2 * p, 1e-12));
  c.parallel.zero_stage = 2;
  CHECK(estimate_memory(tiny_llama(), c, 80e9).grads == rel_approx(2 * p / 4, 1e-12));
}

TEST_CASE("out-of-memory advice names the fewest layers block recomputation must rerun to fit, found by a scan") {
  // 8 layers on one stage, 16 sequences a micro-batch: activations dominate. For each capacity
  // between the peaks of block recomputation over k and k - 1 layers, the advice must name k, the
  // smallest count a plain scan over 1..7 finds to fit.
  const ModelSpec m = test::tiny_llama(8);
  TrainingConfig c = test::tiny_layout(1, 1, 1, 1);
  c.micro_batch = 16;
  c.global_batch = 16;
  TrainingConfig block = c;
  block.recompute = Recompute::full;
  block.recompute_method = RecomputeMethod::block;
  std::vector<double> peak(9, 0.0);
  for (int k = 1; k <= 8; ++k) {
    block.recompute_num_layers = k;
    peak[static_cast<std::size_t>(k)] = estimate_memory(m, block, 1e18).peak;
  }
  REQUIRE(estimate_memory(m, c, 1e18).peak > peak[1]);
  int raised = 0;
  for (int want = 1; want <= 7; ++want) {
    CAPTURE(want);
    // Just above the peak with `want` layers recomputed: the scan's answer.
    const double capacity = peak[static_cast<std::size_t>(want)] * (1 + 1e-9);
    int scan = 0;
    for (int k = 1; k <= 7 && scan == 0; ++k) scan = peak[static_cast<std::size_t>(k)] <= capacity ? k : 0;
    REQUIRE(scan == want);  // the peak falls with each layer recomputed
    const MemoryBreakdown mb = estimate_memory(m, c, capacity);
    REQUIRE(mb.oom);
    CHECK(mb.advice.find("recompute_num_layers " + std::to_string(want) + " (the fewest that fit)") !=
          std::string::npos);
    // Already recomputing fewer layers by block: the count to raise it to.
    block.recompute_num_layers = std::max(1, want - 1);
    if (want > 1) {
      const MemoryBreakdown mb2 = estimate_memory(m, block, capacity);
      REQUIRE(mb2.oom);
      // Recompute advice is for activations that dominate (with 6 or 7 layers recomputed the
      // tiny model's optimizer states do).
      if (mb2.dominant == "activations") {
        ++raised;
        CHECK(mb2.advice.find("try recompute_num_layers " + std::to_string(want)) != std::string::npos);
      }
    }
  }
  CHECK(raised >= 3);
  // Where only recomputing every layer fits, the advice is plain full recomputation.
  const MemoryBreakdown all = estimate_memory(m, c, std::min(peak[7], peak[8]) * (1 - 1e-6));
  CHECK(all.advice.find("recompute_num_layers") == std::string::npos);
  CHECK(all.advice.find("recompute \"full\"") != std::string::npos);
}

TEST_CASE("out-of-memory advice offers fp8_param_gather to FP8 training that keeps a BF16 copy") {
  const ModelSpec m = test::tiny_llama();
  TrainingConfig c = test::tiny_layout(1, 1, 1, 1);
  c.precision.compute = Dtype::fp8;
  CHECK(estimate_memory(m, c, 1.0).advice.find("fp8_param_gather") != std::string::npos);
  c.precision.fp8_param_gather = true;  // already on
  CHECK(estimate_memory(m, c, 1.0).advice.find("fp8_param_gather") == std::string::npos);
  c.precision.compute = Dtype::bf16;  // no FP8 weights to keep
  c.precision.fp8_param_gather = false;
  CHECK(estimate_memory(m, c, 1.0).advice.find("fp8_param_gather") == std::string::npos);
}
