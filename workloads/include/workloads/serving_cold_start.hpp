// How long a new serving replica takes before it serves: a cold start loads the model from
// storage, a warm start takes a pre-started replica from a warm pool.
//
//   cold start = container_start_s + replica weight bytes / min(storage, network) + engine_init_s
//
// container_start_s: the pod scheduled onto a node that has the image, the container and the
// Python process up, the engine's imports and tokenizer (CPU-bound; Breaking the Ice, arXiv
// 2606.07362, finds vLLM's start-up dominated by such steps). engine_init_s: torch.compile and
// CUDA graph capture, the KV-cache profile run (vLLM's design doc on torch.compile logs 15 s from
// Dynamo's first trace to the saved graph for Llama-3.2-1B, uncached). The weights cross the
// slower of the storage read and, for weights on network storage, the replica's NICs.
// A warm start is a fixed, shorter time: the replica was started ahead of need and only joins
// the router (or wakes from sleep, vLLM's /sleep and /wake_up).
#pragma once

#include <vector>

#include "sim/time.hpp"
#include "workloads/serving_deploy_params.hpp"

namespace ctwin {

struct ColdStartSpec {
  double container_start_s = 20;     // assumption (see above); scenario key container_start_s
  double storage_bytes_per_s = 2e9;  // a model cache on NVMe or a fast network volume
  double network_bytes_per_s = 0;    // the replica's NICs for network storage; 0: local, no limit
  double engine_init_s = 20;         // torch.compile + CUDA graphs + profile run (assumption)
  double warm_start_s = 5;           // a pre-started replica joining the router (assumption)
};

// Weight bytes a replica loads: every GPU's shard (serving_weight_bytes) over its TP ranks and
// pipeline stages.
double replica_weight_bytes(const ServingDeployment& d);

// The bandwidth the weights load at: min(storage, network), network 0 meaning no limit.
double weight_load_bytes_per_s(const ColdStartSpec& s);

// Seconds from the decision to start a replica until it serves, from nothing.
double cold_start_s(const ColdStartSpec& s, double weight_bytes);

// A pool of `size` replicas started ahead of need, all ready at time 0. Taking one costs the warm
// start; its slot refills with a fresh replica started the moment it leaves, ready a cold start
// later. A scale-down does not return replicas to the pool.
class WarmPool {
 public:
  WarmPool(int size, double cold_start_s, double warm_start_s);

  // A replica is wanted at `now`: when it serves. From the slot ready first, if that beats a cold
  // start (a slot still refilling is waited for), else a cold start that leaves the pool as it is.
  Time start(Time now);
  // Slots with a replica ready at `now`.
  int ready(Time now) const;
  int size() const { return static_cast<int>(ready_at_.size()); }

 private:
  Time cold_;
  Time warm_;
  std::vector<Time> ready_at_;
};

}  // namespace ctwin
