// How many KV cache blocks a replica gets, as vLLM sizes them (vllm/worker/worker.py
// determine_num_available_blocks; v1 gpu_worker.determine_available_memory): after loading the
// weights it runs a forward pass of max_num_batched_tokens dummy tokens, and the cache gets
//   total_gpu_memory * gpu_memory_utilization - (weights + peak activations + non-torch memory),
// in blocks of block_size tokens over this GPU's layers; every GPU of the replica takes the
// smallest count (the most loaded pipeline stage decides).
#pragma once

#include <cstdint>
#include <string>

#include "workloads/kv_cache.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

struct KvCapacity {
  std::int64_t num_gpu_blocks = 0;  // 0 with a refusal
  std::int64_t num_cpu_blocks = 0;  // swap space / block_bytes
  // KV offloading: the replica's host tier in blocks, kv_offloading_size / (block_bytes x GPUs)
  std::int64_t num_offload_blocks = 0;
  double block_bytes = 0;       // one block of block_size tokens on one GPU (its stage's layers)
  double weight_bytes = 0;      // per GPU, the most loaded stage
  double activation_bytes = 0;  // peak of the profile run, per GPU
  double non_torch_bytes = 0;   // CUDA context, NCCL buffers
  double available_bytes = 0;   // what the cache gets (negative: out of memory)
  std::int64_t tokens = 0;      // num_gpu_blocks * block_size ("GPU KV cache size: N tokens")
  double max_concurrency = 0;   // tokens / max_model_len ("Maximum concurrency ... Nx")
  std::string refusal;          // why the replica cannot run (weights do not fit, ...); empty when it can
};

// Weight bytes one GPU of pipeline stage `stage` holds: its layers' attention, MLP (routed
// experts split over EP ranks, else sharded over TP) and norms at their precision; the
// embedding on the first stage and the LM head on the last, BF16 and vocab-parallel over TP
// (vLLM quantizes neither), and RoPE's cos/sin cache (max_seq x rotary dim, BF16).
double serving_weight_bytes(const ServingDeployment& d, int stage);
// The profile run's peak activation on one GPU for `tokens` tokens: the MLP's gate/up output,
// its activation output and three hidden-width buffers, BF16 -- T (3 ffn / tp + 3 h) 2 bytes.
// Fits vLLM issue #10517's logs (Llama-3.1-8B: peak_torch - weights = 2.07 GiB at 20,000
// tokens, 2.99 GiB at 29,000) within 1%. MoE: the routed experts' width top_k * expert_ffn.
double serving_activation_bytes(const ServingDeployment& d, std::int64_t tokens);
// Bytes of one KV block on a GPU of `stage`: block_size * full-attention layers (a windowed
// layer's pages are counted by KvWindow) * (2 * kv_heads / tp * head_dim,
// or MLA's latent + RoPE key once, replicated over TP) * the KV dtype's bytes.
double kv_block_bytes(const ServingDeployment& d, int block_size, int stage);
// The model's KV bytes per token over all its layers, each KV head once (MLA: its latent and
// RoPE key once) at the deployment's KV dtype: what moving one token's KV to another replica
// carries, whatever the two replicas' TP.
double kv_bytes_per_token(const ServingDeployment& d);
// The KV bytes of one sequence of `tokens` tokens over the model's layers, each KV head once
// (as kv_bytes_per_token): a windowed layer holds only its last attention_window tokens.
double kv_bytes_of_context(const ServingDeployment& d, std::int64_t tokens);
// The windowed layers' share of the KV cache (kv_cache.hpp KvWindow): the model's window, and
// its windowed layers' KV over its full layers', the largest over the pipeline stages. None
// without a window.
KvWindow kv_window(const ServingDeployment& d);
// The layers of pipeline stage `stage` (vLLM's even split, the remainder on the first stages).
int stage_layers(const ServingDeployment& d, int stage);

KvCapacity kv_capacity(const ServingDeployment& d, const SchedulerConfig& s);

}  // namespace ctwin
