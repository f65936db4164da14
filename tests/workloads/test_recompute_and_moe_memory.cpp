// Hardware FLOPs of recomputation and MoE activation memory against hand-worked closed forms.
//
// References:
// - Korthikanti et al. 2022, Sec. 5 and Table 4: selective recomputation runs the attention
//   core (QK^T and softmax-weighted V) again in backward (Megatron-Core: a fused kernel too);
//   full recomputation runs every layer's forward again. Hardware FLOPs = model FLOPs + the recomputed forward.
// - The attention core's forward is 2 GEMMs of 2 s d FLOPs per query per head: 4 s h_q per
//   token per layer (non-causal, as model FLOPs count it; Narayanan et al. 2021).
// - A MoE layer's MLP activations: each token's hidden state goes to top_k routed experts (times
//   the capacity factor) and to every shared expert, each keeping its own intermediates.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"
#include "workloads/pipeline_split.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// 2 layers of the shared tiny Llama (tests/support/tiny_models.hpp).
ModelSpec tiny_llama() { return ctwin::test::tiny_llama(2); }

TrainingConfig cfg_with(Recompute rc) {
  TrainingConfig c;
  c.micro_batch = 2;
  c.global_batch = 2;
  c.seq_len = 32;
  c.recompute = rc;
  return c;
}

// Per layer, by hand: q 64x64, k and v 64x32 each, o 64x64 = 12,288; SwiGLU 3 x 64 x 160 = 30,720.
constexpr double kLayerWeights = 12288 + 30720;
constexpr double kTokens = 2 * 32;
// Attention core forward: 4 * s * h_q per token per layer = 4 * 32 * 64 = 8,192.
constexpr double kAttentionPerTokenLayer = 4 * 32 * 64;

// The tiny Llama with every layer MoE: 8 SwiGLU experts of width 48, top 2.
ModelSpec tiny_moe() {
  ModelSpec m = tiny_llama();
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 48;
  return m;
}

}  // namespace

TEST_CASE("no recomputation costs no extra FLOPs") {
  CHECK(recompute_flops_per_step(tiny_llama(), cfg_with(Recompute::none)) == 0);
}

TEST_CASE("selective recomputation with flash attention runs the fused kernel's causal forward again: 2 s h_q") {
  // Megatron-Core checkpoints core attention whatever its kernel (attention.py,
  // checkpoint_core_attention): the fused kernel's forward, the causal half of 4 s h_q.
  CHECK(recompute_flops_per_step(tiny_llama(), cfg_with(Recompute::selective)) ==
        rel_approx(2 * kTokens * kAttentionPerTokenLayer / 2, 1e-12));
}

TEST_CASE("selective recomputation of unfused attention costs its core's forward again: 4 s h_q per token per layer") {
  TrainingConfig c = cfg_with(Recompute::selective);
  c.attention = AttentionKernel::standard;
  const double expected = 2 * kTokens * kAttentionPerTokenLayer;  // 2 layers
  CHECK(recompute_flops_per_step(tiny_llama(), c) == rel_approx(expected, 1e-12));
}

TEST_CASE("full recomputation costs every layer's forward again: 2 x layer weights + the attention kernels") {
  // Unfused attention's GEMMs do the full s x s (4 s h_q); flash's causal kernel half of it.
  TrainingConfig c = cfg_with(Recompute::full);
  CHECK(recompute_flops_per_step(tiny_llama(), c) ==
        rel_approx(2 * kTokens * (2 * kLayerWeights + kAttentionPerTokenLayer / 2), 1e-12));
  c.attention = AttentionKernel::standard;
  CHECK(recompute_flops_per_step(tiny_llama(), c) ==
        rel_approx(2 * kTokens * (2 * kLayerWeights + kAttentionPerTokenLayer), 1e-12));
}

