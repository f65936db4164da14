// What one transformer layer does on one GPU for one micro-batch: the kernels of its
// forward pass (with the matching backward cost) and the tensor-parallel communication
// between them, in Megatron's order (f before a column-parallel GEMM, g after a
// row-parallel one; Shoeybi et al. 2019, Korthikanti et al. 2022 for sequence parallelism).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

// embedding: the first and last pipeline stages' ranks that hold a tied word embedding.
// edp: the expert-data-parallel group, the DP x CP ranks holding the same experts (dp x cp / ep
// of them; Megatron-Core's expert-data-parallel group), which reduce and gather expert weights.
enum class CommGroup : std::uint8_t { tp, cp, ep, dp, pp, embedding, edp };
const char* to_string(CommGroup g);

struct LayerItem {
  std::string name;
  bool is_comm = false;
  // Compute: the forward kernel and its backward (dgrad + wgrad for GEMMs).
  OpCost fwd;
  OpCost bwd;
  // Communication: the collective run in forward and/or in backward at this point.
  CommGroup group = CommGroup::tp;
  std::optional<CollectiveOp> fwd_comm;
  std::optional<CollectiveOp> bwd_comm;
  double comm_bytes = 0;  // nccl-tests "size" of the collective
  // Ring attention: the compute cost above split into ring_steps blocks; between them each CP
  // rank passes a K/V chunk of comm_bytes to the next (twice that in backward: K/V and their
  // gradients), overlapped with the block that does not need it.
  int ring_steps = 0;
  // Ring attention: after each block but the first, the partial result is merged into FP32
  // accumulators (Transformer Engine's context parallelism): forward rescales the output by the
  // softmax statistics, backward accumulates dQ and the arriving chunk's dK/dV. Memory-bound
  // bytes per merge.
  double ring_merge_fwd_bytes = 0, ring_merge_bwd_bytes = 0;
  // Unfused attention's core (QK^T, softmax(-dropout), PV): what selective recomputation runs
  // again in backward instead of storing the s x s scores.
  bool attention_core = false;
  // A linear layer's GEMM (QKV and the other projections, the MLP's): FP8 training runs it in
  // FP8 (Transformer Engine's Linear / LayerNormLinear / LayerNormMLP); the rest stays BF16.
  bool linear = false;
  // An activation Transformer Engine fuses the FP8 casts into (its output's in forward, the
  // gradient's in backward), as norms fuse the next GEMM's input cast.
  bool fuses_fp8_cast = false;
};

struct LayerShape {
  double tokens = 0;  // tokens of one micro-batch on this GPU (micro_batch * seq_len / cp)
  double seq = 0;     // sequence length attention spans (the whole sequence, also under CP)
  double window = 0;  // sliding-window attention: tokens a query attends to (0: the whole causal prefix)
  int tp = 1;
  int cp = 1;
  bool sequence_parallel = false;
  bool flash = true;  // a fused (blockwise) kernel, priced as attention_impl
  AttentionImpl attention_impl = AttentionImpl::flash;
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::fp32;
  int logit_metric_passes = 0;
  bool dropout = false;
  bool cp_ring = true;  // with cp > 1: ring attention, else all-gather of K/V
  double bytes_per_elem = 2;
  Dtype dtype = Dtype::bf16;  // the compute dtype
  // Micro-batches per step on this rank: FP8 training casts the weights once per step.
  double microbatches = 1;
};

LayerShape layer_shape(const ModelSpec& m, const TrainingConfig& cfg);

// The loss kernel's HBM traffic per logit, forward and backward, with the logits in `e` bytes
// (docs/training.md, "The loss"), and the bytes per logit it holds at once (the logits and their
// FP32 copy, or the logits and their gradient).
struct CrossEntropyBytes {
  double fwd = 0;
  double bwd = 0;
  double resident = 0;
};
CrossEntropyBytes cross_entropy_bytes(CrossEntropyKernel k, double e);
// One forward-only FP32 cross-entropy of a training metric, per logit in `e` bytes.
double metric_cross_entropy_bytes(double e);

// The attention work of one forward pass on one GPU, workload-neutral: training attends full
// sequences; serving attends a chunk of new query tokens (a prefill chunk, or one decode token)
// over the context already in its KV cache. Causal: a query sees the keys up to its own.
struct AttentionShape {
  double query_tokens = 0;    // new tokens whose queries attend, over all sequences
  double attended_pairs = 0;  // (query, key) pairs scored after the causal mask
  double kv_tokens_read = 0;  // K/V tokens read: the cached context and the new tokens
};

// Training (and a prefill without cache): seqs sequences of seq tokens, seq^2/2 pairs each.
AttentionShape sequence_attention(double seqs, double seq);
// Serving: `chunk` new tokens per sequence after `context` cached ones, for `seqs` sequences;
// each new token i (1-based) sees context + i keys.
AttentionShape chunk_attention(double seqs, double chunk, double context);

// The fused (flash) attention kernel's forward on one of `tp` ranks: QK^T and PV, 2 FLOPs per
// multiply-add over the attended pairs of every local query head; it reads Q and the K/V read
// and writes the output, `bytes_per_elem` each.
OpCost attention_forward(const ModelSpec& m, const AttentionShape& a, double tp, double bytes_per_elem);
// Its backward, derived from the forward: FlashAttention-2 recomputes the scores, 2.5x the
// forward FLOPs (Dao 2023), and moves twice the bytes.
OpCost attention_backward(const OpCost& fwd);

// Copies of a token's hidden state an MoE dispatch sends over `ep` ranks (the combine sends as
// many back): top_k with Megatron's all-to-all; with DeepEP one per rank holding any of its
// experts, ep x (1 - C(E - E/ep, k) / C(E, k)) on average when the k experts are drawn uniformly
// (balanced routing). Equal to top_k at one expert per rank.
double moe_dispatch_copies(const MoeSpec& moe, int ep, MoeDispatcher dispatcher);

// Forward order. `moe` selects a mixture-of-experts MLP; load_imbalance scales the
// busiest expert rank's work (1.0 = perfectly balanced). expert_tp: the TP ranks one routed
// expert is split over, 0 for all of them (s.tp); 1 with s.tp > 1 is MoE parallel folding: each
// TP rank routes its own 1/tp of the tokens (sequence parallel) to whole experts over the ep
// ranks, with no TP collective around the routed experts (the shared experts keep theirs).
std::vector<LayerItem> transformer_layer(const ModelSpec& m, const LayerShape& s, bool moe, int ep,
                                         double load_imbalance = 1.0,
                                         MoeDispatcher dispatcher = MoeDispatcher::alltoall, int expert_tp = 0);
// Token embedding lookup (first stage) and LM head + loss (last stage).
std::vector<LayerItem> embedding_items(const ModelSpec& m, const LayerShape& s);
std::vector<LayerItem> head_items(const ModelSpec& m, const LayerShape& s);

// A generic model's layer for one micro-batch: a tensor-core kernel of its FLOPs reading its
// weights and writing its activations; backward costs twice the forward.
LayerItem generic_layer_item(const GenericLayer& l, const TrainingConfig& cfg);

// FP8 training (Transformer Engine, per-tensor scaling): the linear GEMMs in FP8 on 1-byte
// operands, every other op tagged BF16, and before each FP8 GEMM the cast kernels TE runs
// (layer_ops.cpp says which). Returns the items with the casts inserted.
std::vector<LayerItem> fp8_training_items(std::vector<LayerItem> items, const LayerShape& s);

// Forward FLOPs of one layer for one micro-batch on this GPU (sum over compute items).
double forward_flops(const std::vector<LayerItem>& items);

}  // namespace ctwin
