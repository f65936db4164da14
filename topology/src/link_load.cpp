#include "topology/link_load.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace ctwin {

std::string link_class(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (!std::isdigit(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

std::vector<LinkLoad> busiest_links(const FlowNetwork& net, const ClusterNetwork& routes, double run_s, int top) {
  // The busiest link of each class, and how many links of the class carried traffic.
  std::map<std::string, LinkLoad> best;
  for (std::size_t i = 0; i < net.link_count(); ++i) {
    const LinkId l(static_cast<std::uint32_t>(i));
    if (!(net.link_bytes(l) > 0)) continue;
    LinkLoad load{routes.link_name(l), net.link_bytes(l), net.link_capacity(l) / 1e9,
                  run_s > 0 ? net.link_bytes(l) / net.link_capacity(l) / run_s : 0, 1};
    auto [it, fresh] = best.try_emplace(link_class(load.name), load);
    if (fresh) continue;
    LinkLoad& b = it->second;
    const int links = b.links + 1;
    if (load.busy_fraction > b.busy_fraction || (load.busy_fraction == b.busy_fraction && load.name < b.name)) b = load;
    b.links = links;
  }
  std::vector<LinkLoad> out;
  out.reserve(best.size());
  for (auto& [cls, load] : best) out.push_back(std::move(load));
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) {
    if (a.busy_fraction != b.busy_fraction) return a.busy_fraction > b.busy_fraction;
    return a.name < b.name;
  });
  if (top >= 0 && out.size() > static_cast<std::size_t>(top)) out.resize(static_cast<std::size_t>(top));
  return out;
}

}  // namespace ctwin
