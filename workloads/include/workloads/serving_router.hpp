// The request router in front of a serving fleet (issue 18): it places each arriving request on
// one replica using only what a real router knows: its own counts (requests it sent minus those
// answered), its own approximate prefix tree per replica (SGLang's cache-aware router), and
// what replicas report (KV use, queues), as of the fleet's last metrics refresh.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/names.hpp"
#include "workloads/serving_sim.hpp"

namespace ctwin {

enum class RouterPolicy : std::uint8_t {
  round_robin,
  least_outstanding,
  least_kv,
  power_of_two,
  session_affinity,
  prefix_aware
};
inline constexpr auto router_policy_names =
    make_names<RouterPolicy>({{RouterPolicy::round_robin, "round_robin"},
                              {RouterPolicy::least_outstanding, "least_outstanding"},
                              {RouterPolicy::least_kv, "least_kv"},
                              {RouterPolicy::power_of_two, "power_of_two"},
                              {RouterPolicy::session_affinity, "session_affinity"},
                              {RouterPolicy::prefix_aware, "prefix_aware"}});

struct RouterSpec {
  RouterPolicy policy = RouterPolicy::round_robin;
  // Replica-reported metrics (KV use, queues) refresh every metrics_interval_s (0: exact, as of
  // the routing instant). The router's own counts are always exact.
  double metrics_interval_s = 0;
  std::uint64_t seed = 1;  // power_of_two's draws, keyed by (seed, request id)
  // prefix_aware, as SGLang's router (sgl-router, cache_aware): the load is imbalanced when
  // max - min outstanding > balance_abs_threshold and max > balance_rel_threshold * min; then,
  // or when the best prefix match covers no more than cache_threshold of the prompt, the least
  // loaded replica takes the request. SGLang's defaults.
  double cache_threshold = 0.5;
  std::int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
  // Tokens each replica's tree remembers before its least recently used prefixes go (SGLang's
  // max_tree_size counts characters, 2^26; about 2^24 tokens).
  std::int64_t max_tree_tokens = std::int64_t{1} << 24;
};

// What the router sees of one replica when it routes.
struct RouterReplicaView {
  bool accepting = false;  // serving and not draining
  ReplicaLoad reported;    // as of the last metrics refresh
};

struct RouterStats {
  std::vector<std::int64_t> routed;  // requests per replica (the fleet's replica ids)
  std::int64_t prompt_tokens = 0;    // prompts routed
  std::int64_t matched_tokens = 0;   // prefix_aware: of which its tree matched where it went
  std::int64_t cache_routed = 0;     // prefix_aware: requests sent for their match
  double hit_rate() const { return prompt_tokens > 0 ? static_cast<double>(matched_tokens) / prompt_tokens : 0; }
};

class Router {
 public:
  // session_group_base: the first prefix group that is a multi-turn session (the traffic's
  // system-prompt groups come before; -1: no sessions), for session_affinity.
  Router(const RouterSpec& spec, std::int64_t session_group_base, std::int32_t session_turns);

  // A replica id (0, 1, ... in the order added) joins; it starts with nothing outstanding.
  void add_replica();
  // The replica with accepting views to take r (views indexed by replica id), or -1 when none
  // accepts. Counts r as outstanding there.
  int route(const Request& r, const std::vector<RouterReplicaView>& views);
  void completed(int replica);  // a request it sent there was answered (or rejected)
  void forget(int replica);     // the replica crashed: nothing outstanding, its tree gone

  std::int64_t outstanding(int replica) const { return outstanding_[static_cast<std::size_t>(replica)]; }
  const RouterStats& stats() const { return stats_; }
  const RouterSpec& spec() const { return spec_; }

 private:
  // The router's own record of the prefixes it sent to one replica: prefix group -> shared
  // tokens seen (a group's tokens are a fixed sequence, so its longest seen prefix is the tree's
  // branch), least recently used first.
  struct Tree {
    std::list<std::int64_t> lru;  // groups, least recently used at the front
    struct Node {
      std::int64_t tokens = 0;
      std::list<std::int64_t>::iterator at;
    };
    std::unordered_map<std::int64_t, Node> nodes;
    std::int64_t tokens = 0;
    std::int64_t match(const Request& r) const;
    void insert(const Request& r, std::int64_t seen, std::int64_t cap);
  };

  int least_outstanding(const std::vector<RouterReplicaView>& v) const;
  int pick(const Request& r, const std::vector<RouterReplicaView>& v);
  int prefix_aware(const Request& r, const std::vector<RouterReplicaView>& v);

  RouterSpec spec_;
  std::int64_t session_base_;
  std::int32_t session_turns_;
  std::vector<std::int64_t> outstanding_;
  std::vector<Tree> trees_;
  std::uint64_t rr_next_ = 0;
  struct Affinity {
    int replica;
    std::int32_t seen;
  };
  std::unordered_map<std::int64_t, Affinity> sessions_;  // session group -> replica, until its last turn
  RouterStats stats_;
};

}  // namespace ctwin
