// ModelDims: one place for a transformer's widths and per-layer sizes, hand-worked.
#include <doctest/doctest.h>

#include "workloads/model_dims.hpp"

using namespace ctwin;

TEST_CASE("model dims: GQA widths, per-layer parameters and KV cache of a tiny Llama-style model") {
  ModelSpec m;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;  // head_dim 16
  m.ffn_hidden = 160;
  m.vocab = 128;
  const ModelDims d = model_dims(m);
  CHECK(d.head_dim == 16);
  CHECK(d.q_dim == 64);
  CHECK(d.kv_dim == 32);
  CHECK(d.v_dim == 32);
  CHECK(d.o_in == 64);
  CHECK(d.qk_head_dim == 16);
  CHECK(d.pv_head_dim == 16);
  CHECK(d.attention_params == 12288);  // q, o 64 x 64; k, v 64 x 32
  CHECK(d.dense_mlp_params == 30720);  // SwiGLU: 3 x 64 x 160
  CHECK(d.norm_params == 64);          // an RMSNorm scale
  CHECK(d.expert_params == 0);
  CHECK(d.kv_cache_per_token == 64);  // K and V, 2 heads of 16 each
}

TEST_CASE("model dims: MLA decompresses K per head, caches the latent and the RoPE key") {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 16;
  m.ffn_hidden = 2048;
  m.mla.kv_lora_rank = 256;
  m.mla.qk_nope_head_dim = 64;
  m.mla.qk_rope_head_dim = 32;
  m.mla.v_head_dim = 64;
  m.moe.experts = 8;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 512;
  const ModelDims d = model_dims(m);
  CHECK(d.q_dim == 16 * 96);
  CHECK(d.kv_dim == 16 * 96);
  CHECK(d.v_dim == 16 * 64);
  CHECK(d.o_in == 16 * 64);
  CHECK(d.qk_head_dim == 96);
  CHECK(d.pv_head_dim == 64);
  CHECK(d.kv_cache_per_token == 256 + 32);
  // q 1024 x 16 x 96; kv down 1024 x (256 + 32), its norm 256, up 256 x 16 x (64 + 64); o 16 x 64 x 1024.
  CHECK(d.attention_params == 1024.0 * 1536 + 1024.0 * 288 + 256 + 256.0 * 16 * 128 + 1024.0 * 1024);
  CHECK(d.expert_params == 3 * 1024.0 * 512);
  CHECK(d.router_params == 1024.0 * 8);
}