TEST_CASE("recompute x attention: time, memory and HFU agree with the recomputed kernels in every combination") {
  // One GPU, no communication: the step is its kernels back to back, so recomputation adds
  // exactly its kernels' time; HFU - MFU is exactly their FLOPs over the step.
  const ModelSpec m = tiny_llama();
  const Cluster cl = ctwin::test::h100_node8();
  // Unfused attention without dropout stores the softmax output, 2 a s^2 b bytes per layer
  // (Korthikanti's 5 a s^2 b less the dropout mask and output): 2 * 4 * 32 * 32 * 2 = 16,384.
  constexpr double kScores = 2.0 * 4 * 32 * 32 * 2;
  for (AttentionKernel att : {AttentionKernel::flash, AttentionKernel::standard}) {
    TrainingConfig base = cfg_with(Recompute::none);
    base.attention = att;
    const auto none = simulate_training(m, base, cl, {});
    const double act_none = activation_bytes_per_layer(m, base, false);
    for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
      CAPTURE(to_string(att));
      CAPTURE(to_string(rc));
      TrainingConfig c = base;
      c.recompute = rc;
      const StepProgram p = build_training_step(m, c, cl, TrainingOptions{});
      double flops = 0, secs = 0;
      for (const auto& op : p.ops) {
        if (op.phase != StepPhase::recompute) continue;
        flops += op.flops;
        secs += op.duration.seconds();
      }
      const double expected = recompute_flops_per_step(m, c);
      CHECK(flops == rel_approx(expected, 1e-6));  // op FLOPs are floats
      const auto r = simulate_training(m, c, cl, {});
      CHECK(r.step_time_s - none.step_time_s == ctwin::test::abs_approx(secs, 1e-12));  // seconds
      CHECK(r.hfu / r.mfu == rel_approx(1 + expected / r.model_flops_per_step, 1e-9));
      const double act = activation_bytes_per_layer(m, c, false);
      if (rc == Recompute::none) {
        // Nothing recomputed: same time, same memory, HFU = MFU.
        CHECK(expected == 0);
        CHECK(r.step_time_s == none.step_time_s);
        CHECK(act == act_none);
        CHECK(r.hfu == r.mfu);
      } else if (rc == Recompute::selective && att == AttentionKernel::flash) {
        // The fused kernel runs again; it kept no scores, so memory is unchanged.
        CHECK(expected > 0);
        CHECK(r.step_time_s > none.step_time_s);
        CHECK(act == act_none);
      } else if (rc == Recompute::selective) {
        CHECK(expected > 0);
        CHECK(r.step_time_s > none.step_time_s);
        CHECK(act_none - act == rel_approx(kScores, 1e-12));
      } else {
        CHECK(act == rel_approx(2.0 * 64 * 64, 1e-12));  // the layer input only: 2 bytes x s b h
      }
    }
  }
}

TEST_CASE("block recomputation reruns each model chunk's first recompute_num_layers layers; uniform all of them") {
  // Megatron-Core transformer_block.py, _checkpointed_forward: block checkpoints layers
  // [0, recompute_num_layers) of each chunk's TransformerBlock; uniform groups every layer.
  const ModelSpec m = ctwin::test::tiny_llama(4);
  TrainingConfig c = cfg_with(Recompute::full);
  c.parallel.pp = 2;
  c.recompute_method = RecomputeMethod::block;
  CHECK(recomputed_layers(4, c) == std::vector<bool>{true, false, true, false});  // 2 layers a stage
  c.recompute_num_layers = 2;
  CHECK(recomputed_layers(4, c) == std::vector<bool>{true, true, true, true});
  c.parallel.pp = 1;
  c.recompute_num_layers = 3;
  CHECK(recomputed_layers(4, c) == std::vector<bool>{true, true, true, false});
  c.recompute_method = RecomputeMethod::uniform;  // every layer, whatever the group
  CHECK(recomputed_layers(4, c) == std::vector<bool>{true, true, true, true});
  c.recompute = Recompute::selective;  // selective never reruns a whole layer
  CHECK(recomputed_layers(4, c) == std::vector<bool>{false, false, false, false});
}

