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
// overhead_s the host's; draft_s the proposer's. The parts add up to total_s.
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
#include "workloads/serving_types.hpp"

namespace ctwin {

// Expected distinct experts that `tokens` tokens touch when each picks top_k of `experts`
// uniformly: E (1 - (1 - k/E)^T). Decode reads only these experts' weights.
double expected_distinct_experts(double experts, double top_k, double tokens);

class ServingCostModel final : public IterationCostModel {
 public:
  // The deployment's null cost models take the profile's roofline (with_default_cost_models).
  explicit ServingCostModel(ServingDeployment d);
  ~ServingCostModel() override;
  IterationTime iteration(const BatchShape& b) const override;

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
  };
  // The forward pass of the whole replica (every stage), no host overhead, no proposer.
  Parts forward(const BatchShape& b, bool lm_head) const;
  // One layer on one GPU; moe selects the MoE MLP.
  void layer(const BatchShape& b, bool moe, Parts& p) const;
  // A layer's GEMMs, norms, residuals and MoE routing over T tokens (no attention, no comm).
  double layer_shared_s(double T, bool moe) const;
  double collective_s(CollectiveOp op, const std::vector<GpuId>& ranks, double bytes) const;

  ServingDeployment d_;
  ModelDims dims_;
  std::vector<GpuId> tp_ranks_;
  int dense_layers_ = 0, moe_layers_ = 0;
  double kv_bytes_ = 2;
  double w_bytes_ = 2;
  std::unique_ptr<ServingCostModel> draft_;      // draft_model: the proposer at the same tp
  mutable std::vector<double> all_reduce_memo_;  // by tokens; NaN: not yet computed
  mutable std::vector<double> handoff_memo_;
  mutable std::vector<double> logits_memo_;                        // the logits' all-gather, by rows
  mutable std::vector<double> dense_layer_memo_, moe_layer_memo_;  // layer_shared_s by tokens
};

}  // namespace ctwin
