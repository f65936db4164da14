// The compute cost model: the time of one kernel from its FLOPs and HBM bytes (a roofline
// with shape-dependent efficiency and a fixed per-kernel cost). Every coefficient is a plain
// field so a calibration profile can replace it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "topology/catalog.hpp"

namespace ctwin {

// grouped_gemm: one kernel running `groups` equal GEMMs (MoE experts on one GPU), each of m / groups rows.
enum class OpKind : std::uint8_t { gemm, grouped_gemm, attention, elementwise, norm, embedding, loss, optimizer };

// Which fused attention kernel an OpKind::attention op runs: the generation's best (flash: FA2 on
// Ampere, FA3 or cuDNN's fused attention on Hopper and later), FlashAttention-2 (no Hopper
// TMA/WGMMA path), or the Triton flash attention of 2022-23 (MPT's attn_impl "triton").
enum class AttentionImpl : std::uint8_t { flash, flash2, triton };

const char* to_string(OpKind k);

struct OpCost {
  OpKind kind = OpKind::elementwise;
  double flops = 0;
  double bytes = 0;  // HBM traffic
  // GEMM shape (m x k) @ (k x n); 0 for non-GEMMs.
  double m = 0, n = 0, k = 0;
  double groups = 1;  // grouped_gemm: the GEMMs in the group, m split evenly over them
  // The dtype the kernel computes in; unset: the step's compute dtype (the roofline prices every
  // op at the dtype it was built for; a measured or learned model may tell them apart).
  std::optional<Dtype> dtype = std::nullopt;
  // An FP8 GEMM that promotes its partial sums to FP32 at intervals instead of the tensor
  // cores' fast accumulation: Transformer Engine's dgrad and wgrad on Hopper (_2X_ACC_DGRAD,
  // _2X_ACC_WGRAD); its forward GEMM (and serving's) uses fast accumulation.
  bool split_accumulator = false;
  // Attention geometry (OpKind::attention; 0 otherwise), per kernel on this GPU, summed over
  // sequences: query tokens, (query, key) pairs scored (causal: about half of query x key), and
  // key/value tokens read. Prefill and decode attention differ here at the same FLOPs.
  double query_tokens = 0;
  double attended_pairs = 0;
  double kv_tokens = 0;
  AttentionImpl attention_impl = AttentionImpl::flash;
  bool operator==(const OpCost&) const = default;
};

// For maps keyed on a kernel's shape (StepProgram::costs interns each distinct OpCost once).
struct OpCostHash {
  std::size_t operator()(const OpCost& c) const;
};

struct ComputeModel {
  // The dtype an op without its own computes in; peak_flops is its dense tensor-core peak.
  Dtype dtype = Dtype::bf16;
  double peak_flops = 0;              // dense tensor-core peak for the compute dtype, FLOP/s
  double hbm_bytes_per_s = 0;         // HBM bandwidth, bytes/s
  double gemm_efficiency = 0.75;      // fraction of peak a large GEMM sustains
  double attention_efficiency = 0.6;  // fraction of peak flash-attention sustains
  // The same for FlashAttention-2 and Triton's flash attention (OpCost::attention_impl).
  double flash2_attention_efficiency = 0.6;
  double triton_attention_efficiency = 0.6;
  double hbm_efficiency = 0.85;  // fraction of HBM bandwidth streaming kernels sustain
  double launch_s = 2e-6;        // fixed cost per kernel
  // A GEMM dimension d contributes d / (d + gemm_knee) to efficiency: small or skinny
  // shapes fill fewer SMs and waves (efficiency halves at d = gemm_knee).
  double gemm_knee = 64;
  // A grouped GEMM (MoE experts) sustains this fraction of what one GEMM of the same per-group
  // shape does: variable per-expert row counts, tile padding, the group scheduler and, in
  // dropless training, the busiest expert setting the pace. One value for every GPU, fitted
  // across the two MoE validation cases (docs/validation.md); calibratable.
  double grouped_gemm_efficiency = 0.93;
  // Ops that carry their own dtype (FP8 training: the linear layers' GEMMs in FP8, attention and
  // the LM head in BF16) run at that dtype's peak; 0: peak_flops.
  double bf16_peak_flops = 0;
  double fp8_peak_flops = 0;
  // An FP8 GEMM's fraction of the FP8 peak with fast accumulation, in place of gemm_efficiency.
  // Per GPU (catalog fp8_gemm_efficiency, profile /compute/fp8_gemm_efficiency); on Hopper the
  // serving FP8 cases hold it at the BF16 share (docs/fidelity-fp8.md).
  double fp8_gemm_efficiency = 0.75;
  // An FP8 GEMM with split accumulation (OpCost::split_accumulator) sustains this fraction of
  // what fast accumulation does. Fitted in docs/fidelity-fp8.md; calibratable.
  double fp8_split_accumulator_efficiency = 0.78;
};

ComputeModel default_compute_model(const GpuSpec& gpu, Dtype dtype);

// Seconds for one kernel: max(compute-bound time, memory-bound time) plus the launch cost.
double op_seconds(const ComputeModel& cm, const OpCost& op);

// The seam for pricing kernels: the training simulation asks a CostModel for every op's time,
// so a calibrated profile, a lookup table of measured kernels or a learned model can replace
// the roofline (TrainingOptions::cost_model).
class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double op_seconds(const OpCost& op) const = 0;
};

// Today's roofline (op_seconds above) as a CostModel.
class RooflineCostModel final : public CostModel {
 public:
  explicit RooflineCostModel(const ComputeModel& cm) : cm_(cm) {}
  double op_seconds(const OpCost& op) const override { return ctwin::op_seconds(cm_, op); }
  const ComputeModel& coefficients() const { return cm_; }

 private:
  ComputeModel cm_;
};

using CostModelPtr = std::shared_ptr<const CostModel>;

// The roofline with default_compute_model's coefficients for the GPU.
CostModelPtr default_cost_model(const GpuSpec& gpu, Dtype dtype);

// For holders of a CostModelPtr: op_seconds(cm, op) reads the same whichever they hold.
inline double op_seconds(const CostModelPtr& cm, const OpCost& op) { return cm->op_seconds(op); }

}  // namespace ctwin
