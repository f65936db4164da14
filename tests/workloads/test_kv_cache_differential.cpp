// hash_lru and none against a slow, obviously correct model of the same rules (std::map and
// linear scans; for none, the same pool with no block ever named), over random allocate /
// release / swap sequences: after every operation both agree on the used, cached and free
// blocks, the hit statistics and the prefix each request would find.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/random.hpp"
#include "workloads/kv_cache.hpp"

using namespace ctwin;

namespace {

// The rules, written plainly: block i of r is named (group, i) inside its shared prefix, else
// (id, i); a full block is findable from its allocation; an unreferenced findable block keeps
// its name until evicted, the one unreferenced longest (a request's tail before its head) first,
// and only when no nameless free block is left.
struct ReferenceCache {
  using Key = std::pair<std::int64_t, std::int64_t>;
  struct Blk {
    int refs = 0;
    std::optional<Key> key;
    std::int64_t freed_at = 0;
  };
  struct Seq {
    std::int64_t tokens = 0;
    std::vector<int> blocks;
    std::int64_t host = 0;
  };
  int bs;
  std::int64_t host_capacity;
  bool naming = true;  // false: the none mode, nothing is ever found again
  std::vector<Blk> blocks;
  std::map<Key, int> names;
  std::map<std::int64_t, Seq> seqs;
  std::int64_t clock = 0, host_used = 0;
  KvCacheStats stats;

  ReferenceCache(int n, int block_size, std::int64_t host) : bs(block_size), host_capacity(host), blocks(n) {}

  Key key(const Request& r, std::int64_t i) const {
    if (r.prefix_group >= 0 && (i + 1) * bs <= r.shared_prefix_tokens) return {r.prefix_group, i};
    return {-1 - r.id, i};
  }
  std::int64_t used() const {
    return std::count_if(blocks.begin(), blocks.end(), [](const Blk& b) { return b.refs > 0; });
  }
  std::int64_t cached() const {
    return std::count_if(blocks.begin(), blocks.end(), [](const Blk& b) { return b.refs == 0 && b.key; });
  }
  std::int64_t nameless_free() const {
    return std::count_if(blocks.begin(), blocks.end(), [](const Blk& b) { return b.refs == 0 && !b.key; });
  }
  std::int64_t prefix(const Request& r, std::int64_t context) const {
    if (!naming) return 0;
    std::int64_t n = 0;
    while (context > 1 && n < (context - 1) / bs && names.count(key(r, n))) ++n;
    return n * bs;
  }
  int take() {
    int pick = -1;
    for (int b = 0; b < static_cast<int>(blocks.size()); ++b)
      if (blocks[b].refs == 0 && !blocks[b].key) pick = b;
    if (pick < 0) {
      for (int b = 0; b < static_cast<int>(blocks.size()); ++b)
        if (blocks[b].refs == 0 && blocks[b].key && (pick < 0 || blocks[b].freed_at < blocks[pick].freed_at)) pick = b;
      names.erase(*blocks[pick].key);
      blocks[pick].key.reset();
      ++stats.evicted_blocks;
    }
    blocks[pick].refs = 1;
    return pick;
  }
  // Names the full blocks from `from` on (a block is named once, when it fills; one whose name
  // another block held then stays nameless).
  void name_full(const Request& r, Seq& s, std::int64_t from) {
    if (!naming) return;
    for (std::int64_t i = from; i < s.tokens / bs; ++i) {
      const Key k = key(r, i);
      if (!names.count(k) && !blocks[s.blocks[i]].key) {
        names[k] = s.blocks[i];
        blocks[s.blocks[i]].key = k;
      }
    }
  }
  bool allocate(const Request& r, std::int64_t tokens) {
    const bool first = !seqs.count(r.id);
    const std::int64_t have_tokens = first ? 0 : seqs[r.id].tokens;
    if (tokens <= have_tokens) return true;
    std::int64_t hit = 0, hit_unref = 0;
    const std::int64_t context = std::max<std::int64_t>(r.prompt_tokens, tokens);
    if (first) {
      hit = prefix(r, context) / bs;
      for (std::int64_t i = 0; i < hit; ++i) hit_unref += blocks[names.at(key(r, i))].refs == 0;
    }
    const std::int64_t have = first ? 0 : static_cast<std::int64_t>(seqs[r.id].blocks.size());
    const std::int64_t fresh = std::max<std::int64_t>(0, (tokens + bs - 1) / bs - have - hit);
    if (fresh > nameless_free() + cached() - hit_unref) return false;
    Seq& s = seqs[r.id];
    if (first) {
      ++stats.prefix_queries;
      stats.prefix_query_tokens += context;
      stats.prefix_hit_tokens += hit * bs;
      for (std::int64_t i = 0; i < hit; ++i) {
        const int b = names.at(key(r, i));
        ++blocks[b].refs;
        s.blocks.push_back(b);
      }
    }
    for (std::int64_t i = 0; i < fresh; ++i) s.blocks.push_back(take());
    s.tokens = std::max(tokens, hit * bs);
    name_full(r, s, std::max(have_tokens / bs, hit));
    return true;
  }
  void drop(Seq& s) {
    for (auto b = s.blocks.rbegin(); b != s.blocks.rend(); ++b)
      if (--blocks[*b].refs == 0) blocks[*b].freed_at = ++clock;
    s.blocks.clear();
  }
  void release(const Request& r) {
    if (!seqs.count(r.id)) return;
    drop(seqs[r.id]);
    seqs.erase(r.id);
  }
  std::optional<std::int64_t> swap_out(const Request& r) {
    Seq& s = seqs.at(r.id);
    const auto n = static_cast<std::int64_t>(s.blocks.size());
    if (host_used + n > host_capacity) return std::nullopt;
    drop(s);
    s.host = n;
    host_used += n;
    return n;
  }
  std::optional<std::int64_t> swap_in(const Request& r) {
    Seq& s = seqs.at(r.id);
    if (s.host > nameless_free() + cached()) return std::nullopt;
    for (std::int64_t i = 0; i < s.host; ++i) s.blocks.push_back(take());
    name_full(r, s, 0);
    host_used -= s.host;
    const std::int64_t n = s.host;
    s.host = 0;
    return n;
  }
};

}  // namespace

