#include "workloads/model_dims.hpp"

namespace ctwin {

ModelDims model_dims(const ModelSpec& m) {
  ModelDims x;
  x.hidden = static_cast<double>(m.hidden);
  const double d = m.effective_head_dim();
  x.head_dim = d;
  x.q_dim = m.heads * d;
  x.kv_dim = m.kv_heads * d;
  x.v_dim = x.kv_dim;
  x.o_in = x.q_dim;
  x.qk_head_dim = d;
  x.pv_head_dim = d;
  x.kv_cache_per_token = x.kv_dim + x.v_dim;
  if (m.mla.enabled()) {
    x.q_dim = m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim);
    x.kv_dim = x.q_dim;
    x.v_dim = m.heads * static_cast<double>(m.mla.v_head_dim);
    x.o_in = x.v_dim;
    x.qk_head_dim = static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim);
    x.pv_head_dim = static_cast<double>(m.mla.v_head_dim);
    x.kv_cache_per_token = static_cast<double>(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim);
  }
  x.attention_params = attention_params_per_layer(m);
  x.dense_mlp_params = dense_mlp_params(m, m.ffn_hidden);
  if (m.moe.enabled()) {
    x.expert_params = dense_mlp_params(m, m.moe.expert_ffn_hidden);
    x.router_params = x.hidden * m.moe.experts;
  }
  x.norm_params = norm_params(m);
  return x;
}

}  // namespace ctwin
