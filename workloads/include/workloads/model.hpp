// Model specifications: the shapes that decide FLOPs, bytes and memory. Loaded from
// workloads/catalog/models.json (embedded in ctwin), explicit JSON, or a HuggingFace config.
#pragma once

#include "sim/names.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ctwin {

// The MLP's activation. Gated kinds (SwiGLU as Llama, GeGLU as Gemma) have two input
// projections (gate and up, 3 h f weights); the others one (2 h f): GELU (GPT), ReLU and
// squared ReLU (relu2: Nemotron-4, Primer). They differ in weights, FLOPs and saved tensors.
enum class Activation { swiglu, gelu, geglu, relu, relu2 };
enum class Norm { rmsnorm, layernorm };

// The names of activations and norms, for JSON and reports (sim/names.hpp: one table each).
inline constexpr auto activation_names = make_names<Activation>({{Activation::swiglu, "swiglu"},
                                                                 {Activation::gelu, "gelu"},
                                                                 {Activation::geglu, "geglu"},
                                                                 {Activation::relu, "relu"},
                                                                 {Activation::relu2, "relu2"}});
// Gated activations: the up projection is two (gate and up), ffn wide each.
bool is_gated(Activation a);
// Tensors of width ffn (per token) the MLP keeps for backward besides its input: a gated kind
// its two projections' outputs and their product (3); GELU its input and output (2); squared
// ReLU relu(x) for the square's backward and the square itself, fc2's input (2); ReLU only its
// output, which is also fc2's input (1).
int mlp_saved_widths(Activation a);
inline constexpr auto norm_names = make_names<Norm>({{Norm::rmsnorm, "rmsnorm"}, {Norm::layernorm, "layernorm"}});

struct MoeSpec {
  int experts = 0;  // routed experts; 0 means a dense model
  int top_k = 0;
  int shared_experts = 0;
  std::int64_t expert_ffn_hidden = 0;
  int first_dense_layers = 0;  // leading layers with a dense MLP (DeepSeek-V3: 3)
  double capacity_factor = 1.0;
  bool enabled() const { return experts > 0; }
};

// Multi-head latent attention (DeepSeek-V2/V3): low-rank projections of Q and of K/V.
struct MlaSpec {
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// One layer of a generic (non-transformer) model, per sample: a CNN, an MLP, anything a user
// can describe by its FLOPs, parameters and stored activations.
struct GenericLayer {
  std::string name;
  double fwd_flops = 0;  // forward FLOPs per sample (2 per multiply-add)
  double params = 0;
  double activation_bytes = 0;  // bytes kept for backward per sample
  double hbm_bytes = 0;         // HBM traffic of the forward per sample; 0: 2 x activation_bytes
};

struct ModelSpec {
  std::string name;
  // Non-empty: a generic model given layer by layer (the transformer fields are unused).
  std::vector<GenericLayer> generic_layers;
  int layers = 0;
  std::int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // grouped-query attention when < heads
  int head_dim = 0;  // 0: hidden / heads
  std::int64_t ffn_hidden = 0;
  Activation activation = Activation::swiglu;
  Norm norm = Norm::rmsnorm;
  std::int64_t vocab = 0;
  int max_seq = 0;
  bool tied_embeddings = false;
  bool learned_positions = false;
  MoeSpec moe;
  MlaSpec mla;
  // Sliding-window attention (Mistral, Gemma 2/3, GPT-OSS): a windowed layer's query attends to
  // at most attention_window tokens, itself and those before it; 0: every layer full. With
  // full_attention_every N > 0 every Nth layer (the Nth, 2Nth, ...) attends over the whole
  // context (GPT-OSS and Gemma 2: 2, Gemma 3: 6); 0: every layer windowed.
  std::int64_t attention_window = 0;
  int full_attention_every = 0;
  std::string source;

  bool is_generic() const { return !generic_layers.empty(); }
  // Whether layer l (0-based) is a MoE layer (after the first_dense_layers dense ones).
  bool moe_layer(int l) const { return moe.enabled() && l >= moe.first_dense_layers; }
  // Whether layer l (0-based) attends through the sliding window.
  bool windowed_layer(int l) const {
    return attention_window > 0 && (full_attention_every <= 0 || (l + 1) % full_attention_every != 0);
  }
  // How many of the `count` layers from `first` attend through the window.
  int windowed_layers(int first, int count) const {
    int n = 0;
    for (int l = first; l < first + count; ++l) n += windowed_layer(l) ? 1 : 0;
    return n;
  }
  int effective_head_dim() const { return head_dim > 0 ? head_dim : static_cast<int>(hidden / heads); }
};

// Parameter counts, each in parameters (not bytes).
struct ParamCounts {
  double embedding = 0;  // input token (and learned position) embeddings
  double lm_head = 0;    // output projection (0 when tied to the embedding)
  double attention = 0;  // all layers
  double mlp = 0;        // all layers: dense MLPs, routed experts and shared experts
  double norms = 0;      // all layers plus the final norm
  double router = 0;     // MoE gates
  double total = 0;
  double active_per_token = 0;  // MoE: parameters a token actually uses (top_k experts)
  // Weights used in matrix multiplies per token, the N of the 6N FLOPs rule: everything
  // but the embedding lookup (a tied embedding still serves as the LM head GEMM).
  double matmul_per_token = 0;
};

ParamCounts count_parameters(const ModelSpec& m);

// (query, key) pairs a causal sequence of `seq` tokens scores, in the continuous count training
// has always used (seq^2 / 2 without a window): with a window of w < seq tokens, w x seq - w^2 / 2.
double causal_pairs(double seq, double window);
// The tokens a query attends to, summed over the layers, in model FLOPs' non-causal convention
// (each full layer seq, a windowed one 2 x causal_pairs / seq): 12 x this x q_dim per token.
double attention_span_tokens(const ModelSpec& m, double seq);

// Attention-layer parameters of one layer; MLP parameters of one dense layer; of one expert.
double attention_params_per_layer(const ModelSpec& m);
double dense_mlp_params(const ModelSpec& m, std::int64_t ffn);
// One normalisation layer: a scale, plus a bias for LayerNorm. A layer has two; the model one more.
double norm_params(const ModelSpec& m);

struct ModelCatalog {
  std::map<std::string, ModelSpec> models;
};

const char* to_string(Activation a);

}  // namespace ctwin
