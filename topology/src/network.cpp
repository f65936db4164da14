#include "topology/network.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>

namespace ctwin {

namespace {
struct EdgeProps {
  LinkId link;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, EdgeProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
}  // namespace

struct ClusterNetwork::Impl {
  const Cluster& cl;
  Graph g;
  int gpus = 0;
  std::size_t edges = 0;
  Vertex gpu_v(int gpu) const { return static_cast<Vertex>(gpu); }
  // Hop distances to each destination vertex, computed once per destination.
  mutable std::unordered_map<Vertex, std::vector<int>> dist_to;

  explicit Impl(const Cluster& c) : cl(c) {}

  const std::vector<int>& distances(Vertex dst) const {
    auto it = dist_to.find(dst);
    if (it != dist_to.end()) return it->second;
    // Links are symmetric, so distances from dst equal distances to dst.
    std::vector<int> d(boost::num_vertices(g), -1);
    std::deque<Vertex> q{dst};
    d[dst] = 0;
    while (!q.empty()) {
      const Vertex v = q.front();
      q.pop_front();
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const Vertex w = boost::target(*e, g);
        if (d[w] < 0) {
          d[w] = d[v] + 1;
          q.push_back(w);
        }
      }
    }
    return dist_to.emplace(dst, std::move(d)).first->second;
  }

  std::vector<LinkId> path(Vertex a, Vertex b) const {
    std::vector<LinkId> links;
    const auto& d = distances(b);
    if (d[a] < 0) throw std::logic_error("ClusterNetwork: no route");
    // Deterministic ECMP: a hash of the endpoints picks among equal-cost next hops.
    std::uint64_t h = (static_cast<std::uint64_t>(a) * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull);
    Vertex v = a;
    while (v != b) {
      std::vector<std::pair<Vertex, LinkId>> next;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const Vertex w = boost::target(*e, g);
        if (d[w] == d[v] - 1) next.emplace_back(w, g[*e].link);
      }
      const auto& pick = next[h % next.size()];
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      links.push_back(pick.second);
      v = pick.first;
    }
    return links;
  }
};

ClusterNetwork::ClusterNetwork(const Cluster& cluster, FlowNetwork& net) : impl_(std::make_unique<Impl>(cluster)) {
  const ClusterSpec& s = cluster.spec;
  Impl& m = *impl_;
  m.gpus = cluster.gpu_count();
  const int gpn = s.gpus_per_node;
  // Vertices: GPUs first (vertex id = GPU id), then per node a switch, then NICs, leaves, spines.
  const Vertex first_switch = static_cast<Vertex>(m.gpus);
  const Vertex first_nic = first_switch + static_cast<Vertex>(s.nodes);
  const int pods = (s.nodes + s.nodes_per_pod - 1) / s.nodes_per_pod;
  const Vertex first_leaf = first_nic + static_cast<Vertex>(m.gpus);
  const Vertex first_spine = first_leaf + static_cast<Vertex>(pods * gpn);
  const int spines = s.nodes > 1 ? std::max(1, s.spines) : 0;
  // Vertices added in place: assigning a whole adjacency_list trips GCC 12's -Wmaybe-uninitialized.
  for (Vertex v = 0; v < first_spine + static_cast<Vertex>(spines); ++v) boost::add_vertex(m.g);
  auto both = [&](Vertex a, Vertex b, double gbps) {
    boost::add_edge(a, b, EdgeProps{net.add_link(gbps * 1e9)}, m.g);
    boost::add_edge(b, a, EdgeProps{net.add_link(gbps * 1e9)}, m.g);
    m.edges += 2;
  };
  const double pcie = s.gpu.pcie_gbps > 0 ? s.gpu.pcie_gbps : 32;
  for (int gpu = 0; gpu < m.gpus; ++gpu) {
    const int node = gpu / gpn, local = gpu % gpn;
    // The node fabric at the rate NCCL's protocol actually moves over it.
    both(static_cast<Vertex>(gpu), first_switch + static_cast<Vertex>(node), s.intra_gbps * s.intra_efficiency);
    if (s.nodes > 1) {
      const Vertex nic = first_nic + static_cast<Vertex>(gpu);
      both(static_cast<Vertex>(gpu), nic, pcie);
      const int pod = node / s.nodes_per_pod;
      both(nic, first_leaf + static_cast<Vertex>(pod * gpn + local), s.nic_gbps);
    }
  }
  // Each leaf's uplink capacity: its nodes' NIC bandwidth over the oversubscription, split over spines.
  for (int pod = 0; pod < pods && spines > 0; ++pod) {
    const int nodes_here = std::min(s.nodes_per_pod, s.nodes - pod * s.nodes_per_pod);
    const double up = nodes_here * s.nic_gbps / std::max(1.0, s.oversubscription) / spines;
    for (int r = 0; r < gpn; ++r) {
      for (int sp = 0; sp < spines; ++sp) {
        both(first_leaf + static_cast<Vertex>(pod * gpn + r), first_spine + static_cast<Vertex>(sp), up);
      }
    }
  }
}

ClusterNetwork::~ClusterNetwork() = default;

std::vector<LinkId> ClusterNetwork::route(GpuId a, GpuId b) const {
  return impl_->path(static_cast<Vertex>(a.value), static_cast<Vertex>(b.value));
}

std::vector<LinkId> ClusterNetwork::route_rail(GpuId a, GpuId b) const {
  const int gpn = impl_->cl.spec.gpus_per_node;
  const int node_a = static_cast<int>(a.value) / gpn;
  if (node_a == static_cast<int>(b.value) / gpn) return route(a, b);
  const GpuId proxy(static_cast<std::uint32_t>(node_a * gpn + static_cast<int>(b.value) % gpn));
  std::vector<LinkId> p = proxy == a ? std::vector<LinkId>{} : route(a, proxy);
  const auto rest = route(proxy, b);
  p.insert(p.end(), rest.begin(), rest.end());
  return p;
}

std::size_t ClusterNetwork::vertex_count() const { return boost::num_vertices(impl_->g); }
// Counted as built: boost::num_edges walks edge iterators that GCC 12 flags at -O3.
std::size_t ClusterNetwork::link_count() const { return impl_->edges; }

}  // namespace ctwin