TEST_CASE("kv cache hash_lru and none agree with a slow reference model over random operations") {
  for (const PrefixCaching mode : {PrefixCaching::hash_lru, PrefixCaching::none})
    for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
      CAPTURE(prefix_caching_names.name(mode));
      CAPTURE(seed);
      const int bs = 1 + static_cast<int>(mix64(seed) % 4);  // 1..4 tokens a block
      const int nblocks = 12 + static_cast<int>(mix64(seed + 99) % 20);
      auto fast = make_kv_cache(nblocks, bs, 8, mode);
      ReferenceCache ref(nblocks, bs, 8);
      ref.naming = mode == PrefixCaching::hash_lru;
      std::vector<Request> known;  // every request made so far (released ones may resume)
      std::int64_t allocations_ok = 0, allocations_failed = 0, evictions_seen = 0;
      for (std::uint64_t step = 0; step < 3000; ++step) {
        const auto u = [&](std::uint64_t purpose, std::uint64_t n) {
          return mix64(seed * 1000003 + step * 17 + purpose) % n;
        };
        const auto op = u(0, 10);
        if (known.empty() || op < 2) {  // a new request
          Request r;
          r.id = static_cast<std::int64_t>(known.size());
          r.prompt_tokens = 1 + static_cast<std::int32_t>(u(1, 24));
          r.output_tokens = 8;
          r.prefix_group = static_cast<std::int64_t>(u(2, 4)) - 1;
          r.shared_prefix_tokens = static_cast<std::int32_t>(u(3, static_cast<std::uint64_t>(r.prompt_tokens) + 1));
          known.push_back(r);
        }
        // Growth goes to any request (a released one resumes); release and swap to a held one.
        std::int64_t pick = static_cast<std::int64_t>(u(4, known.size()));
        if (op >= 6 && !ref.seqs.empty())
          pick = std::next(ref.seqs.begin(), static_cast<long>(u(8, ref.seqs.size())))->first;
        const Request& r = known[static_cast<std::size_t>(pick)];
        CAPTURE(step);
        CAPTURE(r.id);
        const std::int64_t held = ref.seqs.count(r.id) ? ref.seqs[r.id].tokens : 0;
        const bool swapped = ref.seqs.count(r.id) && ref.seqs[r.id].host > 0;
        if (op < 6 && !swapped) {  // grow by a chunk (a first call: from the prefix found)
          const std::int64_t base = held > 0 ? held : ref.prefix(r, r.prompt_tokens);
          const std::int64_t tokens = base + 1 + static_cast<std::int64_t>(u(5, 8));
          const bool ok = ref.allocate(r, tokens);
          CHECK(fast->allocate(r, tokens) == ok);
          allocations_ok += ok;
          allocations_failed += !ok;
        } else if (op < 9 || !ref.seqs.count(r.id)) {
          ref.release(r);
          fast->release(r);
        } else if (swapped) {
          CHECK(fast->swap_in(r) == ref.swap_in(r));
        } else {
          CHECK(fast->swap_out(r) == ref.swap_out(r));
        }
        REQUIRE(fast->used_blocks() == ref.used());
        REQUIRE(fast->cached_blocks() == ref.cached());
        REQUIRE(fast->num_blocks() - fast->used_blocks() - fast->cached_blocks() == ref.nameless_free());
        REQUIRE(fast->used_host_blocks() == ref.host_used);
        REQUIRE(fast->stats().prefix_hit_tokens == ref.stats.prefix_hit_tokens);
        REQUIRE(fast->stats().prefix_query_tokens == ref.stats.prefix_query_tokens);
        REQUIRE(fast->stats().evicted_blocks == ref.stats.evicted_blocks);
        CHECK(fast->blocks_of(r) ==
              (ref.seqs.count(r.id) ? static_cast<std::int64_t>(ref.seqs[r.id].blocks.size()) : 0));
        const Request& q = known[u(6, known.size())];
        const std::int64_t context = q.prompt_tokens + static_cast<std::int64_t>(u(7, 20));
        REQUIRE(fast->cached_prefix_tokens(q, context) == ref.prefix(q, context));
      }
      evictions_seen += ref.stats.evicted_blocks;
      // The sequence exercised what it is meant to: hits, evictions and successful growth (and
      // failed growth: the pool ran full).
      if (ref.naming) {
        CHECK(ref.stats.prefix_hit_tokens > 0);
        CHECK(evictions_seen > 0);
      }
      CHECK(allocations_ok > 300);
      CHECK(allocations_failed > 0);
    }
}

