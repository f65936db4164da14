// Flow-level network speed: collectives at flow fidelity on DGX H100 clusters. The baseline
// is the same flow solver resharing at every single flow change instead of once per instant.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "bench.hpp"
#include "bench_clusters.hpp"
#include "topology/collective_flow.hpp"

namespace ctwin {
namespace {

ClusterSpec h100(int nodes) { return bench_dgx_h100(nodes); }

struct Outcome {
  double wall_s = 0;
  double simulated_s = 0;
  std::uint64_t flows = 0;
};

Outcome run(const ClusterSpec& spec, CollectiveOp op, double bytes, bool batch) {
  const auto t0 = std::chrono::steady_clock::now();
  Engine e;
  FlowNetwork net(e, batch);
  const Cluster cl = build_cluster(spec);
  ClusterNetwork routes(cl, net);
  CollectiveFlows coll(e, net, routes, cl);
  CollectiveCall call;
  call.op = op;
  for (int i = 0; i < cl.gpu_count(); ++i) call.ranks.emplace_back(i);
  call.bytes = bytes;
  Outcome o;
  coll.start(call, [&] { o.simulated_s = e.now().seconds(); });
  e.run();
  o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.flows = net.flows_reshared();
  return o;
}

}  // namespace

nlohmann::ordered_json bench_network(const BenchOptions& o) {
  nlohmann::ordered_json j;
  const int big = o.quick ? 16 : 128;  // nodes: 1,024 GPUs
  const auto ring = run(h100(big), CollectiveOp::all_reduce, 1024.0 * 1024 * 1024, true);
  j["ring_all_reduce_gpus"] = big * 8;
  j["ring_all_reduce_1gib_wall_s"] = ring.wall_s;
  j["ring_all_reduce_1gib_simulated_s"] = ring.simulated_s;
  // All-to-all among 1,024 GPUs (1,047,552 flows) at flow fidelity.
  const int a2a_nodes = o.quick ? 4 : 128;
  const auto a2a = run(h100(a2a_nodes), CollectiveOp::all_to_all, 256.0 * 1024 * 1024, true);
  const double flows = a2a_nodes * 8.0 * (a2a_nodes * 8 - 1);
  j["all_to_all_gpus"] = a2a_nodes * 8;
  j["all_to_all_flows"] = flows;
  j["all_to_all_wall_s"] = a2a.wall_s;
  j["all_to_all_flows_per_s"] = flows / a2a.wall_s;
  // Against the baseline (a reshare per flow change) on 32 GPUs, where the baseline still ends.
  const auto small = run(h100(4), CollectiveOp::all_to_all, 256.0 * 1024 * 1024, true);
  const auto naive = run(h100(4), CollectiveOp::all_to_all, 256.0 * 1024 * 1024, false);
  j["compare_gpus"] = 32;
  j["compare_wall_s"] = small.wall_s;
  j["baseline_wall_s"] = naive.wall_s;
  j["ratio"] = naive.wall_s / small.wall_s;
  j["same_simulated_time"] = std::abs(small.simulated_s - naive.simulated_s) <= 1e-9 * small.simulated_s;
  return j;
}

}  // namespace ctwin
