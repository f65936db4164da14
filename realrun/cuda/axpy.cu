#include <cuda_runtime.h>

#include <string>

#include "realrun/cuda_backend.hpp"

namespace ctwin::realrun {
namespace {

__global__ void axpy_kernel(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

std::string device_axpy(float a, const float* x_host, float* y_host, int n) {
  float *x = nullptr, *y = nullptr;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaError_t err = cudaMalloc(&x, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&y, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(x, x_host, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(y, y_host, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    axpy_kernel<<<(n + 255) / 256, 256>>>(a, x, y, n);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(y_host, y, bytes, cudaMemcpyDeviceToHost);
  cudaFree(x);
  cudaFree(y);
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

}  // namespace ctwin::realrun
