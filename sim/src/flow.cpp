#include "sim/flow.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ctwin {

LinkId FlowNetwork::add_link(double bytes_per_s) {
  if (!(bytes_per_s > 0)) throw std::invalid_argument("FlowNetwork::add_link: capacity must be positive");
  links_.push_back(Link{bytes_per_s, {}, 0.0});
  mark_link_.push_back(0);
  return LinkId(static_cast<std::uint32_t>(links_.size() - 1));
}

void FlowNetwork::set_capacity(LinkId link, double bytes_per_s) {
  if (!(bytes_per_s > 0)) throw std::invalid_argument("FlowNetwork::set_capacity: capacity must be positive");
  Link& l = links_.at(link.value);
  if (!l.flows.empty()) throw std::logic_error("FlowNetwork::set_capacity: flows are active on the link");
  l.capacity = bytes_per_s;
}

FlowId FlowNetwork::start(std::vector<LinkId> path, double bytes, std::function<void()> on_done, Time latency,
                          double max_bytes_per_s) {
  if (!(max_bytes_per_s > 0)) throw std::invalid_argument("FlowNetwork::start: rate bound must be positive");
  const auto f = static_cast<std::uint32_t>(flows_.size());
  Flow fl;
  for (LinkId l : path) {
    if (l.value >= links_.size()) throw std::invalid_argument("FlowNetwork::start: unknown link");
    fl.links.push_back(l.value);
  }
  fl.remaining = std::max(0.0, bytes);
  for (std::uint32_t l : fl.links) links_[l].bytes += fl.remaining;
  fl.max_rate = max_bytes_per_s;
  fl.on_done = std::move(on_done);
  flows_.push_back(std::move(fl));
  mark_flow_.push_back(0);
  // The first byte leaves after the latency; only then does the flow take bandwidth.
  engine_.schedule_in(latency, [this, f] { attach(f); });
  return FlowId(f);
}

void FlowNetwork::attach(std::uint32_t f) {
  Flow& fl = flows_[f];
  if (fl.links.empty() || fl.remaining <= 0) {
    finish(f);
    return;
  }
  fl.active = true;
  fl.updated = engine_.now();
  ++active_;
  for (std::uint32_t l : fl.links) links_[l].flows.push_back(f);
  mark_dirty(f);
}

void FlowNetwork::mark_dirty(std::uint32_t f) {
  if (!batch_) {
    reshare({f});
    return;
  }
  dirty_.push_back(f);
  if (reshare_pending_) return;
  reshare_pending_ = true;
  // Same-time events run in scheduling order, so this runs after the instant's other changes.
  engine_.schedule_in(Time{}, [this] { run_pending_reshare(); });
}

void FlowNetwork::run_pending_reshare() {
  reshare_pending_ = false;
  std::vector<std::uint32_t> seeds;
  seeds.swap(dirty_);
  reshare(seeds);
}

void FlowNetwork::finish(std::uint32_t f) {
  Flow& fl = flows_[f];
  std::vector<std::uint32_t> neighbours;
  if (fl.active) {
    fl.active = false;
    --active_;
    for (std::uint32_t l : fl.links) {
      auto& v = links_[l].flows;
      v.erase(std::find(v.begin(), v.end(), f));
      // One flow per link seeds the reshare: it reaches every flow connected to it, so marking
      // all of them would only queue duplicates (quadratic in flows when many finish at once).
      if (!v.empty()) neighbours.push_back(v.front());
    }
  }
  fl.remaining = 0;
  fl.rate = 0;
  auto done = std::move(fl.on_done);
  for (std::uint32_t g : neighbours) mark_dirty(g);
  if (done) done();
}

