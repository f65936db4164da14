// What one serving iteration costs on a replica: the forward pass of the whole batch priced by
// the same CostModel (roofline) and NCCL collective estimator training uses, plus the host's
// per-iteration overhead and the speculative proposer.
//
// Per layer on one GPU: norms, the QKV / output / MLP GEMMs over every token of the batch (a
// mixed batch reads each weight once), attention split into the prefill chunks' and the decode
// sequences' kernels (attention_forward over the BatchShape's sums, paged attention reading the
// actual contexts), MoE routers and the grouped expert GEMMs (decode reads only the experts its
// tokens touch), and two TP all-reduces of tokens x hidden BF16. Pipeline stages run one after
// another for a batch (one micro-batch per iteration, as vLLM's non-virtual-engine path), so the
// iteration is the sum of the stages plus the (pp - 1) activation hand-offs.
//
// Attribution: the token-proportional work (GEMMs, norms, LM head) is split between prefill_s and
// decode_s by the two parts' shares of the batch's tokens; each part's attention is its own.
// comm_s holds the TP all-reduces, the logits' all-gather and the PP hand-offs (not overlapped);
// overhead_s the host's; draft_s the proposer's; lora_s the LoRA adapters'. The parts add up to
// total_s.
//
// Multi-LoRA (BatchShape::lora_tokens > 0; serving_lora.hpp): per layer, Punica's two SGMV
// kernels over the adapted projections (S-LoRA's MBGMM), summed over the projections and split
// over TP: shrink (T x d_in) @ (d_in x r), expand (T x r) @ (r x d_out), with T the adapter
// tokens, r the rank, A the distinct adapters. FLOPs 2 T r d_in and 2 T r d_out (2 T r (d_in +
// d_out) in all); bytes: each adapter's A or B once (A r d_in, A r d_out), the activations
// (T d_in read; T r written and read; T d_out read and written back), BF16. A grouped GEMM of A
// groups on the roofline: memory-bound at small rank.
//
// The op list: iteration_ops(b) lists the same forward pass kernel by kernel and collective by
// collective, in the order a layer runs them, from the same emitters that price it (one source
// of truth: `ctwin realrun` replays this list and `ctwin validate` compares it with the price).
//
// Expert parallelism inside one replica (EP = TP, vLLM's enable_expert_parallel at dp = 1): the
// tokens are replicated over the TP group after attention, each rank runs its E/ep whole experts
// and the same all-reduce combines them (vLLM's FusedMoE); the all-to-all dispatch appears only
// with data-parallel attention across replicas (the fleet issue).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/model_dims.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_lora.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

// Which part of an iteration's time an op of its forward pass counts in (IterationTime):
// token-proportional work (split between prefill_s and decode_s by token share), either part's
// attention, or communication.
enum class IterationPart : std::uint8_t { shared, prefill_attention, decode_attention, comm, lora };

// One op of an iteration's forward pass on one GPU of the replica: a kernel (`cost`, priced by
// the GEMM cost model when `quantized`, else by the BF16 one) or a collective (`op` of `bytes`,
// nccl-tests' size, over `ranks`: the stage's TP group, or a stage hand-off's pair).
struct IterationOp {
  const char* name = "";  // "qkv", "attention_decode", "attention_all_reduce", "lm_head", ...
  IterationPart part = IterationPart::shared;
  int stage = 0;   // pipeline stage
  int layer = -1;  // the model's layer, -1 for the embedding, the head and stage hand-offs
  bool collective = false;
  OpCost cost;
  bool quantized = false;
  CollectiveOp op = CollectiveOp::all_reduce;
  double bytes = 0;
  std::vector<GpuId> ranks;
};

// Expected distinct experts that `tokens` tokens touch when each picks top_k of `experts`
// uniformly: E (1 - (1 - k/E)^T). Decode reads only these experts' weights.
double expected_distinct_experts(double experts, double top_k, double tokens);

