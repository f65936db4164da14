#include "workloads/serving_router.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "prefix_blocks.hpp"
#include "sim/random.hpp"

namespace ctwin {
namespace {

// power_of_two's draw `purpose` (0, 1) for request `id`: a function of (seed, id) only.
double draw(std::uint64_t seed, std::int64_t id, std::uint64_t purpose) {
  return uniform01(mix64(mix64(seed) ^ static_cast<std::uint64_t>(id)) ^ purpose);
}

}  // namespace

Router::Router(const RouterSpec& spec, std::int64_t session_group_base, std::int32_t session_turns)
    : spec_(spec), session_base_(session_group_base), session_turns_(session_turns) {
  if (!(spec.metrics_interval_s >= 0)) throw std::invalid_argument("router: metrics_interval_s must be >= 0");
  if (spec.max_tree_tokens < 1) throw std::invalid_argument("router: max_tree_tokens must be >= 1");
}

void Router::add_replica() {
  outstanding_.push_back(0);
  trees_.emplace_back();
  stats_.routed.push_back(0);
}

void Router::completed(int replica) {
  auto& o = outstanding_.at(static_cast<std::size_t>(replica));
  if (o > 0) --o;
}

void Router::forget(int replica) {
  outstanding_.at(static_cast<std::size_t>(replica)) = 0;
  trees_[static_cast<std::size_t>(replica)] = Tree{};
}

// A trace's hash blocks (Request::prefix_blocks) are nodes of their own, keyed by
// hash_owner(id) apart from the groups (>= 0): a chain hash names its block and every one before,
// so the match runs over the leading blocks found, each for the tokens seen of it.
namespace {
std::int64_t block_tokens_in_prompt(const Request& r, std::int64_t b) {
  return std::min<std::int64_t>(r.prefix_block_tokens, r.prompt_tokens - b * r.prefix_block_tokens);
}
}  // namespace

std::int64_t Router::Tree::match(const Request& r) const {
  if (r.prefix_block_count > 0) {
    std::int64_t m = 0;
    for (std::int64_t b = 0; b < r.prefix_block_count; ++b) {
      const auto it = nodes.find(detail::hash_owner(r.prefix_blocks[b]));
      if (it == nodes.end()) break;
      const std::int64_t want = block_tokens_in_prompt(r, b);
      m += std::min(it->second.tokens, want);
      if (it->second.tokens < want) break;
    }
    return m;
  }
  if (r.prefix_group < 0 || r.shared_prefix_tokens == 0) return 0;
  const auto it = nodes.find(r.prefix_group);
  return it == nodes.end() ? 0 : std::min<std::int64_t>(it->second.tokens, r.shared_prefix_tokens);
}

// A system prompt's group shares only its shared_prefix_tokens (the rest is the request's own);
// a session's group is the conversation, of which the whole prompt is a prefix of later turns
// (SGLang's router inserts the whole prompt text too).
void Router::Tree::insert(const Request& r, std::int64_t seen, std::int64_t cap) {
  const auto touch = [&](std::int64_t key, std::int64_t key_seen) {
    auto [it, fresh] = nodes.try_emplace(key);
    Node& n = it->second;
    if (fresh) {
      n.at = lru.insert(lru.end(), key);
    } else {
      lru.splice(lru.end(), lru, n.at);
    }
    if (key_seen > n.tokens) {
      tokens += key_seen - n.tokens;
      n.tokens = key_seen;
    }
  };
  if (r.prefix_block_count > 0) {  // every hash block of the prompt (the whole prompt is text)
    for (std::int64_t b = 0; b < r.prefix_block_count && b * r.prefix_block_tokens < r.prompt_tokens; ++b)
      touch(detail::hash_owner(r.prefix_blocks[b]), block_tokens_in_prompt(r, b));
  } else {
    if (r.prefix_group < 0 || seen == 0) return;
    touch(r.prefix_group, seen);
  }
  while (tokens > cap && lru.size() > 1) {  // the newest stays even when it alone is too long
    const auto old = nodes.find(lru.front());
    tokens -= old->second.tokens;
    nodes.erase(old);
    lru.pop_front();
  }
}

int Router::least_outstanding(const std::vector<RouterReplicaView>& v) const {
  // The best count kept in a register, not reloaded through `best` (one scan per arrival over
  // every replica: 128 replicas at 500 requests/s in `ctwin bench serving`); strictly less, so
  // ties go to the lower id.
  int best = -1;
  std::int64_t best_n = std::numeric_limits<std::int64_t>::max();
  for (int k = 0; k < static_cast<int>(v.size()); ++k) {
    const std::int64_t n = outstanding_[static_cast<std::size_t>(k)];
    if (v[static_cast<std::size_t>(k)].accepting && n < best_n) {
      best = k;
      best_n = n;
    }
  }
  return best;
}

int Router::prefix_aware(const Request& r, const std::vector<RouterReplicaView>& v) {
  std::int64_t lo = -1, hi = -1;
  int best = -1;
  std::int64_t best_match = -1;
  for (int k = 0; k < static_cast<int>(v.size()); ++k) {
    const auto u = static_cast<std::size_t>(k);
    if (!v[u].accepting) continue;
    lo = lo < 0 ? outstanding_[u] : std::min(lo, outstanding_[u]);
    hi = std::max(hi, outstanding_[u]);
    const std::int64_t m = trees_[u].match(r);
    if (m > best_match) {
      best_match = m;
      best = k;
    }
  }
  if (best < 0) return -1;
  const bool imbalanced = hi - lo > spec_.balance_abs_threshold &&
                          static_cast<double>(hi) > spec_.balance_rel_threshold * static_cast<double>(lo);
  const double ratio = static_cast<double>(best_match) / static_cast<double>(std::max(1, r.prompt_tokens));
  if (imbalanced || !(ratio > spec_.cache_threshold)) return least_outstanding(v);
  ++stats_.cache_routed;
  return best;
}

int Router::pick(const Request& r, const std::vector<RouterReplicaView>& v) {
  const int n = static_cast<int>(v.size());
  switch (spec_.policy) {
    case RouterPolicy::round_robin: {
      // The next accepting replica from where the last one went: with all accepting, request i
      // goes to replica i mod n (the independent fleet's split).
      for (int j = 0; j < n; ++j) {
        const int k = static_cast<int>((rr_next_ + static_cast<std::uint64_t>(j)) % static_cast<std::uint64_t>(n));
        if (v[static_cast<std::size_t>(k)].accepting) {
          rr_next_ = static_cast<std::uint64_t>(k) + 1;
          return k;
        }
      }
      return -1;
    }
    case RouterPolicy::least_outstanding:
      return least_outstanding(v);
    case RouterPolicy::least_kv: {
      int best = -1;
      double best_u = 0;
      for (int k = 0; k < n; ++k) {
        const auto& x = v[static_cast<std::size_t>(k)];
        if (!x.accepting) continue;
        const double u = x.reported.kv_blocks > 0 ? static_cast<double>(x.reported.kv_used_blocks) /
                                                        static_cast<double>(x.reported.kv_blocks)
                                                  : 0;
        // Ties (an idle fleet reports 0 everywhere) by the router's own count.
        if (best < 0 || u < best_u ||
            (u == best_u && outstanding_[static_cast<std::size_t>(k)] < outstanding_[static_cast<std::size_t>(best)])) {
          best = k;
          best_u = u;
        }
      }
      return best;
    }
    case RouterPolicy::power_of_two: {
      // Draws i and j among the m accepting replicas; the i-th accepting one found by a scan
      // (no list built per arrival; with all accepting, the i-th is replica i).
      std::size_t m = 0;
      for (int k = 0; k < n; ++k) m += v[static_cast<std::size_t>(k)].accepting ? 1 : 0;
      const auto nth_open = [&](std::size_t i) {
        if (m == static_cast<std::size_t>(n)) return static_cast<int>(i);
        for (int k = 0;; ++k)
          if (v[static_cast<std::size_t>(k)].accepting && i-- == 0) return k;
      };
      if (m < 2) return m == 0 ? -1 : nth_open(0);
      const auto i = std::min(m - 1, static_cast<std::size_t>(draw(spec_.seed, r.id, 0) * static_cast<double>(m)));
      auto j = std::min(m - 2, static_cast<std::size_t>(draw(spec_.seed, r.id, 1) * static_cast<double>(m - 1)));
      if (j >= i) ++j;  // two distinct replicas
      const int a = nth_open(i), b = nth_open(j);
      return outstanding_[static_cast<std::size_t>(b)] < outstanding_[static_cast<std::size_t>(a)] ? b : a;
    }
    case RouterPolicy::session_affinity: {
      if (session_base_ < 0 || r.prefix_group < session_base_) return least_outstanding(v);
      const auto it = sessions_.find(r.prefix_group);
      int k = it != sessions_.end() ? it->second.replica : -1;
      if (k < 0 || !v[static_cast<std::size_t>(k)].accepting) k = least_outstanding(v);
      if (k < 0) return -1;
      // The session's turns after its first carry its group; the map forgets it after its last.
      Affinity& a = sessions_[r.prefix_group];
      a.replica = k;
      if (++a.seen >= session_turns_ - 1) sessions_.erase(r.prefix_group);
      return k;
    }
    case RouterPolicy::prefix_aware:
      return prefix_aware(r, v);
  }
  return -1;
}

int Router::route(const Request& r, const std::vector<RouterReplicaView>& views) {
  if (views.size() != outstanding_.size()) throw std::logic_error("router: one view per replica expected");
  const int k = pick(r, views);
  if (k < 0) return k;
  const auto u = static_cast<std::size_t>(k);
  ++outstanding_[u];
  ++stats_.routed[u];
  stats_.prompt_tokens += r.prompt_tokens;
  if (spec_.policy == RouterPolicy::prefix_aware) {
    stats_.matched_tokens += trees_[u].match(r);
    const bool session = session_base_ >= 0 && r.prefix_group >= session_base_;
    trees_[u].insert(r, session ? r.prompt_tokens : r.shared_prefix_tokens, spec_.max_tree_tokens);
  }
  return k;
}

}  // namespace ctwin
