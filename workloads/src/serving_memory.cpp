#include "workloads/serving_memory.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "workloads/model_dims.hpp"

namespace ctwin {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int stage_first_layer(const ServingDeployment& d, int stage) {
  int first = 0;
  for (int s = 0; s < stage; ++s) first += stage_layers(d, s);
  return first;
}

}  // namespace

int stage_layers(const ServingDeployment& d, int stage) {
  // vllm/distributed/utils.py get_pp_indices: layers // pp each; the remainder one each to the
  // stages just before the last (the last also holds the LM head).
  const int base = d.model.layers / d.pp;
  const int rem = d.model.layers % d.pp;
  const bool extra = stage <= d.pp - 2 && stage >= d.pp - 1 - rem;
  return base + (extra ? 1 : 0);
}

namespace {

// Layers of `stage` that attend through the sliding window.
int stage_windowed_layers(const ServingDeployment& d, int stage) {
  return d.model.windowed_layers(stage_first_layer(d, stage), stage_layers(d, stage));
}

// One token's KV on a GPU of the replica, per layer, at the KV dtype.
double kv_layer_bytes_per_token(const ServingDeployment& d) {
  const ModelSpec& m = d.model;
  const ModelDims dims = model_dims(m);
  // MLA caches its latent and RoPE key once per token, replicated on every TP rank; standard
  // attention caches K and V of kv_heads / tp heads.
  // Beyond tp = kv_heads each rank keeps one (replicated) KV head, as vLLM does.
  const double kvh = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const double per_token =
      m.mla.enabled() ? dims.kv_cache_per_token : dims.kv_cache_per_token / kvh * std::max(1.0, kvh / d.tp);
  return per_token * kv_bytes_per_elem(d.kv_dtype);
}

}  // namespace

KvWindow kv_window(const ServingDeployment& d) {
  KvWindow w;
  if (d.model.attention_window <= 0) return w;
  w.tokens = d.model.attention_window;
  for (int s = 0; s < d.pp; ++s) {
    const int win = stage_windowed_layers(d, s), full = stage_layers(d, s) - win;
    if (full > 0) w.blocks_per_page = std::max(w.blocks_per_page, static_cast<double>(win) / full);
  }
  return w;
}

double serving_weight_bytes(const ServingDeployment& d, int stage) {
  const ModelSpec& m = d.model;
  const ModelDims dims = model_dims(m);
  const double w = weight_bytes_per_param(d.quantization), tp = d.tp;
  const double we = expert_weight_bytes_per_param(d.quantization);
  const int first = stage_first_layer(d, stage);
  const int n = stage_layers(d, stage);
  double params_q = 0;       // quantized GEMM weights on this GPU
  double params_expert = 0;  // the routed experts'
  double params_bf16 = 0;
  for (int l = first; l < first + n; ++l) {
    params_q += dims.attention_params / tp;
    params_bf16 += 2 * dims.norm_params;
    if (m.moe_layer(l)) {
      // Routed experts: whole experts split over EP ranks, or every expert sharded over TP.
      params_expert += m.moe.experts * dims.expert_params / tp;
      params_q += m.moe.shared_experts * dims.expert_params / tp;
      params_bf16 += dims.router_params;  // the gate stays unquantized and replicated
    } else {
      params_q += dims.dense_mlp_params / tp;
    }
  }
  if (stage == 0) params_bf16 += count_parameters(m).embedding / tp;
  if (stage == d.pp - 1) {
    params_bf16 += dims.norm_params;  // the final norm
    // The LM head (a tied one is the embedding itself unless the last stage is another GPU).
    if (!m.tied_embeddings || d.pp > 1) params_bf16 += static_cast<double>(m.vocab) * dims.hidden / tp;
  }
  // RoPE's cos/sin cache: one per model on every GPU, max positions x rotary dim, BF16 (vLLM's
  // RotaryEmbedding.cos_sin_cache; part of "Loading model weights took ...").
  if (!m.learned_positions) {
    params_bf16 += static_cast<double>(m.max_seq) * (m.mla.enabled() ? m.mla.qk_rope_head_dim : dims.head_dim);
  }
  return params_q * w + params_expert * we + params_bf16 * 2;
}

double serving_activation_bytes(const ServingDeployment& d, std::int64_t tokens) {
  const ModelSpec& m = d.model;
  const double h = static_cast<double>(m.hidden), tp = d.tp;
  double ffn = static_cast<double>(m.ffn_hidden);
  if (m.moe.enabled()) {
    ffn = std::max(ffn * (m.moe.first_dense_layers > 0 ? 1 : 0),
                   static_cast<double>(m.moe.expert_ffn_hidden) * (m.moe.top_k + m.moe.shared_experts));
  }
  const double up = (is_gated(m.activation) ? 2 : 1) * ffn / tp;
  return static_cast<double>(tokens) * (up + ffn / tp + 3 * h) * 2;
}

double kv_block_bytes(const ServingDeployment& d, int block_size, int stage) {
  const int layers = stage_layers(d, stage) - stage_windowed_layers(d, stage);
  return static_cast<double>(block_size) * layers * kv_layer_bytes_per_token(d);
}

double kv_bytes_per_token(const ServingDeployment& d) {
  return static_cast<double>(d.model.layers) * model_dims(d.model).kv_cache_per_token * kv_bytes_per_elem(d.kv_dtype);
}

