// Where a simulated GPU's step went: compute, the optimizer, exposed communication per group,
// the pipeline bubble and the rest, from a run's task timings.
#pragma once

#include <array>
#include <cstdint>

#include <cstdint>
#include <span>
#include <vector>

#include "sim/streams.hpp"
#include "workloads/step_program.hpp"

namespace ctwin {

// Where one GPU's step went; the parts are disjoint and add up to the step time.
struct StepBreakdown {
  double compute_s = 0;     // kernels of forward, backward (and recomputation)
  double optimizer_s = 0;   // the optimizer step
  double exposed_tp_s = 0;  // tensor-parallel collectives on the critical path
  double exposed_cp_s = 0;
  double exposed_ep_s = 0;
  double exposed_dp_s = 0;       // gradient reduction / parameter gathering not hidden by compute
  double exposed_pp_s = 0;       // pipeline transfers not hidden
  double bubble_s = 0;           // pipeline fill and drain
  double other_s = 0;            // waiting on peers, anything else (never the optimizer)
  double exposed_offload_s = 0;  // host<->device PCIe copies of offloading not hidden by compute
  double exposed_comm_s() const {
    return exposed_tp_s + exposed_cp_s + exposed_ep_s + exposed_dp_s + exposed_pp_s + exposed_offload_s;
  }
};

// Each simulated GPU's ops, in program order.
std::vector<std::vector<std::uint32_t>> ops_by_gpu(const StepProgram& p);

// The breakdown's parts in whole picoseconds, in StepBreakdown's field order (compute, optimizer,
// exposed TP, CP, EP, DP, PP, bubble, other, exposed offload): what folding micro-batches extends exactly.
using StepBreakdownPs = std::array<std::int64_t, 10>;
// Each part converted once: static_cast<double>(ps) * 1e-12.
StepBreakdown to_seconds(const StepBreakdownPs& ps);

// The breakdown of one GPU (its ops: `gpu_ops`) over [0, end of the run). Idle time is the
// bubble when `pipelined`, else part of other_s.
StepBreakdownPs step_breakdown_ps(const StepProgram& p, std::span<const std::uint32_t> gpu_ops,
                                  const StreamExecutor& exec, bool pipelined);
inline StepBreakdown step_breakdown(const StepProgram& p, std::span<const std::uint32_t> gpu_ops,
                                    const StreamExecutor& exec, bool pipelined) {
  return to_seconds(step_breakdown_ps(p, gpu_ops, exec, pipelined));
}

}  // namespace ctwin