void FlowNetwork::reshare(const std::vector<std::uint32_t>& seeds) {
  ++reshares_;
  ++epoch_;
  const Time now = engine_.now();
  // The connected component: flows reachable from the seeds through shared links.
  std::vector<std::uint32_t> comp_flows, comp_links, stack;
  for (std::uint32_t s : seeds) {
    if (flows_[s].active && mark_flow_[s] != epoch_) {
      mark_flow_[s] = epoch_;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const std::uint32_t f = stack.back();
    stack.pop_back();
    comp_flows.push_back(f);
    for (std::uint32_t l : flows_[f].links) {
      if (mark_link_[l] == epoch_) continue;
      mark_link_[l] = epoch_;
      comp_links.push_back(l);
      for (std::uint32_t g : links_[l].flows) {
        if (mark_flow_[g] != epoch_) {
          mark_flow_[g] = epoch_;
          stack.push_back(g);
        }
      }
    }
  }
  flows_reshared_ += comp_flows.size();
  // Bytes moved at the old rates up to now.
  for (std::uint32_t f : comp_flows) {
    Flow& fl = flows_[f];
    fl.remaining = std::max(0.0, fl.remaining - fl.rate * (now - fl.updated).seconds());
    fl.updated = now;
    fl.rate = -1;  // unfrozen
  }
  // Progressive filling: the most constrained link fixes its flows at its fair share, unless a
  // flow's own bound is lower still, which fixes that flow first (a bounded flow is a link of its
  // own that only it crosses).
  std::sort(comp_links.begin(), comp_links.end());  // deterministic order
  std::vector<double> left(comp_links.size());
  std::vector<std::uint32_t> unfrozen(comp_links.size());
  for (std::size_t i = 0; i < comp_links.size(); ++i) {
    left[i] = links_[comp_links[i]].capacity;
    unfrozen[i] = static_cast<std::uint32_t>(links_[comp_links[i]].flows.size());
  }
  // Bounded flows by bound, ties by id (deterministic).
  std::vector<std::uint32_t> bounded;
  for (std::uint32_t f : comp_flows) {
    if (std::isfinite(flows_[f].max_rate)) bounded.push_back(f);
  }
  std::sort(bounded.begin(), bounded.end(), [this](std::uint32_t a, std::uint32_t b) {
    return flows_[a].max_rate != flows_[b].max_rate ? flows_[a].max_rate < flows_[b].max_rate : a < b;
  });
  std::size_t next_bounded = 0;
  auto freeze = [&](Flow& fl, double rate) {
    fl.rate = rate;
    for (std::uint32_t l : fl.links) {
      const auto it = std::lower_bound(comp_links.begin(), comp_links.end(), l);
      const std::size_t i = static_cast<std::size_t>(it - comp_links.begin());
      left[i] = std::max(0.0, left[i] - rate);
      --unfrozen[i];
    }
  };
  std::size_t frozen = 0;
  while (frozen < comp_flows.size()) {
    std::size_t best = comp_links.size();
    double share = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < comp_links.size(); ++i) {
      if (unfrozen[i] == 0) continue;
      const double s = left[i] / unfrozen[i];
      if (s < share) {
        share = s;
        best = i;
      }
    }
    while (next_bounded < bounded.size() && flows_[bounded[next_bounded]].rate >= 0) ++next_bounded;
    if (next_bounded < bounded.size() && flows_[bounded[next_bounded]].max_rate <= share) {
      freeze(flows_[bounded[next_bounded]], flows_[bounded[next_bounded]].max_rate);
      ++frozen;
      continue;
    }
    if (best == comp_links.size()) break;
    for (std::uint32_t f : links_[comp_links[best]].flows) {
      Flow& fl = flows_[f];
      if (fl.rate >= 0) continue;
      freeze(fl, share);
      ++frozen;
    }
  }
  // New completion times.
  for (std::uint32_t f : comp_flows) {
    Flow& fl = flows_[f];
    engine_.cancel(fl.done);
    const double secs = fl.rate > 0 ? fl.remaining / fl.rate : 0.0;
    const Time at = now + Time{static_cast<std::int64_t>(std::ceil(secs * 1e12))};
    fl.done = engine_.schedule_at(at, [this, f] { finish(f); });
  }
}

}  // namespace ctwin
