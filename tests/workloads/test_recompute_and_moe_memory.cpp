// Hardware FLOPs of recomputation and MoE activation memory against hand-worked closed forms.
//
// References:
// - Korthikanti et al. 2022, Sec. 5 and Table 4: selective recomputation runs the attention
//   core (QK^T and softmax-weighted V) again in backward; full recomputation runs every layer's
//   forward again. Hardware FLOPs = model FLOPs + the recomputed forward.
// - The attention core's forward is 2 GEMMs of 2 s d FLOPs per query per head: 4 s h_q per
//   token per layer (non-causal, as model FLOPs count it; Narayanan et al. 2021).
// - A MoE layer's MLP activations: each token's hidden state goes to top_k routed experts (times
//   the capacity factor) and to every shared expert, each keeping its own intermediates.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"
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

}  // namespace

TEST_CASE("no recomputation costs no extra FLOPs") {
  CHECK(recompute_flops_per_step(tiny_llama(), cfg_with(Recompute::none)) == 0);
}

TEST_CASE("selective recomputation costs the attention core's forward again: 4 s h_q per token per layer") {
  const double expected = 2 * kTokens * kAttentionPerTokenLayer;  // 2 layers
  CHECK(recompute_flops_per_step(tiny_llama(), cfg_with(Recompute::selective)) == rel_approx(expected, 1e-12));
}

TEST_CASE("full recomputation costs every layer's forward again: 2 x layer weights + attention core per token") {
  const double expected = 2 * kTokens * (2 * kLayerWeights + kAttentionPerTokenLayer);
  CHECK(recompute_flops_per_step(tiny_llama(), cfg_with(Recompute::full)) == rel_approx(expected, 1e-12));
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