class ServingCostModel final : public IterationCostModel {
 public:
  // The deployment's null cost models take the profile's roofline (with_default_cost_models).
  explicit ServingCostModel(ServingDeployment d);
  ~ServingCostModel() override;
  IterationTime iteration(const BatchShape& b) const override;
  // The target model's forward pass of iteration(b), op by op in the order it runs (embedding,
  // each stage's layers then its hand-off, the head): every kernel and collective whose times
  // make prefill_s + decode_s + comm_s. The proposer and the host overhead are not ops.
  std::vector<IterationOp> iteration_ops(const BatchShape& b) const;
  // The time of one op of iteration_ops, as iteration() prices it.
  double op_seconds(const IterationOp& op) const;

  // Pieces, for tests and reports (seconds on one GPU of the replica).
  // One TP all-reduce of `tokens` x hidden BF16 over the TP group (0 at tp = 1), memoized.
  double tp_all_reduce_s(std::int64_t tokens) const;
  // Whether this batch runs as a captured CUDA graph (decode only, at most max_cuda_graph_batch
  // sequences, contexts within max_seq_len_to_capture, no enforce_eager).
  bool uses_cuda_graph(const BatchShape& b) const;
  const ServingDeployment& deployment() const { return d_; }

 private:
  struct Parts {
    double shared = 0;  // token-proportional compute (split by token share)
    double prefill_attention = 0;
    double decode_attention = 0;
    double comm = 0;
    double lora = 0;  // the LoRA adapters' kernels
  };
  struct PriceSink;  // sums the emitted ops' times into Parts
  struct ListSink;   // collects them as IterationOps
  // The forward pass of the whole replica (every stage), no host overhead, no proposer.
  Parts forward(const BatchShape& b, bool lm_head) const;
  // One layer on one GPU; moe selects the MoE MLP, windowed the sliding-window attention.
  void layer(const BatchShape& b, bool moe, bool windowed, Parts& p) const;
  // The emitters, in the order the pass runs: one layer's ops (`want`: a mask of kShared,
  // kAttention, kComm, so that pricing builds only what it needs), the embedding, the head.
  template <class Sink>
  void emit_layer(const BatchShape& b, bool moe, bool windowed, unsigned want, Sink& sink) const;
  template <class Sink>
  void emit_embedding(const BatchShape& b, Sink& sink) const;
  template <class Sink>
  void emit_head(const BatchShape& b, Sink& sink) const;
  // Collective sizes (bytes): a TP all-reduce of `tokens`, the logits' all-gather of `rows`, a
  // stage hand-off of `tokens`.
  double all_reduce_bytes(std::int64_t tokens) const;
  double logits_bytes(std::int64_t rows) const;
  double handoff_bytes(std::int64_t tokens) const;
  double logits_gather_s(std::int64_t rows) const;  // memoized; 0 at tp = 1
  double handoffs_s(std::int64_t tokens) const;     // every stage's, memoized; 0 at pp = 1
  double collective_s(CollectiveOp op, const std::vector<GpuId>& ranks, double bytes) const;

  ServingDeployment d_;
  ModelDims dims_;
  std::vector<GpuId> tp_ranks_;
  int dense_layers_ = 0, moe_layers_ = 0;
  int dense_windowed_ = 0, moe_windowed_ = 0;  // of those, the sliding-window layers
  double kv_bytes_ = 2;
  LoraLayerWidths lora_widths_;
  double w_bytes_ = 2;
  double expert_w_bytes_ = 2;                    // a routed expert's weight (mxfp4 quantizes only these)
  std::unique_ptr<ServingCostModel> draft_;      // draft_model: the proposer at the same tp
  mutable std::vector<double> all_reduce_memo_;  // by tokens; NaN: not yet computed
  mutable std::vector<double> handoff_memo_;
  mutable std::vector<double> logits_memo_;                        // the logits' all-gather, by rows
  mutable std::vector<double> dense_layer_memo_, moe_layer_memo_;  // layer_shared_s by tokens
};

}  // namespace ctwin
