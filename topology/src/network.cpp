#include "topology/network.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>

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
  std::size_t edges = 0;
  std::vector<Vertex> nic;   // node * nics + r
  std::vector<Vertex> host;  // what each NIC plugs into (its GPU, or its PCIe switch), same index
  std::vector<Vertex> leaf;  // the switch each NIC plugs into, same index
  // Hop distances to each destination vertex, computed once per destination.
  mutable std::unordered_map<Vertex, std::vector<int>> dist_to;

  explicit Impl(const Cluster& c) : cl(c) {}

  // What each vertex is, for link names (formatted only when asked: a flow run builds the graph
  // once per step), and each link's two ends by link id from first_link on.
  enum class Kind : std::uint8_t { gpu, nvswitch, cpu, pcie_switch, nic, single_switch, spine, core, leaf };
  struct Tag {
    Kind kind;
    int outer, inner;  // node (pod for a leaf) and index within it
  };
  std::vector<Tag> tags;
  std::uint32_t first_link = 0;
  std::vector<std::pair<Vertex, Vertex>> ends;

  Vertex add(Kind kind, int outer = 0, int inner = 0) {
    tags.push_back({kind, outer, inner});
    return boost::add_vertex(g);
  }

  std::string name(Vertex v) const {
    const Tag& t = tags[v];
    const std::string node = "node" + std::to_string(t.outer);
    switch (t.kind) {
      case Kind::gpu:
        return node + ".gpu" + std::to_string(t.inner);
      case Kind::nvswitch:
        return node + ".nvswitch";
      case Kind::cpu:
        return node + ".cpu" + std::to_string(t.inner);
      case Kind::pcie_switch:
        return node + ".pcie_switch" + std::to_string(t.inner);
      case Kind::nic:
        return node + ".nic" + std::to_string(t.inner);
      case Kind::single_switch:
        return "switch";
      case Kind::spine:
        return "spine" + std::to_string(t.inner);
      case Kind::core:
        return "core" + std::to_string(t.inner);
      case Kind::leaf:
        return "pod" + std::to_string(t.outer) + ".leaf" + std::to_string(t.inner);
    }
    return "?";
  }
  // The link's name, or empty for a link this graph did not add.
  std::string link_name(LinkId link) const {
    if (link.value < first_link || link.value - first_link >= ends.size()) return {};
    const auto& [a, b] = ends[link.value - first_link];
    return name(a) + " -> " + name(b);
  }

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

  // The link of the edge a -> b.
  void hop(Vertex a, Vertex b, std::vector<LinkId>& links) const {
    const auto [e, found] = boost::edge(a, b, g);
    if (!found) throw std::logic_error("ClusterNetwork: no link");
    links.push_back(g[e].link);
  }

  // GPU a to NIC i of its own node through the node's fabric and the NIC's host link. A plain
  // shortest path may tie with one out through another NIC of the node and back down from the
  // switch they share (a single switch or a fat-tree leaf), loading that NIC twice.
  void to_nic(Vertex a, std::size_t i, std::vector<LinkId>& links) const {
    path(a, host[i], links);
    hop(host[i], nic[i], links);
  }
  void from_nic(std::size_t i, Vertex b, std::vector<LinkId>& links) const {
    hop(nic[i], host[i], links);
    path(host[i], b, links);
  }

  void path(Vertex a, Vertex b, std::vector<LinkId>& links) const {
    const auto& d = distances(b);
    if (d[a] < 0) throw std::logic_error("ClusterNetwork: no route");
    // Deterministic ECMP: a hash of the endpoints picks among equal-cost next hops.
    std::uint64_t h = (static_cast<std::uint64_t>(a) * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull);
    Vertex v = a;
    std::vector<std::pair<Vertex, LinkId>> next;
    while (v != b) {
      next.clear();
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const Vertex w = boost::target(*e, g);
        if (d[w] == d[v] - 1) next.emplace_back(w, g[*e].link);
      }
      h ^= h >> 29;
      const auto& pick = next[h % next.size()];
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      links.push_back(pick.second);
      v = pick.first;
    }
  }
};

