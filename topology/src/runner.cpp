#include <algorithm>
#include <memory>
#include <vector>

#include "topology/collective.hpp"
#include "topology/collective_flow.hpp"
#include "topology/network.hpp"

namespace ctwin {

struct CollectiveRunner::Impl {
  Engine& engine;
  const Cluster& cluster;
  Fidelity fidelity;
  CollectiveOptions options;
  std::unique_ptr<FlowNetwork> net;
  std::unique_ptr<ClusterNetwork> routes;
  std::unique_ptr<CollectiveFlows> flows;
  // Completion callbacks by slot: events and flow callbacks capture (this, slot) only.
  std::vector<InplaceFunction<void()>> pending;
  std::vector<std::uint32_t> free_slots;

  Impl(Engine& e, const Cluster& c, Fidelity f, const CollectiveOptions& o)
      : engine(e), cluster(c), fidelity(f), options(o) {}

  std::uint32_t park(InplaceFunction<void()> fn) {
    if (free_slots.empty()) {
      pending.push_back(std::move(fn));
      return static_cast<std::uint32_t>(pending.size() - 1);
    }
    const std::uint32_t s = free_slots.back();
    free_slots.pop_back();
    pending[s] = std::move(fn);
    return s;
  }
  void fire(std::uint32_t s) {
    InplaceFunction<void()> fn = std::move(pending[s]);
    free_slots.push_back(s);
    if (fn) fn();
  }
};

Time analytical_collective_time(const Cluster& cluster, const CollectiveCall& call, const CollectiveOptions& options) {
  // A training step is SPMD: a collective over some GPUs of its nodes runs beside identical
  // ones over the other GPUs of the same nodes (the other data-parallel groups), sharing the
  // fabric's uplinks, as the flow fidelity sees. The shared NICs and NVLink are charged per call.
  if (call.groups > 1 || call.ranks.empty()) return estimate_collective(cluster, call, options).time;
  CollectiveCall spmd = call;
  std::vector<int> per_node(static_cast<std::size_t>(cluster.spec.nodes), 0);
  int local = 0;
  for (GpuId g : call.ranks) local = std::max(local, ++per_node[static_cast<std::size_t>(cluster.node_of(g))]);
  spmd.groups = std::max(1, cluster.spec.gpus_per_node / local);
  return estimate_collective(cluster, spmd, options).time;
}

CollectiveRunner::CollectiveRunner(Engine& engine, const Cluster& cluster, Fidelity fidelity)
    : CollectiveRunner(engine, cluster, fidelity, CollectiveOptions{}) {}

CollectiveRunner::CollectiveRunner(Engine& engine, const Cluster& cluster, Fidelity fidelity,
                                   const CollectiveOptions& options)
    : impl_(std::make_unique<Impl>(engine, cluster, fidelity, options)) {
  if (fidelity == Fidelity::flow) {
    impl_->net = std::make_unique<FlowNetwork>(engine);
    impl_->routes = std::make_unique<ClusterNetwork>(cluster, *impl_->net);
    impl_->flows = std::make_unique<CollectiveFlows>(engine, *impl_->net, *impl_->routes, cluster, options);
  }
}

CollectiveRunner::~CollectiveRunner() = default;

void CollectiveRunner::start(const CollectiveCall& call, InplaceFunction<void()> on_done) {
  Impl* m = impl_.get();
  const std::uint32_t slot = m->park(std::move(on_done));
  if (m->fidelity == Fidelity::analytical) {
    m->engine.schedule_in(analytical_collective_time(m->cluster, call, m->options), [m, slot] { m->fire(slot); });
    return;
  }
  m->flows->start(call, [m, slot] { m->fire(slot); });
}

Fidelity CollectiveRunner::fidelity() const { return impl_->fidelity; }
const FlowNetwork* CollectiveRunner::flows() const { return impl_->net.get(); }
const ClusterNetwork* CollectiveRunner::routes() const { return impl_->routes.get(); }

}  // namespace ctwin
