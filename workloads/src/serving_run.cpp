#include "workloads/serving_run.hpp"

#include "workloads/kv_cache.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_lora.hpp"

namespace ctwin {

ServingReplicaRun run_serving_replica(const ServingDeployment& d, const SchedulerConfig& sched,
                                      const TrafficSpec& traffic, const ServingHooks& hooks, ServingLoop loop) {
  const auto source = make_traffic(traffic);
  return run_serving_replica(d, sched, *source, traffic.seed, hooks, loop);
}

ServingReplicaRun run_serving_replica(const ServingDeployment& d, const SchedulerConfig& sched, TrafficSource& source,
                                      std::uint64_t seed, const ServingHooks& hooks, ServingLoop loop) {
  ServingReplicaRun run;
  run.capacity = kv_capacity(d, sched);
  if (!run.capacity.refusal.empty()) return run;
  const auto kv =
      make_kv_cache(run.capacity.num_gpu_blocks, sched.block_size, run.capacity.num_cpu_blocks, sched.prefix_caching);
  const ServingCostModel cost(d);
  ReplicaOptions opt;
  opt.seed = seed;
  // A swap moves one block from every GPU of the replica, each over its own PCIe link at once.
  opt.kv_block_bytes = run.capacity.block_bytes * d.gpus();
  opt.host_link_bytes_per_s = d.cluster.spec.gpu.pcie_gbyte_per_s * 1e9 * d.gpus();
  // A LoRA load likewise: each GPU copies its share of the adapter (BF16) at once.
  if (sched.enable_lora) opt.lora_adapter_bytes = lora_adapter_bytes(d.model, sched.lora_adapter_rank, 2);
  opt.hooks = hooks;
  opt.request_overhead = seconds(d.overhead.request_overhead_us * 1e-6);
  run.result = loop == ServingLoop::fast ? simulate_replica(source, *kv, cost, sched, opt)
                                         : simulate_replica_reference(source, *kv, cost, sched, opt);
  return run;
}

}  // namespace ctwin
