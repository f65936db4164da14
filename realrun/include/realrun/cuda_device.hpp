// realrun's CUDA backend (realrun/cuda/): the Device seam over CUDA streams and events,
// cuBLASLt GEMMs, our attention and streaming kernels, and NCCL communicators. Built only with
// the CUDA Toolkit (ctwin_realrun_cuda); this header needs no CUDA headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realrun/device.hpp"
#include "realrun/discovery.hpp"

namespace ctwin::realrun {

struct CudaOptions {
  Dtype step_dtype = Dtype::bf16;  // the dtype of ops that carry none (OpCost::dtype unset)
  int kv_block_size = 16;          // paged-KV block of the decode kernel (vLLM's default)
  int head_dim = 128;              // attention kernels' head width (64 or 128)
  bool simple_attention = false;   // prefill on the one-warp-a-query kernel, not the tensor cores
  bool mma_attention = true;       // prefill on the mma.sync kernel (false: the WMMA one)
  // Under mpirun/srun: this process's global rank, the job's size, and the GPU it drives
  // (its node-local rank); world_size 0 means one process over every visible GPU.
  int world_rank = 0, world_size = 0, local_gpu = 0;
};

// GPUs the CUDA runtime sees; 0 without a driver or a GPU (never throws).
int cuda_device_count();

// One Device per visible GPU in this process (opt.ranks of them, at most what is visible), or,
// under MPI (cuda.world_size > 0), the one GPU of this rank. Throws std::runtime_error naming
// the GPU and the CUDA error when a device cannot be set up.
std::vector<std::unique_ptr<Device>> make_cuda_devices(const BackendOptions& opt, const CudaOptions& cuda = {});

// This node's GPUs (NVML where libnvidia-ml is present, else the CUDA runtime), peer access
// between them, and its InfiniBand NICs.
DiscoveredNode discover_node();

// {"cuda": runtime, "cuda_driver": ..., "cublas": ..., "nccl": ..., "mpi": ...} as the
// measurements file's host.versions.
nlohmann::json cuda_versions();

}  // namespace ctwin::realrun