TEST_CASE("block recomputation of k of L identical layers costs k / L of full recomputation, in FLOPs and time") {
  // One GPU, no communication: each recomputed layer adds the same kernels, so the step grows
  // by k / L of full recomputation's growth and the recompute-phase FLOPs are k / L of full's.
  const ModelSpec m = ctwin::test::tiny_llama(4);
  const Cluster cl = ctwin::test::h100_node8();
  const TrainingConfig none = cfg_with(Recompute::none);
  const TrainingConfig full = cfg_with(Recompute::full);
  const double t_none = simulate_training(m, none, cl, {}).step_time_s;
  const double t_full = simulate_training(m, full, cl, {}).step_time_s;
  const double f_full = recompute_flops_per_step(m, full);
  CHECK(t_full > t_none);
  for (int k : {1, 2, 3, 4, 9}) {
    CAPTURE(k);
    TrainingConfig c = full;
    c.recompute_method = RecomputeMethod::block;
    c.recompute_num_layers = k;
    const double share = std::min(k, 4) / 4.0;
    CHECK(recompute_flops_per_step(m, c) == rel_approx(share * f_full, 1e-12));
    const StepProgram p = build_training_step(m, c, cl, TrainingOptions{});
    double flops = 0;
    for (const auto& op : p.ops) flops += op.phase == StepPhase::recompute ? op.flops : 0.0;
    CHECK(flops == rel_approx(share * f_full, 1e-6));  // op FLOPs are floats
    CHECK(simulate_training(m, c, cl, {}).step_time_s - t_none ==
          ctwin::test::abs_approx(share * (t_full - t_none), 1e-12));
    // Uniform groups change what is stored, not what is recomputed.
    c.recompute_method = RecomputeMethod::uniform;
    CHECK(simulate_training(m, c, cl, {}).step_time_s == t_full);
  }
}

TEST_CASE("block recomputation's share weighs a MoE layer by its active experts and a windowed layer by its span") {
  // 4 layers, the first dense and the rest MoE (top 2 of 8, width 48); block 1 on pp 2 reruns
  // layers 0 (dense) and 2 (MoE). Per layer, by hand: attention 12,288; dense SwiGLU 30,720;
  // MoE 2 x 3 x 64 x 48 + router 64 x 8 = 18,944. Unfused attention costs every layer alike.
  ModelSpec m = ctwin::test::tiny_llama(4);
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 48;
  m.moe.first_dense_layers = 1;
  TrainingConfig c = cfg_with(Recompute::full);
  c.attention = AttentionKernel::standard;
  c.parallel.pp = 2;
  const double all = recompute_flops_per_step(m, c);
  c.recompute_method = RecomputeMethod::block;
  constexpr double dense = 12288 + 30720, moe = 12288 + 18944;
  constexpr double gemm = 2 * kTokens, core = kTokens * kAttentionPerTokenLayer;  // per weight; per layer
  CHECK(all == rel_approx(gemm * (dense + 3 * moe) + 4 * core, 1e-12));
  CHECK(recompute_flops_per_step(m, c) == rel_approx(gemm * (dense + moe) + 2 * core, 1e-12));
}

TEST_CASE("full recomputation stores one input per uniform group, or the block's inputs and the other layers whole") {
  // 4 layers on pp 2, stage 0 (no logits): 2 layers. A layer's input is 2 bytes x s b h
  // = 2 x 32 x 2 x 64 = 8,192 bytes; K is what a layer keeps without recomputation.
  const ModelSpec m = ctwin::test::tiny_llama(4);
  TrainingConfig c = cfg_with(Recompute::full);
  c.parallel.pp = 2;
  c.global_batch = 8;  // 4 micro-batches
  TrainingConfig none = c;
  none.recompute = Recompute::none;
  const double K = activation_bytes_per_layer(m, none, false), in = 8192;
  REQUIRE(K > 2 * in);
  struct Row {
    RecomputeMethod method;
    int layers;
    double per_mb, rerun;  // the stage's bytes per micro-batch; what a recomputation adds at once
  } rows[] = {
      {RecomputeMethod::uniform, 1, 2 * in, K},  // each layer's input; one layer rebuilt
      {RecomputeMethod::uniform, 2, in, 2 * K},  // one group of 2: its input; both rebuilt
      {RecomputeMethod::uniform, 3, in, 2 * K},  // the group is cut at the chunk's 2 layers
      {RecomputeMethod::block, 1, in + K, 0},    // the top layer kept, freed before the rerun
      {RecomputeMethod::block, 2, 2 * in, K},    // both recomputed: as uniform 1
  };
  for (const Row& r : rows) {
    CAPTURE(r.layers);
    CAPTURE(static_cast<int>(r.method));
    c.recompute_method = r.method;
    c.recompute_num_layers = r.layers;
    const MemoryBreakdown mb = estimate_stage_memory(m, c, 80e9, 0);
    CHECK(mb.activations_per_microbatch == rel_approx(r.per_mb, 1e-12));
    CHECK(mb.recompute == rel_approx(r.rerun, 1e-12));
    // 1F1B: stage 0 of 2 holds two micro-batches' activations at its peak.
    CHECK(mb.activations == rel_approx(2 * r.per_mb, 1e-12));
  }
}

