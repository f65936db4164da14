// The cluster as a graph of links for the flow-level network, on Boost.Graph (kept inside
// network.cpp). Inside a node: GPUs on an NVSwitch, or on PCIe switches under CPU root complexes
// joined by an inter-socket link, optionally with NVLink bridges (GPU pairs) or an NVLink mesh.
// NICs (one per GPU, or shared) hang off their GPU (NVSwitch nodes) or PCIe switch, and plug into
// the inter-node fabric: one switch, rail-optimised leaves and spines, a plain two-tier fat-tree,
// or a three-tier fat-tree with a core layer; the top tier carries the oversubscription. Every
// physical link is two FlowNetwork links (one per direction). Routes are shortest paths with
// deterministic ECMP: among equal-cost next hops, a hash of (source, destination) picks one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "sim/inplace_function.hpp"
#include "topology/cluster.hpp"

namespace ctwin {

class ClusterNetwork {
 public:
  ClusterNetwork(const Cluster& cluster, FlowNetwork& net);
  ~ClusterNetwork();
  ClusterNetwork(const ClusterNetwork&) = delete;
  ClusterNetwork& operator=(const ClusterNetwork&) = delete;

  // Directed links from GPU a to GPU b along a shortest path.
  std::vector<LinkId> route(GpuId a, GpuId b) const;
  // The path NCCL takes to send from GPU a to GPU b in another node through b's rail (PXN):
  // over the node fabric to a's NIC on b's rail, out through it, in through b's NIC.
  std::vector<LinkId> route_rail(GpuId a, GpuId b) const;
  // a -> NIC `nic` of a's node -> fabric -> NIC `nic` of b's node -> b (a ring channel's crossing).
  std::vector<LinkId> route_via(GpuId a, GpuId b, int nic) const;
  // a -> NIC `nic` of a's node -> the switch it plugs into (SHARP aggregation at the leaf), and back.
  std::vector<LinkId> route_to_leaf(GpuId a, int nic) const;
  std::vector<LinkId> route_from_leaf(GpuId a, int nic) const;
  // The NIC a GPU uses by default (its own, or the one it shares).
  int nic_of(GpuId g) const;
  // "node3.gpu5 -> node3.nvswitch", "node0.nic2 -> pod0.leaf2": a link's two ends, by name.
  std::string link_name(LinkId link) const;
  // Every link's name, sorted (what a degraded link may name).
  std::vector<std::string> link_names() const;
  std::size_t vertex_count() const;
  std::size_t link_count() const;

 private:
  struct Impl;
  void build(FlowNetwork& net);
  std::unique_ptr<Impl> impl_;
};

// How collectives are timed: `analytical` gives each an alpha-beta time from the bottleneck along
// its algorithm's path; `flow` runs its flows on the cluster graph, sharing links max-min fairly
// with every other collective in flight.
enum class Fidelity { analytical, flow };

struct CollectiveCall;
struct CollectiveOptions;

// The analytical fidelity's time for `call`: estimate_collective with the call's SPMD
// neighbours (`groups`) counted from its ranks' placement when the call does not set them.
Time analytical_collective_time(const Cluster& cluster, const CollectiveCall& call, const CollectiveOptions& options);

// Runs collectives on an engine in either fidelity; what the training simulator calls. In flow
// mode every collective started on one runner shares one FlowNetwork, so concurrent collectives
// (TP beside DP, two jobs on one fabric) slow each other as max-min sharing predicts.
class CollectiveRunner {
 public:
  CollectiveRunner(Engine& engine, const Cluster& cluster, Fidelity fidelity);
  CollectiveRunner(Engine& engine, const Cluster& cluster, Fidelity fidelity, const CollectiveOptions& options);
  ~CollectiveRunner();
  CollectiveRunner(const CollectiveRunner&) = delete;
  CollectiveRunner& operator=(const CollectiveRunner&) = delete;

  // Starts the collective now; on_done runs (as an engine event) when it completes.
  void start(const CollectiveCall& call, InplaceFunction<void()> on_done);
  Fidelity fidelity() const;
  // The flow network in flow mode (nullptr in analytical mode), for statistics, and the routes
  // on it (link names).
  const FlowNetwork* flows() const;
  const ClusterNetwork* routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctwin
