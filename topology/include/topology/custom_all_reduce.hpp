// The serving frameworks' own all-reduce for tensor parallelism inside one NVLink node: vLLM's
// custom_all_reduce (csrc/custom_all_reduce.cuh) and TensorRT-LLM's ONESHOT / TWOSHOT kernels,
// which read their peers' buffers through CUDA IPC instead of running NCCL. They take calls up
// to their buffer's size; NCCL takes the rest.
#pragma once

#include <cstdint>

#include "topology/cluster.hpp"
#include "topology/collective.hpp"

namespace ctwin {

enum class CustomAllReduceKernel : std::uint8_t {
  none,      // the call goes to NCCL
  one_shot,  // every rank reads every peer's whole buffer and sums it: (n-1) x S in per GPU
  two_shot,  // reduce-scatter then all-gather through peer reads: 2 (n-1)/n x S in per GPU
};

struct CustomAllReduce {
  // The largest call the kernels take: vLLM's custom_all_reduce max_size, 8 MiB (TRT-LLM's
  // workspace: 8 MB above two ranks, 16 MB at two).
  double max_bytes = 8.0 * 1024 * 1024;
  // Fitted on vLLM's benchmark_device_communicators.py on 4 Hopper GPUs under CUDA graphs
  // (vllm-project/vllm #24532, ca_1stage and ca_2stage at 0.5-4 MiB; docs/validation.md):
  // the one-shot's fixed cost (its two flag barriers), the two-shot's (three), and the share of
  // NCCL's effective NVLink rate the two-shot's strided peer reads reach.
  double one_shot_latency_us = 5.4;
  double two_shot_latency_us = 13.4;
  double two_shot_efficiency = 0.59;
};

// Which kernel vLLM's custom all-reduce runs for `call` (csrc/custom_all_reduce.cuh): none
// unless an all-reduce of at most max_bytes over 2, 4, 6 or 8 ranks of one NVSwitch node;
// one-shot on 2 ranks, on up to 4 below 512 KiB and on up to 8 below 256 KiB; two-shot otherwise.
CustomAllReduceKernel custom_all_reduce_kernel(const Cluster& c, const CollectiveCall& call, const CustomAllReduce& k);

// The call's time on that kernel: its fixed cost plus the bytes each GPU reads from its peers
// at NCCL's effective NVLink rate (intra_gbyte_per_s x intra_efficiency; the two-shot at its
// share of it). Throws std::invalid_argument for CustomAllReduceKernel::none.
double custom_all_reduce_s(const Cluster& c, const CollectiveCall& call, const CustomAllReduce& k,
                           CustomAllReduceKernel kernel);

}  // namespace ctwin