ClusterNetwork::ClusterNetwork(const Cluster& cluster, FlowNetwork& net) : impl_(std::make_unique<Impl>(cluster)) {
  build(net);
  // Degraded links (ClusterSpec::degraded_links) by name, after the graph is whole.
  for (const DegradedLink& d : cluster.spec.degraded_links) {
    bool found = false;
    for (std::size_t i = 0; i < impl_->ends.size() && !found; ++i) {
      const LinkId id(impl_->first_link + static_cast<std::uint32_t>(i));
      if (impl_->link_name(id) != d.link) continue;
      net.set_capacity(id, net.link_capacity(id) * d.bandwidth_fraction);
      found = true;
    }
    if (!found) throw std::invalid_argument("ClusterNetwork: no link named \"" + d.link + "\"");
  }
}

std::vector<std::string> ClusterNetwork::link_names() const {
  std::vector<std::string> out;
  out.reserve(impl_->ends.size());
  for (std::size_t i = 0; i < impl_->ends.size(); ++i)
    out.push_back(impl_->link_name(LinkId(impl_->first_link + static_cast<std::uint32_t>(i))));
  std::sort(out.begin(), out.end());
  return out;
}

void ClusterNetwork::build(FlowNetwork& net) {
  const Cluster& cluster = impl_->cl;
  const ClusterSpec& s = cluster.spec;
  Impl& m = *impl_;
  const int gpus = cluster.gpu_count(), gpn = s.gpus_per_node, k = std::min(s.nics(), gpn);
  // GPUs first, so a GPU's vertex is its id.
  for (int i = 0; i < gpus; ++i) m.add(Impl::Kind::gpu, i / gpn, i % gpn);
  auto both = [&](Vertex a, Vertex b, double gbps) {
    const LinkId ab = net.add_link(gbps * 1e9), ba = net.add_link(gbps * 1e9);
    boost::add_edge(a, b, EdgeProps{ab}, m.g);
    boost::add_edge(b, a, EdgeProps{ba}, m.g);
    if (m.ends.empty()) m.first_link = ab.value;  // this graph's links are consecutive ids
    m.ends.emplace_back(a, b);
    m.ends.emplace_back(b, a);
    m.edges += 2;
  };
  const double pcie = s.gpu.pcie_gbyte_per_s > 0 ? s.gpu.pcie_gbyte_per_s : 32;
  const double eff = s.intra_eff();
  const bool multi = s.nodes > 1;
  const int sockets = std::max(1, std::min(s.sockets, gpn));
  const int per_switch = std::max(1, s.gpus_per_pcie_switch);
  const int switches = (gpn + per_switch - 1) / per_switch;
  for (int node = 0; node < s.nodes; ++node) {
    const auto gpu_v = [&](int local) { return static_cast<Vertex>(node * gpn + local); };
    std::vector<Vertex> nic_attach(static_cast<std::size_t>(gpn));  // where a GPU's NIC would plug in
    if (s.intra == IntraNodeFabric::nvswitch) {
      // The node fabric at the rate NCCL's protocol actually moves over it.
      const Vertex sw = m.add(Impl::Kind::nvswitch, node);
      for (int l = 0; l < gpn; ++l) {
        both(gpu_v(l), sw, s.intra_gbyte_per_s * eff);
        nic_attach[static_cast<std::size_t>(l)] = gpu_v(l);
      }
    } else {
      // PCIe tree: GPUs under switches, switches under the CPU of their socket, CPUs joined.
      std::vector<Vertex> cpu;
      for (int c = 0; c < sockets; ++c) cpu.push_back(m.add(Impl::Kind::cpu, node, c));
      for (int c = 1; c < sockets; ++c) {
        both(cpu[static_cast<std::size_t>(c - 1)], cpu[static_cast<std::size_t>(c)],
             s.inter_socket_gbyte_per_s > 0 ? s.inter_socket_gbyte_per_s : 4 * pcie);  // an effective rate
      }
      for (int sw = 0; sw < switches; ++sw) {
        const Vertex v = m.add(Impl::Kind::pcie_switch, node, sw);
        const int socket = sw * sockets / switches;
        both(v, cpu[static_cast<std::size_t>(socket)],
             (s.pcie_uplink_gbyte_per_s > 0 ? s.pcie_uplink_gbyte_per_s : pcie) * eff);
        for (int l = sw * per_switch; l < std::min(gpn, (sw + 1) * per_switch); ++l) {
          both(gpu_v(l), v, pcie * eff);
          nic_attach[static_cast<std::size_t>(l)] = v;
        }
      }
      // Bridges and meshes are NVLink: NCCL's NVLink efficiency, not the PCIe one.
      const double pair = nvlink_pair_effective_gbps(s);
      if (s.intra == IntraNodeFabric::nvlink_bridge) {
        for (int l = 0; l + 1 < gpn; l += 2) both(gpu_v(l), gpu_v(l + 1), pair);
      } else if (s.intra == IntraNodeFabric::nvlink_mesh) {
        for (int a = 0; a < gpn; ++a) {
          for (int b = a + 1; b < gpn; ++b) both(gpu_v(a), gpu_v(b), pair);
        }
      }
    }
    if (!multi) continue;
    for (int r = 0; r < k; ++r) {
      const Vertex v = m.add(Impl::Kind::nic, node, r);
      // NIC r belongs to the first GPU of its share (GPU r*gpn/k).
      both(nic_attach[static_cast<std::size_t>(r * gpn / k)], v, pcie);
      m.nic.push_back(v);
      m.host.push_back(nic_attach[static_cast<std::size_t>(r * gpn / k)]);
    }
  }
  if (!multi) return;
  // Inter-node fabric; fabric links run at the rate NCCL's transport moves.
  const double nic_bw = s.nic_gbyte_per_s * (s.nic_efficiency > 0 ? s.nic_efficiency : 1.0);
  const double ratio = std::max(1.0, s.oversubscription);
  const int per_pod = std::max(1, std::min(pod_nodes(s), s.nodes));
  const int pods = (s.nodes + per_pod - 1) / per_pod;
  const int spines = std::max(1, s.spines);
  m.leaf.resize(m.nic.size());
  auto nic_at = [&](int node, int r) { return static_cast<std::size_t>(node * k + r); };
  if (s.fabric == InterNodeFabric::single_switch) {
    const Vertex sw = m.add(Impl::Kind::single_switch);
    for (std::size_t i = 0; i < m.nic.size(); ++i) {
      both(m.nic[i], sw, nic_bw);
      m.leaf[i] = sw;
    }
    return;
  }
  const bool rails = s.fabric != InterNodeFabric::fat_tree;
  const int leaves_per_pod = rails ? k : 1;
  const bool three = s.fabric == InterNodeFabric::fat_tree3 && pods > 1;
  std::vector<Vertex> spine_v, core_v;
  // Two tiers: one spine layer for the whole fabric. Three: spines per pod, cores above them.
  const int spine_count = three ? pods * spines : spines;
  for (int i = 0; i < spine_count; ++i) spine_v.push_back(m.add(Impl::Kind::spine, 0, i));
  if (three) {
    for (int i = 0; i < std::max(1, s.core_switches); ++i) core_v.push_back(m.add(Impl::Kind::core, 0, i));
  }
  for (int pod = 0; pod < pods; ++pod) {
    const int first = pod * per_pod, here = std::min(per_pod, s.nodes - first);
    for (int l = 0; l < leaves_per_pod; ++l) {
      const Vertex lv = m.add(Impl::Kind::leaf, pod, l);
      const int nics_on_leaf = here * (rails ? 1 : k);
      for (int node = first; node < first + here; ++node) {
        for (int r = 0; r < k; ++r) {
          if (rails && r != l) continue;
          both(m.nic[nic_at(node, r)], lv, nic_bw);
          m.leaf[nic_at(node, r)] = lv;
        }
      }
      // The top tier carries the oversubscription: leaf uplinks in two tiers, spine uplinks in three.
      const double up = nics_on_leaf * nic_bw / (three ? 1.0 : ratio) / spines;
      for (int sp = 0; sp < spines; ++sp)
        both(lv, spine_v[static_cast<std::size_t>((three ? pod * spines : 0) + sp)], up);
    }
    if (three) {
      const double pod_bw = here * k * nic_bw / ratio;
      const double per = pod_bw / (spines * static_cast<double>(core_v.size()));
      for (int sp = 0; sp < spines; ++sp) {
        for (Vertex c : core_v) both(spine_v[static_cast<std::size_t>(pod * spines + sp)], c, per);
      }
    }
  }
}

