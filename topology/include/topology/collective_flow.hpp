// Flow fidelity for collectives: NCCL pipelines chunks around each ring, so in steady state
// every link of every ring channel is busy at once. A ring collective becomes, per channel,
// one flow per ring edge carrying that edge's share of the bytes, all started together after
// the algorithm's step latencies; max-min sharing with everything else on the network decides
// their rates, so congestion shows. On an uncongested cluster this equals the analytical
// alpha-beta time of estimate_collective.
#pragma once

#include <functional>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "topology/collective.hpp"
#include "topology/network.hpp"

namespace ctwin {

class CollectiveFlows {
 public:
  CollectiveFlows(Engine& engine, FlowNetwork& net, const ClusterNetwork& routes, const Cluster& cluster)
      : engine_(engine), net_(net), routes_(routes), cluster_(cluster) {}

  // Starts the collective now; on_done runs when its last flow lands.
  void start(const CollectiveCall& call, std::function<void()> on_done);

 private:
  Engine& engine_;
  FlowNetwork& net_;
  const ClusterNetwork& routes_;
  const Cluster& cluster_;
};

}  // namespace ctwin