double kv_bytes_of_context(const ServingDeployment& d, std::int64_t tokens) {
  // kv_bytes_per_token's layers: the full ones hold every token, the windowed ones the window's.
  const ModelSpec& m = d.model;
  const int windowed = m.windowed_layers(0, m.layers);
  const double t = static_cast<double>(tokens);
  const double wt = windowed > 0 ? std::min(t, static_cast<double>(m.attention_window)) : 0;
  return kv_bytes_per_token(d) * ((m.layers - windowed) * t + windowed * wt) / m.layers;
}

KvCapacity kv_capacity(const ServingDeployment& d, const SchedulerConfig& s) {
  KvCapacity c;
  const GpuSpec& gpu = d.cluster.spec.gpu;
  const std::int64_t profile_tokens = s.max_num_batched_tokens;
  c.activation_bytes = serving_activation_bytes(d, profile_tokens);
  c.non_torch_bytes = d.overhead.non_torch_gib * kGiB + (d.gpus() > 1 ? d.overhead.nccl_gib * kGiB : 0);
  std::int64_t blocks = -1;
  c.available_bytes = 1e300;
  for (int stage = 0; stage < d.pp; ++stage) {
    const double weights = serving_weight_bytes(d, stage);
    const double block = kv_block_bytes(d, s.block_size, stage);
    const double avail = gpu.hbm_bytes * s.gpu_memory_utilization - (weights + c.activation_bytes + c.non_torch_bytes);
    const std::int64_t b = avail > 0 && block > 0 ? static_cast<std::int64_t>(std::floor(avail / block)) : 0;
    if (blocks < 0 || b < blocks) {
      blocks = b;
      c.block_bytes = block;
      c.available_bytes = avail;
    }
    c.weight_bytes = std::max(c.weight_bytes, weights);
  }
  c.num_gpu_blocks = std::max<std::int64_t>(0, blocks);
  c.num_cpu_blocks =
      c.block_bytes > 0 ? static_cast<std::int64_t>(std::floor(s.swap_space_gib * kGiB / c.block_bytes)) : 0;
  const double replica_block = c.block_bytes * d.gpus();
  c.num_offload_blocks =
      replica_block > 0
          ? static_cast<std::int64_t>(std::floor(std::min(s.kv_offloading_size_gib * kGiB / replica_block, 2e9)))
          : 0;
  const std::int64_t max_len = s.max_model_len > 0 ? s.max_model_len : d.model.max_seq;
  // A request of max_model_len tokens in blocks: its full-attention pages and, with windows, what
  // vLLM reserves for the windowed ones (SlidingWindowSpec.max_memory_usage_bytes: the window
  // less one plus a step's tokens, capped at max_model_len, in pages, and one page more).
  const KvWindow win = kv_window(d);
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  std::int64_t request_blocks = ceil_div(max_len, s.block_size);
  double window_share = 0;  // window blocks per full-layer block, for the token count
  if (win.enabled()) {
    const std::int64_t span = std::min(win.tokens - 1 + s.max_num_batched_tokens, max_len);
    request_blocks += static_cast<std::int64_t>(
        std::ceil(win.blocks_per_page * static_cast<double>(ceil_div(span, s.block_size) + 1) - 1e-9));
    window_share = win.blocks_per_page;
  }
  // vLLM's "GPU KV cache size" divides the pool over its KV cache groups (one page a token each).
  c.tokens =
      static_cast<std::int64_t>(std::floor(static_cast<double>(c.num_gpu_blocks) / (1 + window_share))) * s.block_size;
  c.max_concurrency = max_len <= 0    ? 0
                      : win.enabled() ? static_cast<double>(c.num_gpu_blocks) / static_cast<double>(request_blocks)
                                      : static_cast<double>(c.tokens) / static_cast<double>(max_len);
  if (d.model.attention_window > 0 && c.block_bytes <= 0) {
    c.num_gpu_blocks = 0;
    c.refusal =
        "a pipeline stage holds only sliding-window layers, which the KV cache counts against full-attention "
        "pages (kv_cache.hpp KvWindow): use fewer pipeline stages";
  } else if (c.num_gpu_blocks == 0) {
    std::ostringstream e;
    e.precision(3);
    e << std::fixed;
    const double usable = gpu.hbm_bytes * s.gpu_memory_utilization / kGiB;
    if (c.weight_bytes / kGiB >= usable) {
      e << "the weights take " << c.weight_bytes / kGiB << " GiB per GPU, more than the " << usable
        << " GiB gpu_memory_utilization allows on " << gpu.name;
    } else {
      e << "no memory left for the KV cache on " << gpu.name << ": " << usable << " GiB usable, weights "
        << c.weight_bytes / kGiB << " GiB, profile-run activations " << c.activation_bytes / kGiB << " GiB, non-torch "
        << c.non_torch_bytes / kGiB << " GiB";
    }
    c.refusal = e.str();
  } else if (max_len > 0 && c.num_gpu_blocks < request_blocks) {
    std::ostringstream e;
    e << "max_model_len " << max_len << " is larger than the " << c.tokens
      << " tokens the KV cache can store (vLLM refuses to start)";
    c.refusal = e.str();
  }
  return c;
}

}  // namespace ctwin
