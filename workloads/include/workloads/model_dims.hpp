// A transformer's widths and per-layer sizes, computed once from its ModelSpec (MLA-aware),
// for every workload that needs them: training's layer ops, memory and FLOP counts, and
// serving's KV cache. All widths are whole numbers held as doubles (exact).
#pragma once

#include "workloads/model.hpp"

namespace ctwin {

struct ModelDims {
  double hidden = 0;
  double head_dim = 0;     // d of a standard head (hidden / heads unless given)
  double q_dim = 0;        // query width over all heads; MLA: heads * (qk_nope + qk_rope)
  double kv_dim = 0;       // key width; MLA: as the query's (K is decompressed per head)
  double v_dim = 0;        // value width; MLA: heads * v_head_dim
  double o_in = 0;         // the output projection's input width (the attention context)
  double qk_head_dim = 0;  // one head's Q.K dot-product width
  double pv_head_dim = 0;  // one head's value width
  // Parameters of one layer.
  double attention_params = 0;    // Q, K, V, output projections (and MLA's low-rank factors, biases)
  double dense_mlp_params = 0;    // a dense layer's MLP
  double expert_params = 0;       // one routed (or shared) expert's MLP
  double router_params = 0;       // an MoE layer's gate
  double norm_params = 0;         // one norm (a layer has two)
  double kv_cache_per_token = 0;  // elements cached per token per layer (MLA: the latent and RoPE key)
};

ModelDims model_dims(const ModelSpec& m);

}  // namespace ctwin
