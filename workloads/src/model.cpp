#include "workloads/model.hpp"

namespace ctwin {

const char* to_string(Activation a) { return activation_names.name(a); }

// Defined here, not inline in model.hpp, which some 75 objects include: a change to either (as
// scripts/mutate.sh makes) recompiles one file.
bool is_gated(Activation a) { return a == Activation::swiglu || a == Activation::geglu; }

int mlp_saved_widths(Activation a) { return is_gated(a) ? 3 : a == Activation::relu ? 1 : 2; }

double attention_params_per_layer(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  if (m.mla.enabled()) {
    const auto& a = m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.heads * qk
                                       : h * m.heads * qk;  // the q_lora_rank term in the middle is its norm
    const double kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                      static_cast<double>(a.kv_lora_rank) * m.heads * (a.qk_nope_head_dim + a.v_head_dim);
    const double o = static_cast<double>(m.heads) * a.v_head_dim * h;
    return q + kv + o;
  }
  const double d = m.effective_head_dim();
  const double q = h * m.heads * d;
  const double kv = 2.0 * h * m.kv_heads * d;
  const double o = static_cast<double>(m.heads) * d * h;
  // GPT-style layers carry biases on every projection.
  const double bias = m.norm == Norm::layernorm ? m.heads * d + 2.0 * m.kv_heads * d + h : 0;
  return q + kv + o + bias;
}

double dense_mlp_params(const ModelSpec& m, std::int64_t ffn) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(ffn);
  if (is_gated(m.activation)) return 3.0 * h * f;
  return 2.0 * h * f + (m.norm == Norm::layernorm ? f + h : 0);  // GPT-style biases
}

double norm_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  return m.norm == Norm::layernorm ? 2 * h : h;  // scale (+ bias)
}

double causal_pairs(double seq, double window) {
  if (window <= 0 || window >= seq) return seq * seq / 2;
  return window * seq - window * window / 2;
}

double attention_span_tokens(const ModelSpec& m, double seq) {
  double span = 0;
  for (int l = 0; l < m.layers; ++l)
    span += m.windowed_layer(l) ? 2 * causal_pairs(seq, static_cast<double>(m.attention_window)) / seq : seq;
  return span;
}

ParamCounts count_parameters(const ModelSpec& m) {
  ParamCounts p;
  if (m.is_generic()) {
    for (const auto& l : m.generic_layers) p.total += l.params;
    p.mlp = p.total;
    p.active_per_token = p.total;
    p.matmul_per_token = p.total;
    return p;
  }
  const double h = static_cast<double>(m.hidden), v = static_cast<double>(m.vocab), L = m.layers;
  p.embedding = v * h + (m.learned_positions ? static_cast<double>(m.max_seq) * h : 0);
  p.lm_head = m.tied_embeddings ? 0 : v * h;
  p.attention = L * attention_params_per_layer(m);
  p.norms = (2 * L + 1) * norm_params(m);
  double mlp_active = 0;
  if (m.moe.enabled()) {
    const int dense_layers = m.moe.first_dense_layers;
    const double moe_layers = m.layers - dense_layers;  // a double: layers x experts overflows an int
    const double expert = dense_mlp_params(m, m.moe.expert_ffn_hidden);
    const double dense = dense_mlp_params(m, m.ffn_hidden);
    p.mlp = dense_layers * dense + moe_layers * (m.moe.experts + m.moe.shared_experts) * expert;
    p.router = moe_layers * h * m.moe.experts;
    mlp_active = dense_layers * dense + moe_layers * (m.moe.top_k + m.moe.shared_experts) * expert;
  } else {
    p.mlp = L * dense_mlp_params(m, m.ffn_hidden);
    mlp_active = p.mlp;
  }
  p.total = p.embedding + p.lm_head + p.attention + p.mlp + p.norms + p.router;
  p.active_per_token = p.total - p.mlp + mlp_active;
  p.matmul_per_token = p.attention + mlp_active + p.router + v * h;
  return p;
}

}  // namespace ctwin