// Random traffic on radix: with room for everything (nothing evicted) it finds exactly what
// hash_lru finds, since both name a page by (owner, index) and forget nothing; under pressure
// the pool still adds up and each held request holds ceil(tokens / page) pages.
TEST_CASE("kv cache radix agrees with hash_lru without eviction and keeps the pool whole under pressure") {
  for (const std::int64_t pool : {4000, 24}) {
    for (const std::uint64_t seed : {11u, 12u, 13u}) {
      CAPTURE(pool);
      CAPTURE(seed);
      const int bs = 1 + static_cast<int>(mix64(seed) % 4);
      auto hash = make_kv_cache(pool, bs, 8, PrefixCaching::hash_lru);
      auto radix = make_kv_cache(pool, bs, 8, PrefixCaching::radix);
      std::vector<Request> known;
      std::map<std::int64_t, std::int64_t> held;  // request -> tokens, in radix
      for (std::uint64_t step = 0; step < 2000; ++step) {
        const auto u = [&](std::uint64_t purpose, std::uint64_t n) {
          return mix64(seed * 7919 + step * 31 + purpose) % n;
        };
        const auto op = u(0, 10);
        if (known.empty() || op < 2) {
          Request r;
          r.id = static_cast<std::int64_t>(known.size());
          r.prompt_tokens = 1 + static_cast<std::int32_t>(u(1, 24));
          r.prefix_group = static_cast<std::int64_t>(u(2, 3)) - 1;
          r.shared_prefix_tokens = static_cast<std::int32_t>(u(3, static_cast<std::uint64_t>(r.prompt_tokens) + 1));
          known.push_back(r);
        }
        std::int64_t pick = static_cast<std::int64_t>(u(4, known.size()));
        if (op >= 6 && !held.empty()) pick = std::next(held.begin(), static_cast<long>(u(8, held.size())))->first;
        const Request& r = known[static_cast<std::size_t>(pick)];
        CAPTURE(step);
        if (op < 6) {
          const std::int64_t base = held.count(r.id) ? held[r.id] : radix->cached_prefix_tokens(r);
          const std::int64_t tokens = base + 1 + static_cast<std::int64_t>(u(5, 8));
          const bool ok = radix->allocate(r, tokens);
          if (pool == 4000) {
            REQUIRE(ok);
            REQUIRE(hash->allocate(r, tokens));
          }
          if (ok) held[r.id] = std::max(held[r.id], tokens);
        } else {
          radix->release(r);
          hash->release(r);
          held.erase(r.id);
        }
        REQUIRE(radix->used_blocks() + radix->cached_blocks() <= pool);
        REQUIRE(radix->used_blocks() >= 0);
        REQUIRE(radix->cached_blocks() >= 0);
        std::int64_t held_pages = 0;
        for (const auto& [id, tokens] : held) {
          REQUIRE(radix->blocks_of(known[static_cast<std::size_t>(id)]) == (tokens + bs - 1) / bs);
          held_pages += (tokens + bs - 1) / bs;
        }
        REQUIRE(radix->used_blocks() <= held_pages);  // shared pages count once
        const Request& q = known[u(6, known.size())];
        const std::int64_t context = q.prompt_tokens + static_cast<std::int64_t>(u(7, 20));
        if (pool == 4000) {
          REQUIRE(radix->cached_prefix_tokens(q, context) == hash->cached_prefix_tokens(q, context));
          REQUIRE(radix->stats().prefix_hit_tokens == hash->stats().prefix_hit_tokens);
          REQUIRE(radix->used_blocks() <= hash->used_blocks());  // radix also drops duplicate copies
        }
      }
      if (pool == 4000) CHECK(radix->stats().prefix_hit_tokens > 0);
      if (pool == 24) CHECK(radix->stats().evicted_blocks > 0);
    }
  }
}
