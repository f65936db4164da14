// Memory per GPU during a training step: weights, gradients and optimizer states from
// parameter counts (mixed-precision Adam, ZeRO stages as Rajbhandari et al. 2020), and
// activations per the formulas of Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models"), generalised to GQA and SwiGLU.
#pragma once

#include <string>

#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

// The levels PyTorch reports (docs/training.md, "Memory per GPU"): `allocated` is what the
// caching allocator hands out at the peak (torch.cuda.max_memory_allocated, Megatron-LM's
// "mem-max-allocated-bytes"); `reserved` adds the segments it keeps cached but unused
// (max_memory_reserved) while the GPU has room: under pressure it releases them and retries, so
// the OOM test is on `peak`, the allocated peak plus what lives outside the allocator (the CUDA
// context and the fragmentation it cannot release, NCCL's buffers).
struct MemoryBreakdown {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;  // FP32 master weights and Adam moments
  double activations = 0;
  double activations_per_microbatch = 0;  // one whole-stage micro-batch's (no logits); a chunk holds 1/v
  // Full recomputation: the layer being recomputed holds its whole activations during its
  // backward, beyond the loss buffers (freed by then) it takes the place of.
  double recompute = 0;
  // ZeRO-3: the units gathered whole at once (the current and the prefetched) and the
  // unsharded gradients of one unit before its reduce-scatter.
  double gathered = 0;
  double allocated = 0;  // weights .. gathered: the caching allocator's peak
  double reserved = 0;   // allocated x (1 + allocator_reserve_fraction)
  double comm_buffers = 0;
  double overhead = 0;  // CUDA context, libraries, fragmentation the allocator cannot release
  double peak = 0;      // allocated + comm_buffers + overhead: what must fit
  double capacity = 0;
  bool oom = false;
  // Offloading (workloads/offload.hpp): what this GPU keeps in its node's host memory and on its
  // NVMe instead of on the GPU (the terms above then leave it out).
  double host_bytes = 0;
  double nvme_bytes = 0;
  std::string dominant;  // the largest term
  std::string advice;    // when OOM: what would fit
};

// Activation bytes one transformer layer keeps for backward, for one micro-batch.
double activation_bytes_per_layer(const ModelSpec& m, const TrainingConfig& cfg, bool moe_layer);

// Bytes one GPU of pipeline stage `stage` keeps between steps: weights, gradients and optimizer
// states (with the FP8 weight cache), what Megatron-LM logs as "mem-allocated-bytes".
double persistent_bytes(const MemoryBreakdown& mb);

// Parameters held by one GPU of pipeline stage `stage` (of cfg.parallel.pp), before ZeRO sharding.
double stage_params(const ModelSpec& m, const TrainingConfig& cfg, int stage);

// The routed experts' parameters among them (0 for a dense model): each GPU holds experts / ep
// of every MoE layer of its stage, TP-split.
double stage_expert_params(const ModelSpec& m, const TrainingConfig& cfg, int stage);

// The parameters of stage `stage` (per GPU) in Transformer Engine's linear layers, the weights FP8
// training casts (and, with fp8_param_gather, keeps only in FP8): all but the norms, the
// embedding and the LM head. 0 for generic models.
double stage_linear_params(const ModelSpec& m, const TrainingConfig& cfg, int stage);

// GPUs holding the same routed experts, over which ZeRO shards their states and a checkpoint
// splits them: dp x cp / ep (Megatron-Core's expert-data-parallel group; at least 1).
double expert_data_parallel(const Parallelism& p);

// Micro-batches whose activations pipeline stage `stage` holds at the peak of the schedule: the
// most forwards of its order (workloads/pipeline_schedule.hpp) whose backward has not run, in
// whole-stage micro-batches (an interleaved chunk forward counts 1/v). Zero-bubble keeps
// 1F1B's count. The one-argument form is stage 0's.
double inflight_microbatches(const TrainingConfig& cfg, int stage);
double inflight_microbatches(const TrainingConfig& cfg);

// One pipeline stage's memory (the peak field and oom are that stage's; no advice).
MemoryBreakdown estimate_stage_memory(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes, int stage);

// The worst stage's memory: the highest peak of estimate_stage_memory over all stages (stage 0
// usually holds the most activations, the last the LM head), with advice when it does not fit.
MemoryBreakdown estimate_memory(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes);

}  // namespace ctwin
