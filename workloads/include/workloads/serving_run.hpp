// One serving replica from its parts: the KV cache sized as vLLM sizes it, the traffic, the
// iteration cost model and the scheduler, run by simulate_replica. `ctwin run`, `ctwin bench
// serving`, `ctwin validate` and (later) sweeps and fleets all run a replica through here.
#pragma once

#include <string>

#include "workloads/kv_cache.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_memory.hpp"
#include "workloads/serving_sim.hpp"
#include "workloads/serving_traffic.hpp"

namespace ctwin {

struct ServingReplicaRun {
  KvCapacity capacity;      // capacity.refusal says why nothing ran (the weights do not fit)
  ServingResult result;     // empty when refused
  KvHostTierStats offload;  // its host tier of KV (all zero without one)
};

// What a replica's links and sizes give its simulation: a swap or a load from the host tier
// moves one block from every GPU of the replica, each over its own PCIe link at once; a page
// another replica stored in a pooled host tier comes over each GPU's share of the node's NICs
// (at the NIC efficiency, RDMA into GPU memory), at most its PCIe rate.
ReplicaOptions replica_options(const ServingDeployment& d, const SchedulerConfig& sched, const KvCapacity& capacity,
                               std::uint64_t seed);

enum class ServingLoop : std::uint8_t { fast, reference };

// Sizes the KV cache, builds the cost model and the traffic, and simulates. Returns without
// simulating when the replica cannot hold its weights and activations (capacity.refusal).
ServingReplicaRun run_serving_replica(const ServingDeployment& d, const SchedulerConfig& sched,
                                      const TrafficSpec& traffic, const ServingHooks& hooks = {},
                                      ServingLoop loop = ServingLoop::fast);
// The same replica fed by a given source (a share of a fleet's stream); seed keys its own draws.
ServingReplicaRun run_serving_replica(const ServingDeployment& d, const SchedulerConfig& sched, TrafficSource& source,
                                      std::uint64_t seed, const ServingHooks& hooks = {},
                                      ServingLoop loop = ServingLoop::fast);

}  // namespace ctwin
