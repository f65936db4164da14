#include "workloads/compute_model.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "workloads/profile.hpp"

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
  // The GPU's profile (workloads/catalog/profiles). The three coefficients the GPU catalog also
  // carries, and a scenario may override there, come from the GpuSpec.
  Profile p = builtin_profile(gpu.name);
  p.compute.gemm_efficiency = gpu.gemm_efficiency;
  p.compute.fp8_gemm_efficiency = gpu.fp8_gemm_efficiency;
  p.compute.hbm_efficiency = gpu.hbm_efficiency;
  p.compute.kernel_launch_us = gpu.kernel_launch_us;
  return compute_model(p, gpu, dtype);
}

CostModelPtr default_cost_model(const GpuSpec& gpu, Dtype dtype) {
  return std::make_shared<RooflineCostModel>(default_compute_model(gpu, dtype));
}

namespace {

// The tensor-core peak an op runs at: its own dtype's where it carries one, else the model's.
double op_peak_flops(const ComputeModel& cm, Dtype d) {
  if (d == cm.dtype) return cm.peak_flops;
  const double peak = d == Dtype::fp8 ? cm.fp8_peak_flops : cm.bf16_peak_flops;
  return peak > 0 ? peak : cm.peak_flops;
}

}  // namespace

std::size_t OpCostHash::operator()(const OpCost& c) const {
  std::uint64_t h = static_cast<std::uint64_t>(c.kind) << 8 | (c.dtype ? 1 + static_cast<std::uint64_t>(*c.dtype) : 0);
  h = h << 1 | (c.split_accumulator ? 1 : 0);
  h = h << 2 | static_cast<std::uint64_t>(c.attention_impl);
  for (double v : {c.flops, c.bytes, c.m, c.n, c.k, c.groups, c.query_tokens, c.attended_pairs, c.kv_tokens}) {
    h = (h ^ std::bit_cast<std::uint64_t>(v)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return static_cast<std::size_t>(h);
}

double op_seconds(const ComputeModel& cm, const OpCost& op) {
  const Dtype dtype = op.dtype.value_or(cm.dtype);
  const double peak = op_peak_flops(cm, dtype);
  double eff = 1.0;
  if (op.kind == OpKind::gemm || op.kind == OpKind::grouped_gemm) {
    const bool grouped = op.kind == OpKind::grouped_gemm;
    const bool fp8 = dtype == Dtype::fp8;
    double base = fp8 ? cm.fp8_gemm_efficiency : cm.gemm_efficiency;
    if (fp8 && op.split_accumulator) base *= cm.fp8_split_accumulator_efficiency;
    eff = base * (grouped ? cm.grouped_gemm_efficiency : 1.0);
    const double m = grouped ? op.m / op.groups : op.m;
    for (double d : {m, op.n, op.k}) {
      if (d > 0) eff *= d / (d + cm.gemm_knee);
    }
  } else if (op.kind == OpKind::attention) {
    switch (op.attention_impl) {
      case AttentionImpl::flash:
        eff = cm.attention_efficiency;
        break;
      case AttentionImpl::flash2:
        eff = cm.flash2_attention_efficiency;
        break;
      case AttentionImpl::triton:
        eff = cm.triton_attention_efficiency;
        break;
    }
  }
  const double t_compute = op.flops > 0 && peak > 0 ? op.flops / (peak * eff) : 0;
  const double t_memory = op.bytes > 0 ? op.bytes / (cm.hbm_bytes_per_s * cm.hbm_efficiency) : 0;
  return std::max(t_compute, t_memory) + cm.launch_s;
}

}  // namespace ctwin
