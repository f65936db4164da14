// realrun's GPU backend (CUDA), compiled only when the CUDA Toolkit is found.
#pragma once

#include <string>

namespace ctwin::realrun {

// True when this build has the GPU backend compiled in.
bool gpu_backend_built();

#ifdef CTWIN_HAVE_CUDA
// y = a*x + y on the device over n floats; returns an empty string or the CUDA error.
// The first kernel of the backend: a bandwidth probe that calibration will time.
std::string device_axpy(float a, const float* x_host, float* y_host, int n);
#endif

}  // namespace ctwin::realrun
