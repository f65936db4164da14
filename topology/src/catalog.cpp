#include "topology/catalog.hpp"

namespace ctwin {

double GpuSpec::peak_flops(Dtype d) const {
  switch (d) {
    case Dtype::bf16:
      return bf16_tflops * 1e12;
    case Dtype::fp16:
      return fp16_tflops * 1e12;
    case Dtype::fp8:
      return fp8_tflops * 1e12;
    case Dtype::fp32:
      return tf32_tflops * 1e12;
  }
  return 0;
}

const char* to_string(Dtype d) { return dtype_names.name(d); }

}  // namespace ctwin
