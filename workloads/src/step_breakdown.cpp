#include "workloads/step_breakdown.hpp"

#include <algorithm>
#include <array>

namespace ctwin {

std::vector<std::vector<std::uint32_t>> ops_by_gpu(const StepProgram& p) {
  std::vector<std::size_t> count(p.gpus.size(), 0);
  for (const StepOp& op : p.ops) ++count[op.gpu];
  std::vector<std::vector<std::uint32_t>> out(p.gpus.size());
  for (std::size_t g = 0; g < out.size(); ++g) out[g].reserve(count[g]);
  for (std::uint32_t t = 0; t < p.ops.size(); ++t) out[p.ops[t].gpu].push_back(t);
  return out;
}

StepBreakdown to_seconds(const StepBreakdownPs& ps) {
  auto s = [](std::int64_t x) { return static_cast<double>(x) * 1e-12; };
  StepBreakdown bd;
  bd.compute_s = s(ps[0]);
  bd.optimizer_s = s(ps[1]);
  bd.exposed_tp_s = s(ps[2]);
  bd.exposed_cp_s = s(ps[3]);
  bd.exposed_ep_s = s(ps[4]);
  bd.exposed_dp_s = s(ps[5]);
  bd.exposed_pp_s = s(ps[6]);
  bd.bubble_s = s(ps[7]);
  bd.other_s = s(ps[8]);
  bd.exposed_offload_s = s(ps[9]);
  return bd;
}

StepBreakdownPs step_breakdown_ps(const StepProgram& p, std::span<const std::uint32_t> gpu_ops,
                                  const StreamExecutor& exec, bool pipelined) {
  // Sweep the boundaries of the GPU's tasks. Priority: the compute stream's state first; when
  // it idles, a running DP or PP transfer.
  const std::int64_t end = exec.makespan().ps;
  struct Edge {
    std::int64_t t;
    int what;  // index into counters
    int delta;
  };
  enum { kCompute, kOpt, kTp, kCp, kEp, kWait, kDp, kPp, kOffload, kN };
  std::vector<Edge> edges;
  for (std::uint32_t t : gpu_ops) {
    const auto& mt = p.ops[t];
    const auto& tm = exec.timing(TaskId(t));
    int what = kCompute;
    switch (mt.cls) {
      case OpClass::compute:
        what = kCompute;
        break;
      case OpClass::optimizer:
        what = kOpt;
        break;
      case OpClass::comm_tp:
        what = kTp;
        break;
      case OpClass::comm_cp:
        what = kCp;
        break;
      case OpClass::comm_ep:
        what = kEp;
        break;
      case OpClass::comm_dp:
        what = kDp;
        break;
      case OpClass::comm_pp:
        what = kPp;
        break;
      case OpClass::offload:
        what = kOffload;
        break;
    }
    if (mt.stream == StepStream::compute && tm.start > tm.ready) {
      edges.push_back({tm.ready.ps, kWait, +1});
      edges.push_back({tm.start.ps, kWait, -1});
    }
    if (tm.end > tm.start) {
      edges.push_back({tm.start.ps, what, +1});
      edges.push_back({tm.end.ps, what, -1});
    }
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& x) { return a.t < x.t; });
  std::array<int, kN> active{};
  std::array<std::int64_t, kN + 1> acc{};  // last slot: idle
  std::int64_t prev = 0;
  auto charge = [&](std::int64_t until) {
    if (until <= prev) return;
    int slot = kN;
    // Offload copies before the optimizer: with the delayed parameter update the CPU step runs
    // beside a GPU waiting for its parameters, and it is the copies it waits for.
    for (int k : {kCompute, kOffload, kOpt, kTp, kCp, kEp, kWait, kDp, kPp}) {
      if (active[k] > 0) {
        slot = k;
        break;
      }
    }
    acc[slot] += until - prev;
    prev = until;
  };
  for (const auto& e : edges) {
    charge(e.t);
    active[e.what] += e.delta;
  }
  charge(end);
  // Idle time with nothing to wait for is the pipeline's fill and drain when there is one.
  return {acc[kCompute],
          acc[kOpt],
          acc[kTp],
          acc[kCp],
          acc[kEp],
          acc[kDp],
          acc[kPp],
          pipelined ? acc[kN] : 0,
          pipelined ? acc[kWait] : acc[kN] + acc[kWait],
          acc[kOffload]};
}

}  // namespace ctwin
