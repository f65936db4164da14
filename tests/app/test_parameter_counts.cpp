// Parameter counts of published models from the built-in catalog, against their published
// exact counts (the sum of the tensor sizes in the released checkpoints), each broken down by
// hand in a comment so a wrong term can be found.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "scenario.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/model_json.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

const ModelSpec& catalog(const std::string& name) {
  static const ModelCatalog c = builtin_models();
  REQUIRE(c.models.count(name) == 1);
  return c.models.at(name);
}

// Parameters held by all pipeline stages together (tp = 1).
double sum_of_stages(const ModelSpec& m, int pp) {
  TrainingConfig c;
  c.parallel.pp = pp;
  double total = 0;
  for (int s = 0; s < pp; ++s) total += stage_params(m, c, s);
  return total;
}

}  // namespace

TEST_CASE("GPT-2 124M has 124,439,808 parameters (tied embeddings, learned positions, LayerNorm, biases)") {
  // openai-community/gpt2: wte 50257 x 768 = 38,597,376; wpe 1024 x 768 = 786,432. Per layer:
  // c_attn 768 x 2304 + 2304 bias; c_proj 768 x 768 + 768; c_fc 768 x 3072 + 3072; mlp c_proj
  // 3072 x 768 + 768; ln_1, ln_2 2 x 1536: 7,087,872. ln_f 1536. The LM head is wte.
  // 38,597,376 + 786,432 + 12 x 7,087,872 + 1,536 = 124,439,808.
  const auto pc = count_parameters(catalog("gpt2-124m"));
  CHECK(pc.total == 124439808);
  CHECK(pc.embedding == 38597376 + 786432);
  CHECK(pc.lm_head == 0);
  CHECK(pc.norms == 25 * 1536);
}

TEST_CASE("Llama-2-7B has 6,738,415,616 parameters") {
  // meta-llama/Llama-2-7b-hf: embed and lm_head 32000 x 4096 each = 262,144,000. Per layer:
  // q, k, v, o 4 x 4096^2 = 67,108,864; gate, up, down 3 x 4096 x 11008 = 135,266,304; two
  // RMSNorm 8,192: 202,383,360. Final norm 4,096. 262,144,000 + 32 x 202,383,360 + 4,096.
  const auto pc = count_parameters(catalog("llama2-7b"));
  CHECK(pc.total == 6738415616);
}

TEST_CASE("Nemotron-4 340B has 9.4B embedding and 331.6B non-embedding parameters (256K vocabulary, squared ReLU)") {
  // NVIDIA 2024, Nemotron-4 340B Technical Report, Sec. 2.1: 9.4 billion embedding and 331.6
  // billion non-embedding parameters, both rounded to 0.1 billion. Embedding and the untied LM
  // head 256000 x 18432 each = 9,437,184,000. Per layer (head dim 192, 8 KV heads): q, o
  // 2 x 18432^2 = 679,477,248; k, v 2 x 18432 x 1536 = 56,623,104; MLP (two matrices, squared
  // ReLU) 2 x 18432 x 73728 = 2,717,908,992; two LayerNorms 73,728. The model also counts
  // GPT-style projection biases (132,096 a layer, 12.7M in all), which Nemotron does not have
  // and which stay below the report's rounding. 96 layers and the final norm: 331.6 billion.
  const auto pc = count_parameters(catalog("nemotron4-340b"));
  CHECK(pc.embedding + pc.lm_head == 9437184000.0);
  const double non_embedding = pc.total - pc.embedding - pc.lm_head;
  CHECK(std::fabs(non_embedding - 331.6e9) <= 0.05e9);
  CHECK(std::fabs(non_embedding - 96 * (679477248.0 + 56623104.0 + 2717908992.0 + 73728.0)) <= 13e6);
}

TEST_CASE("Llama-3-8B has 8,030,261,248 parameters (GQA, 128K vocabulary)") {
  // meta-llama/Meta-Llama-3-8B: embed and lm_head 128256 x 4096 each = 1,050,673,152. Per
  // layer: q, o 2 x 4096^2 + k, v 2 x 4096 x 1024 = 41,943,040; MLP 3 x 4096 x 14336 =
  // 176,160,768; norms 8,192: 218,112,000. 1,050,673,152 + 32 x 218,112,000 + 4,096.
  const auto pc = count_parameters(catalog("llama3-8b"));
  CHECK(pc.total == 8030261248);
}

