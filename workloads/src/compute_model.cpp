#include "workloads/compute_model.hpp"

#include <algorithm>

namespace ctwin {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::gemm:
      return "gemm";
    case OpKind::grouped_gemm:
      return "grouped_gemm";
    case OpKind::attention:
      return "attention";
    case OpKind::elementwise:
      return "elementwise";
    case OpKind::norm:
      return "norm";
    case OpKind::embedding:
      return "embedding";
    case OpKind::loss:
      return "loss";
    case OpKind::optimizer:
      return "optimizer";
  }
  return "?";
}

ComputeModel default_compute_model(const GpuSpec& gpu, Dtype dtype) {
  ComputeModel cm;
  cm.peak_flops = gpu.peak_flops(dtype);
  cm.hbm_bytes_per_s = gpu.hbm_gbps * 1e9;
  cm.gemm_efficiency = gpu.gemm_efficiency;
  // Flash-attention kernels reach roughly 70-75% of what large GEMMs do (FlashAttention-2
  // paper, Dao 2023: 50-73% of A100 peak forward vs ~80% for cuBLAS GEMMs).
  cm.attention_efficiency = gpu.gemm_efficiency * 0.75;
  cm.hbm_efficiency = gpu.hbm_efficiency;
  cm.launch_s = gpu.kernel_launch_us * 1e-6;
  return cm;
}

CostModelPtr default_cost_model(const GpuSpec& gpu, Dtype dtype) {
  return std::make_shared<RooflineCostModel>(default_compute_model(gpu, dtype));
}

double op_seconds(const ComputeModel& cm, const OpCost& op) {
  double eff = 1.0;
  if (op.kind == OpKind::gemm || op.kind == OpKind::grouped_gemm) {
    const bool grouped = op.kind == OpKind::grouped_gemm;
    eff = cm.gemm_efficiency * (grouped ? cm.grouped_gemm_efficiency : 1.0);
    const double m = grouped ? op.m / op.groups : op.m;
    for (double d : {m, op.n, op.k}) {
      if (d > 0) eff *= d / (d + cm.gemm_knee);
    }
  } else if (op.kind == OpKind::attention) {
    eff = cm.attention_efficiency;
  }
  const double t_compute = op.flops > 0 && cm.peak_flops > 0 ? op.flops / (cm.peak_flops * eff) : 0;
  const double t_memory = op.bytes > 0 ? op.bytes / (cm.hbm_bytes_per_s * cm.hbm_efficiency) : 0;
  return std::max(t_compute, t_memory) + cm.launch_s;
}

}  // namespace ctwin