TEST_CASE("a MoE layer keeps SwiGLU intermediates for top_k routed experts and every shared expert") {
  ModelSpec m = tiny_llama();
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.shared_experts = 1;
  m.moe.expert_ffn_hidden = 48;
  TrainingConfig c = cfg_with(Recompute::none);
  c.attention = AttentionKernel::flash;
  const ModelSpec dense = [&] {
    ModelSpec d = m;
    d.moe = {};
    d.ffn_hidden = 48;
    return d;
  }();
  // Same layer with a dense 48-wide MLP keeps 3 x 48 per token; the MoE layer keeps that for
  // each of top_k + shared = 3 experts, so 2 x (2 bytes x s b x 3 x 48) more.
  const double extra = 2 * 2.0 * kTokens * 3 * 48;
  CHECK(activation_bytes_per_layer(m, c, true) ==
        rel_approx(activation_bytes_per_layer(dense, c, false) + extra, 1e-12));
}

TEST_CASE("ZeRO shards routed experts over dp / ep: 8 experts at ep 4 leave 2 copies of each, not 8") {
  // Every layer MoE, 8 SwiGLU experts of width 48: 3 x 64 x 48 = 9,216 parameters each, 2 layers
  // x 8 experts = 147,456, of which a GPU at ep 4 holds 36,864. Megatron-Core's distributed
  // optimizer shards them over the expert-data-parallel group (dp / ep = 2 GPUs), the rest of
  // the layer over all dp = 8.
  const ModelSpec m = tiny_moe();
  TrainingConfig c = cfg_with(Recompute::none);
  c.parallel.dp = 8;
  c.parallel.ep = 4;
  c.parallel.zero_stage = 1;
  c.global_batch = 16;
  const double experts = 2 * 8 * 3 * 64 * 48 / 4.0;
  REQUIRE(stage_expert_params(m, c, 0) == rel_approx(experts, 1e-12));
  const double params = stage_params(m, c, 0);
  const double per_param = c.precision.master_bytes + c.precision.optimizer_state_bytes;  // 12: FP32 + 2 moments
  const MemoryBreakdown mb = estimate_stage_memory(m, c, 80e9, 0);
  CHECK(mb.optimizer == rel_approx((params - experts) * per_param / 8 + experts * per_param / 2, 1e-12));
  // ZeRO-3: the weights too; a dense model is unaffected.
  c.parallel.zero_stage = 3;
  CHECK(estimate_stage_memory(m, c, 80e9, 0).weights ==
        rel_approx((params - experts) * c.precision.weight_bytes / 8 + experts * c.precision.weight_bytes / 2, 1e-12));
  CHECK(stage_expert_params(tiny_llama(), c, 0) == 0);
}

TEST_CASE("the optimizer step updates the same shard: routed experts over dp / ep, the rest over dp") {
  // The tiny MoE above at ep 4, dp 8, ZeRO-1: Adam streams each shard parameter's gradient,
  // master weight (read and written), two moments (read and written) and BF16 weight once.
  const ModelSpec m = tiny_moe();
  TrainingConfig c = cfg_with(Recompute::none);
  c.micro_batch = 1;
  c.parallel.dp = 8;
  c.parallel.ep = 4;
  c.parallel.zero_stage = 1;
  c.global_batch = 8;
  const double experts = 2 * 8 * 3 * 64 * 48 / 4.0;
  const double params = stage_params(m, c, 0);
  const auto& pr = c.precision;
  const double per_param = pr.grad_bytes + 2 * pr.master_bytes + 2 * pr.optimizer_state_bytes + pr.weight_bytes;
  TrainingOptions o;
  o.fold = false;
  const StepProgram p = build_training_step(m, c, ctwin::test::h100_node8(), o);
  double bytes = 0;
  for (const StepOp& op : p.ops) {
    if (op.gpu == 0 && p.names.str(op.name) == "adam_step") bytes += p.costs[op.cost].bytes;
  }
  CHECK(bytes == rel_approx(((params - experts) / 8 + experts / 2) * per_param, 1e-9));
}
