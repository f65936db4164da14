// Hardware catalog entries: what a GPU can do, from its datasheet. Loaded from
// topology/catalog/gpus.json (embedded in ctwin) and overridable from a scenario.
#pragma once

#include <map>
#include <string>

#include "sim/names.hpp"

namespace ctwin {

enum class Dtype { bf16, fp16, fp8, fp32 };
inline constexpr auto dtype_names =
    make_names<Dtype>({{Dtype::bf16, "bf16"}, {Dtype::fp16, "fp16"}, {Dtype::fp8, "fp8"}, {Dtype::fp32, "fp32"}});

struct GpuSpec {
  std::string name;
  double bf16_tflops = 0;  // dense tensor-core peak
  double fp16_tflops = 0;
  double fp8_tflops = 0;  // 0 where unsupported
  double fp4_tflops = 0;  // NVFP4, 0 where unsupported (before Blackwell)
  double int8_tops = 0;   // dense INT8
  double tf32_tflops = 0;
  double hbm_bytes = 0;
  double hbm_gbyte_per_s = 0;     // GB/s
  int nvlink_gen = 0;             // 0: no NVLink
  double nvlink_gbyte_per_s = 0;  // per GPU, per direction, GB/s
  int pcie_gen = 4;
  double pcie_gbyte_per_s = 0;    // x16, per direction, GB/s
  double gemm_efficiency = 0.75;  // fraction of peak a large GEMM reaches
  // Fraction of the FP8 peak a large FP8 GEMM reaches (FP8 training's linear layers, W8A8 serving).
  double fp8_gemm_efficiency = 0.75;
  double hbm_efficiency = 0.85;   // fraction of HBM bandwidth a streaming kernel reaches
  double kernel_launch_us = 2.0;  // fixed cost per kernel (launch and tail)
  std::string source;
  // Power and price, for serving's cost and energy (workloads/serving_energy.hpp); 0: not known.
  double tdp_w = 0;         // board power limit (datasheet's max TDP)
  double idle_w = 0;        // draw with nothing running
  double gpu_hour_usd = 0;  // default on-demand price of one GPU for an hour
  std::string power_source, price_source;

  // Peak dense tensor throughput for a dtype, in FLOP/s.
  double peak_flops(Dtype d) const;
};

struct GpuCatalog {
  std::map<std::string, GpuSpec> gpus;
};

const char* to_string(Dtype d);

}  // namespace ctwin
