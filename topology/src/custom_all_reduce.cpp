#include "topology/custom_all_reduce.hpp"

#include <stdexcept>

namespace ctwin {

CustomAllReduceKernel custom_all_reduce_kernel(const Cluster& c, const CollectiveCall& call, const CustomAllReduce& k) {
  const int n = static_cast<int>(call.ranks.size());
  // custom_all_reduce.py: world sizes 2, 4, 6, 8, every pair of GPUs on NVLink (full_nvlink).
  if (call.op != CollectiveOp::all_reduce || n < 2 || n > 8 || n % 2 != 0) return CustomAllReduceKernel::none;
  if (c.spec.intra != IntraNodeFabric::nvswitch || call.bytes > k.max_bytes) return CustomAllReduceKernel::none;
  const int node = c.node_of(call.ranks.front());
  for (GpuId g : call.ranks) {
    if (c.node_of(g) != node) return CustomAllReduceKernel::none;
  }
  const double S = call.bytes;
  if (n == 2 || (n <= 4 && S < 512 * 1024) || S < 256 * 1024) return CustomAllReduceKernel::one_shot;
  return CustomAllReduceKernel::two_shot;
}

double custom_all_reduce_s(const Cluster& c, const CollectiveCall& call, const CustomAllReduce& k,
                           CustomAllReduceKernel kernel) {
  const double n = static_cast<double>(call.ranks.size());
  const double rate = c.spec.intra_effective_gbyte_per_s() * 1e9;
  switch (kernel) {
    case CustomAllReduceKernel::one_shot:
      return k.one_shot_latency_us * 1e-6 + (n - 1) * call.bytes / rate;
    case CustomAllReduceKernel::two_shot:
      return k.two_shot_latency_us * 1e-6 + 2 * (n - 1) / n * call.bytes / (k.two_shot_efficiency * rate);
    case CustomAllReduceKernel::none:
      break;
  }
  throw std::invalid_argument("custom_all_reduce_s: the call does not run on a custom all-reduce kernel");
}

}  // namespace ctwin
