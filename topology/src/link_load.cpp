#include "topology/link_load.hpp"

#include <algorithm>

namespace ctwin {

std::vector<LinkLoad> busiest_links(const FlowNetwork& net, const ClusterNetwork& routes, double run_s, int top) {
  std::vector<std::pair<double, std::uint32_t>> order;  // (busy seconds, link)
  for (std::size_t i = 0; i < net.link_count(); ++i) {
    const LinkId l(static_cast<std::uint32_t>(i));
    if (net.link_bytes(l) > 0) order.emplace_back(net.link_bytes(l) / net.link_capacity(l), l.value);
  }
  std::vector<LinkLoad> out;
  out.reserve(order.size());
  for (const auto& [busy_s, id] : order) {
    const LinkId l(id);
    out.push_back({routes.link_name(l), net.link_bytes(l), net.link_capacity(l) / 1e9, run_s > 0 ? busy_s / run_s : 0});
  }
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) {
    if (a.busy_fraction != b.busy_fraction) return a.busy_fraction > b.busy_fraction;
    return a.name < b.name;
  });
  if (top >= 0 && out.size() > static_cast<std::size_t>(top)) out.resize(static_cast<std::size_t>(top));
  return out;
}

}  // namespace ctwin