TEST_CASE("Mixtral-8x7B has 46,702,792,704 parameters, 12,879,925,248 active per token with top-2 routing") {
  // mistralai/Mixtral-8x7B-v0.1: embed and lm_head 32000 x 4096 each = 262,144,000. Per layer:
  // attention 41,943,040 (as Llama-3-8B); 8 experts x 3 x 4096 x 14336 = 1,409,286,144;
  // router 4096 x 8 = 32,768; norms 8,192. Final norm 4,096.
  // Total: 262,144,000 + 32 x 1,451,270,144 + 4,096. Active: 2 experts of 176,160,768 instead
  // of 8: 262,144,000 + 32 x 394,305,536 + 4,096.
  const auto pc = count_parameters(catalog("mixtral-8x7b"));
  CHECK(pc.total == 46702792704);
  CHECK(pc.active_per_token == 12879925248);
  CHECK(pc.router == 32 * 32768);
}

TEST_CASE("pipeline stages together hold every parameter once (untied models, pp = 1, 2, 4)") {
  for (const char* name : {"llama2-7b", "llama3-8b", "mixtral-8x7b"}) {
    for (int pp : {1, 2, 4}) {
      CAPTURE(name);
      CAPTURE(pp);
      const ModelSpec& m = catalog(name);
      CHECK(sum_of_stages(m, pp) == rel_approx(count_parameters(m).total, 1e-15));
    }
  }
}

TEST_CASE("GPT-2's stages hold its LayerNorm scales and biases, positions and final norm: 124,439,808 at pp = 1") {
  const ModelSpec& m = catalog("gpt2-124m");
  CHECK(sum_of_stages(m, 1) == 124439808);
}

TEST_CASE("with pp > 1 a tied embedding is held twice: by the first stage and, as the LM head, by the last") {
  // Megatron keeps a copy of the word embedding on the last stage (and all-reduces the two
  // copies' gradients); 50257 x 768 = 38,597,376 more than the model's own count.
  const ModelSpec& m = catalog("gpt2-124m");
  for (int pp : {2, 4}) {
    CAPTURE(pp);
    CHECK(sum_of_stages(m, pp) == 124439808 + 38597376);
  }
}

namespace {

// Nemotron-4 (Parmar et al. 2024, "Nemotron-4 15B Technical Report", Table 1; NVIDIA 2024,
// "Nemotron-4 340B Technical Report", Table 1): squared-ReLU MLP (two matrices, no gate), GQA
// with 8 KV heads, no linear biases, untied 256,000-token embeddings, LayerNorm.
ModelSpec nemotron4(int layers, std::int64_t hidden, int heads, std::int64_t ffn) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn_hidden = ffn;
  m.activation = Activation::relu2;
  m.norm = Norm::rmsnorm;  // the count's norms (2 h per layer as LayerNorm) are < 0.01%: no bias terms
  m.vocab = 256000;
  return m;
}

}  // namespace

TEST_CASE("Nemotron-4 15B: 3.2B embedding and 12.5B non-embedding parameters (squared ReLU, two MLP matrices)") {
  // h 6144, 32 layers, 48 heads of 128, 8 KV heads, ffn 4 h = 24576. Per layer: q, o 2 x 6144^2
  // = 75,497,472; k, v 2 x 6144 x 1024 = 12,582,912; MLP 2 x 6144 x 24576 = 301,989,888:
  // 390,070,272; x 32 = 12.48B. Embedding and output 2 x 256000 x 6144 = 3.15B.
  const auto pc = count_parameters(nemotron4(32, 6144, 48, 24576));
  CHECK(pc.embedding + pc.lm_head == rel_approx(3.2e9, 0.02));
  CHECK(pc.total - pc.embedding - pc.lm_head == rel_approx(12.5e9, 0.01));
  // A gated MLP of the same width would add 32 x 6144 x 24576 = 4.8B: 20.4B, not 15B.
  ModelSpec gated = nemotron4(32, 6144, 48, 24576);
  gated.activation = Activation::swiglu;
  CHECK(count_parameters(gated).total - pc.total == rel_approx(32.0 * 6144 * 24576, 1e-12));
}

TEST_CASE("Nemotron-4 340B has 340B parameters (h 18432, 96 layers, ffn 73728, 96 heads, 8 KV heads)") {
  // Heads of 192. Per layer: q, o 2 x 18432^2 = 679,477,248; k, v 2 x 18432 x 1536 = 56,623,104;
  // MLP 2 x 18432 x 73728 = 2,717,908,992: 3,454,009,344 (+ norms); x 96 = 331.6B. Embedding and
  // output 2 x 256000 x 18432 = 9.44B: 341.0B, published "340B".
  const auto pc = count_parameters(nemotron4(96, 18432, 96, 73728));
  CHECK(pc.total == rel_approx(340e9, 0.01));
}