ClusterNetwork::~ClusterNetwork() = default;

std::vector<LinkId> ClusterNetwork::route(GpuId a, GpuId b) const {
  std::vector<LinkId> links;
  impl_->path(static_cast<Vertex>(a.value), static_cast<Vertex>(b.value), links);
  return links;
}

int ClusterNetwork::nic_of(GpuId g) const {
  const ClusterSpec& s = impl_->cl.spec;
  const int k = std::min(s.nics(), s.gpus_per_node);
  return static_cast<int>(g.value) % s.gpus_per_node * k / s.gpus_per_node;
}

std::vector<LinkId> ClusterNetwork::route_via(GpuId a, GpuId b, int nic) const {
  const Impl& m = *impl_;
  const ClusterSpec& s = m.cl.spec;
  const int gpn = s.gpus_per_node, k = std::min(s.nics(), gpn);
  const int na = static_cast<int>(a.value) / gpn, nb = static_cast<int>(b.value) / gpn;
  if (na == nb || m.nic.empty()) return route(a, b);
  const auto ia = static_cast<std::size_t>(na * k + nic % k), ib = static_cast<std::size_t>(nb * k + nic % k);
  std::vector<LinkId> links;
  m.to_nic(static_cast<Vertex>(a.value), ia, links);
  m.path(m.nic[ia], m.nic[ib], links);
  m.from_nic(ib, static_cast<Vertex>(b.value), links);
  return links;
}

