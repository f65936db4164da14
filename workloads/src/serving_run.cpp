#include "workloads/serving_run.hpp"

#include <algorithm>

#include "workloads/kv_cache.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_lora.hpp"

namespace ctwin {

ReplicaOptions replica_options(const ServingDeployment& d, const SchedulerConfig& sched, const KvCapacity& capacity,
                               std::uint64_t seed) {
  ReplicaOptions opt;
  opt.seed = seed;
  const ClusterSpec& c = d.cluster.spec;
  opt.kv_block_bytes = capacity.block_bytes * d.gpus();
  opt.host_link_bytes_per_s = c.gpu.pcie_gbyte_per_s * 1e9 * d.gpus();
  const double nic_per_gpu = c.nic_gbyte_per_s * c.nic_efficiency * c.nics() / c.gpus_per_node;
  opt.remote_kv_bytes_per_s = std::min(nic_per_gpu, c.gpu.pcie_gbyte_per_s) * 1e9 * d.gpus();
  // A LoRA load likewise: each GPU copies its share of the adapter (BF16) at once.
  if (sched.enable_lora) opt.lora_adapter_bytes = lora_adapter_bytes(d.model, sched.lora_adapter_rank, 2);
  opt.request_overhead = seconds(d.overhead.request_overhead_us * 1e-6);
  opt.attention_window = d.model.attention_window;
  return opt;
}

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
  KvOffload offload;  // one replica: its own tier, whatever the scope
  if (run.capacity.num_offload_blocks > 0) offload.tier = make_kv_host_tier(run.capacity.num_offload_blocks);
  const auto kv = make_kv_cache(run.capacity.num_gpu_blocks, sched.block_size, run.capacity.num_cpu_blocks,
                                sched.prefix_caching, offload, kv_window(d));
  const ServingCostModel cost(d);
  ReplicaOptions opt = replica_options(d, sched, run.capacity, seed);
  opt.hooks = hooks;
  run.result = loop == ServingLoop::fast ? simulate_replica(source, *kv, cost, sched, opt)
                                         : simulate_replica_reference(source, *kv, cost, sched, opt);
  if (offload.tier) run.offload = host_tier_stats(*offload.tier);
  return run;
}

}  // namespace ctwin
