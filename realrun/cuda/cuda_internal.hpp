// The CUDA backend's Device (cuda_device.cpp: streams, events, kernels, cuBLASLt) and its
// communicators (cuda_comm.cpp: NCCL, the unique-id rendezvous, timeouts). Private to
// realrun/cuda/.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#ifdef CTWIN_HAVE_NCCL
#include <nccl.h>
#endif

#include "realrun/cuda_device.hpp"
#include "realrun/cuda_plan.hpp"

namespace ctwin::realrun::cuda {

// "2 s", "0.5 s": a timeout as a user wrote it.
std::string seconds(double s);

// Throws std::runtime_error "<what>: <CUDA's message>" on an error.
void check(cudaError_t e, const std::string& what);
void check(cublasStatus_t s, const std::string& what);

struct CommState {
  CommSpec spec;
  int index = 0;  // this rank's position in spec.ranks
#ifdef CTWIN_HAVE_NCCL
  ncclComm_t comm = nullptr;
#endif
  std::string last;  // the last collective enqueued, for the timeout message
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int rank, int gpu, const BackendOptions& opt, const CudaOptions& cuda);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return name_; }
  int rank() const override { return rank_; }
  int streams() const override { return static_cast<int>(streams_.size()); }
  void create_comm(const CommSpec& spec, double timeout_s) override;
  void launch(int stream, const OpCost& op) override;
  void collective(int stream, const CollectiveRequest& req) override;
  EventHandle record(int stream) override;
  void wait(int stream, EventHandle event) override;
  double elapsed_s(EventHandle start, EventHandle end) override;
  void synchronize() override;

  int gpu() const { return gpu_; }
  int sm() const { return sm_; }

 private:
  void use() const;  // makes this device current on the calling thread
  cudaStream_t stream_at(int stream) const;
  // Buffers grow (after a synchronize) to the largest op seen; new memory is filled with values.
  void reserve(const std::array<std::size_t, 3>& bytes);
  void reserve_comm(std::size_t send, std::size_t recv);
  void run_gemm(cudaStream_t s, const GemmPlan& p);
  void run_attention(cudaStream_t s, const OpCost& op);
  void run_stream(cudaStream_t s, const OpCost& op);
  // Waits until `done` is true, polling NCCL's asynchronous errors; past the timeout aborts
  // every communicator and throws naming this rank and the last collective of each.
  void wait_until(const std::function<bool()>& done, const std::string& what);
  void abort_comms();

  int rank_ = 0, gpu_ = 0, sm_ = 0;
  std::string name_;
  BackendOptions opt_;
  CudaOptions cuda_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 32u << 20;  // cuBLASLt's advice for Hopper
  std::array<void*, 3> buf_{};
  std::array<std::size_t, 3> buf_bytes_{};
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::size_t send_bytes_ = 0, recv_bytes_ = 0;
  static constexpr int kScaleStride = 64;  // floats from A's FP8 scale to B's (256 bytes)
  float* scales_ = nullptr;                // FP8 A and B scales (1.0)
  // The decode kernel's block table and context lengths for the last geometry run.
  std::int32_t* table_ = nullptr;
  std::int32_t* lens_ = nullptr;
  std::tuple<std::int64_t, std::int64_t, int> table_key_{};
  int adam_step_ = 0;
  struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulHeuristicResult_t algo{};
  };
  using LtKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, bool, bool>;
  std::map<LtKey, LtPlan> lt_plans_;
  std::map<std::uint32_t, CommState> comms_;
};

}  // namespace ctwin::realrun::cuda
