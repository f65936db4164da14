// realrun's CPU backend for collectives: ranks are threads, buffers are real memory, and the
// algorithm is the one NCCL runs (ring), so the pipeline that will drive NCCL on GPUs runs
// for real, and is tested, on machines without one.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ctwin::realrun {

// Sums `buffers` (one per rank, equal lengths) element-wise in place with a ring
// all-reduce: n-1 reduce-scatter steps then n-1 all-gather steps, one thread per rank.
// Returns the bytes each rank sent, which is 2(n-1)/n of the buffer (the busbw factor).
std::size_t ring_all_reduce(std::vector<std::span<float>> buffers);

}  // namespace ctwin::realrun
