// Flow fidelity for collectives: NCCL pipelines chunks along each ring or tree channel, so in
// steady state every link of every channel is busy at once. A collective becomes, per channel,
// one flow per ring edge (or tree edge, each way) carrying that edge's share of the bytes divided
// by the protocol's efficiency, all started together after the plan's latency (NCCL's base and
// per-step latencies). Max-min sharing with everything else on the network decides their rates,
// so congestion shows; on an idle cluster this equals estimate_collective's time.
#pragma once

#include <functional>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "topology/collective.hpp"
#include "topology/network.hpp"

namespace ctwin {

class CollectiveFlows {
 public:
  CollectiveFlows(Engine& engine, FlowNetwork& net, const ClusterNetwork& routes, const Cluster& cluster,
                  CollectiveOptions options = {})
      : engine_(engine), net_(net), routes_(routes), cluster_(cluster), options_(options) {}

  // Starts the collective now; on_done runs when its last flow lands.
  void start(const CollectiveCall& call, std::function<void()> on_done);

 private:
  [[maybe_unused]] Engine& engine_;  // flows schedule through net_; kept for callers that pass it
  FlowNetwork& net_;
  const ClusterNetwork& routes_;
  const Cluster& cluster_;
  CollectiveOptions options_;
};

}  // namespace ctwin