std::vector<LinkId> ClusterNetwork::route_rail(GpuId a, GpuId b) const { return route_via(a, b, nic_of(b)); }

std::vector<LinkId> ClusterNetwork::route_to_leaf(GpuId a, int nic) const {
  const Impl& m = *impl_;
  const int gpn = m.cl.spec.gpus_per_node, k = std::min(m.cl.spec.nics(), gpn);
  std::vector<LinkId> links;
  if (m.nic.empty()) return links;
  const std::size_t i = static_cast<std::size_t>(static_cast<int>(a.value) / gpn * k + nic % k);
  m.to_nic(static_cast<Vertex>(a.value), i, links);
  m.path(m.nic[i], m.leaf[i], links);
  return links;
}

std::vector<LinkId> ClusterNetwork::route_from_leaf(GpuId a, int nic) const {
  const Impl& m = *impl_;
  const int gpn = m.cl.spec.gpus_per_node, k = std::min(m.cl.spec.nics(), gpn);
  std::vector<LinkId> links;
  if (m.nic.empty()) return links;
  const std::size_t i = static_cast<std::size_t>(static_cast<int>(a.value) / gpn * k + nic % k);
  m.path(m.leaf[i], m.nic[i], links);
  m.from_nic(i, static_cast<Vertex>(a.value), links);
  return links;
}

std::string ClusterNetwork::link_name(LinkId link) const {
  std::string name = impl_->link_name(link);
  return name.empty() ? "link " + std::to_string(link.value) : name;
}

std::size_t ClusterNetwork::vertex_count() const { return boost::num_vertices(impl_->g); }
// Counted as built: boost::num_edges walks edge iterators that GCC 12 flags at -O3.
std::size_t ClusterNetwork::link_count() const { return impl_->edges; }

}  // namespace ctwin
