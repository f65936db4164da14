#include <doctest/doctest.h>

#include "workloads/memory.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {
// GPT-3 175B shapes, as in Korthikanti et al. 2022 (Table 3): s=2048, h=12288, a=96.
ModelSpec gpt3() {
  ModelSpec m;
  m.layers = 96;
  m.hidden = 12288;
  m.heads = 96;
  m.kv_heads = 96;
  m.ffn_hidden = 4 * 12288;
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  m.vocab = 51200;
  m.max_seq = 2048;
  return m;
}
TrainingConfig cfg(int tp, bool sp, Recompute rc) {
  TrainingConfig c;
  c.parallel.tp = tp;
  c.parallel.sequence_parallel = sp;
  c.micro_batch = 1;
  c.seq_len = 2048;
  c.attention = AttentionKernel::standard;
  c.dropout = true;
  c.recompute = rc;
  return c;
}
}  // namespace

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// equations (1)-(5): bytes of activations per layer.
TEST_CASE("activations per layer match Korthikanti et al. for each TP / SP / recompute mode") {
  const ModelSpec m = gpt3();
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  SUBCASE("no parallelism: sbh(34 + 5as/h)") {
    CHECK(activation_bytes_per_layer(m, cfg(1, false, Recompute::none), false) ==
          rel_approx(s * b * h * (34 + 5 * a * s / h), 1e-9));
  }
  SUBCASE("tensor parallel: sbh(10 + 24/t + 5as/(ht))") {
    CHECK(activation_bytes_per_layer(m, cfg(8, false, Recompute::none), false) ==
          rel_approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1e-9));
  }
  SUBCASE("tensor + sequence parallel: sbh/t (34 + 5as/h)") {
    CHECK(activation_bytes_per_layer(m, cfg(8, true, Recompute::none), false) ==
          rel_approx(s * b * h / t * (34 + 5 * a * s / h), 1e-9));
  }
  SUBCASE("tensor + sequence parallel + selective recompute: 34 sbh/t") {
    CHECK(activation_bytes_per_layer(m, cfg(8, true, Recompute::selective), false) ==
          rel_approx(34 * s * b * h / t, 1e-9));
  }
  SUBCASE("full recompute keeps the layer input: 2sbh") {
    CHECK(activation_bytes_per_layer(m, cfg(1, false, Recompute::full), false) == rel_approx(2 * s * b * h, 1e-9));
  }
}

TEST_CASE("mixed-precision Adam needs 16 bytes per parameter; ZeRO-1 shards the 12 optimizer bytes") {
  ModelSpec m = gpt3();
  m.layers = 2;
  m.vocab = 1024;
  TrainingConfig c = cfg(1, false, Recompute::full);
  c.parallel.dp = 8;
  c.global_batch = 8;
  // GPT layers by hand: attention 4h^2 + 4h (weights and biases), MLP 8h^2 + 5h, two LayerNorms 4h;
  // the untied embedding and LM head 1024 h each; the final LayerNorm 2h.
  const double h = 12288;
  const double p = 2 * (12 * h * h + 13 * h) + 2 * 1024 * h + 2 * h;
  auto mem = estimate_memory(m, c, 80e9);
  CHECK(mem.weights == rel_approx(2 * p, 1e-9));
  CHECK(mem.grads == rel_approx(2 * p, 1e-9));
  CHECK(mem.optimizer == rel_approx(12 * p, 1e-9));
  c.parallel.zero_stage = 1;
  mem = estimate_memory(m, c, 80e9);
  CHECK(mem.optimizer == rel_approx(12 * p / 8, 1e-9));
  CHECK(mem.grads == rel_approx(2 * p, 1e-9));
  c.parallel.zero_stage = 2;
  CHECK(estimate_memory(m, c, 80e9).grads == rel_approx(2 * p / 8, 1e-9));
}

TEST_CASE("an out-of-memory layout names the dominant term and what would fit") {
  ModelSpec m = gpt3();
  TrainingConfig c = cfg(1, false, Recompute::none);
  c.global_batch = 1;
  const auto mem = estimate_memory(m, c, 80.0 * (1ull << 30));
  CHECK(mem.oom);
  CHECK(mem.dominant == "optimizer");  // 175B x 12 bytes = 2.1 TB
  CHECK(mem.advice.find("pp") != std::string::npos);
}
