// The paged KV cache's none and hash_lru modes (workloads/kv_cache.hpp) against hand-worked
// block counts: the pool invariant, refcounted sharing, LRU eviction order, an allocation that
// fails changing nothing, shared-system-prompt hits, a request resuming after recompute
// preemption finding its own blocks, and swapping.
#include <doctest/doctest.h>

#include <cstdint>

#include "kv_requests.hpp"
#include "workloads/kv_cache.hpp"

using namespace ctwin;

namespace {

Request req(std::int64_t id, std::int32_t prompt, std::int32_t shared = 0, std::int64_t group = -1) {
  return test::kv_request(id, prompt, shared, group);
}
using test::free_blocks;

}  // namespace

TEST_CASE("kv cache none: blocks are ceil(tokens / block_size), nothing is ever found again") {
  auto c = make_kv_cache(10, 16, 0, PrefixCaching::none);
  const Request a = req(0, 100, 100, 1), b = req(1, 100, 100, 1);
  CHECK(c->allocate(a, 100));
  CHECK(c->blocks_of(a) == 7);  // ceil(100 / 16)
  CHECK(c->cached_prefix_tokens(b) == 0);
  CHECK(c->allocate(a, 112));  // fills block 7 of 7: no new block
  CHECK(c->blocks_of(a) == 7);
  CHECK(c->allocate(a, 113));
  CHECK(c->blocks_of(a) == 8);
  CHECK_FALSE(c->allocate(b, 100));  // 7 more do not fit in the 2 left
  CHECK(c->used_blocks() == 8);
  c->release(a);
  CHECK(c->used_blocks() == 0);
  CHECK(c->cached_blocks() == 0);
  CHECK(c->allocate(b, 100));
  CHECK(c->stats().prefix_hit_tokens == 0);
  CHECK(c->stats().evicted_blocks == 0);
  CHECK(c->stats().prefix_queries == 2);  // a, and b's successful first allocation
}

TEST_CASE("kv cache hash_lru: a shared system prompt hits floor(S/B)*B tokens from the second request on") {
  // N = 5 requests of prompt P = 100 sharing S = 70, B = 16: the first misses, each later one
  // finds floor(70/16) = 4 blocks = 64 tokens.
  auto c = make_kv_cache(100, 16, 0, PrefixCaching::hash_lru);
  for (int i = 0; i < 5; ++i) {
    const Request r = req(i, 100, 70, 3);
    CHECK(c->cached_prefix_tokens(r) == (i == 0 ? 0 : 64));
    REQUIRE(c->allocate(r, 100));
    if (i % 2 == 1) c->release(r);  // finished or still running: the prefix is found either way
  }
  CHECK(c->stats().prefix_queries == 5);
  CHECK(c->stats().prefix_query_tokens == 500);
  CHECK(c->stats().prefix_hit_tokens == 4 * 64);
  // A whole-prompt share: the last prompt token is recomputed, so P = S = 64 finds 3 blocks, not 4.
  auto d = make_kv_cache(100, 16, 0, PrefixCaching::hash_lru);
  REQUIRE(d->allocate(req(0, 64, 64, 9), 64));
  CHECK(d->cached_prefix_tokens(req(1, 64, 64, 9)) == 48);
  CHECK(d->cached_prefix_tokens(req(1, 65, 64, 9)) == 64);
  // Another group, or no group, finds nothing.
  CHECK(d->cached_prefix_tokens(req(2, 65, 64, 8)) == 0);
  CHECK(d->cached_prefix_tokens(req(3, 65, 64, -1)) == 0);
  // The shorter of two shared prefixes bounds the reuse.
  CHECK(d->cached_prefix_tokens(req(4, 100, 40, 9)) == 32);
}

TEST_CASE("kv cache hash_lru: two running requests of one group hold the prefix blocks once") {
  auto c = make_kv_cache(20, 16, 0, PrefixCaching::hash_lru);
  const Request a = req(0, 100, 64, 1), b = req(1, 100, 64, 1);
  REQUIRE(c->allocate(a, 100));  // 7 blocks: 4 shared, 2 full own, 1 partial
  REQUIRE(c->allocate(b, 100));  // 4 shared found, 3 new
  CHECK(c->blocks_of(a) == 7);
  CHECK(c->blocks_of(b) == 7);
  CHECK(c->used_blocks() == 10);
  CHECK(c->cached_blocks() == 0);
  c->release(a);  // the shared 4 stay with b; a's 2 full own blocks are cached, its partial freed
  CHECK(c->used_blocks() == 7);
  CHECK(c->cached_blocks() == 2);
  CHECK(free_blocks(*c) == 11);
  c->release(b);  // now the 4 shared and b's 2 full own blocks are cached too
  CHECK(c->used_blocks() == 0);
  CHECK(c->cached_blocks() == 8);
  CHECK(free_blocks(*c) == 12);
}

TEST_CASE("kv cache hash_lru: least recently freed blocks are evicted first; a failed allocation changes nothing") {
  // 4 blocks of 4 tokens. Requests of groups 1, 2, 3 with 8-token prompts all shared: 2 blocks each.
  auto c = make_kv_cache(4, 4, 0, PrefixCaching::hash_lru);
  const Request a = req(0, 8, 8, 1), b = req(1, 8, 8, 2), cc = req(2, 8, 8, 3);
  REQUIRE(c->allocate(a, 8));
  c->release(a);  // queue: (1,1) (1,0)  (a request's tail goes first)
  REQUIRE(c->allocate(b, 8));
  c->release(b);  // queue: (1,1) (1,0) (2,1) (2,0)
  CHECK(c->cached_blocks() == 4);
  REQUIRE(c->allocate(cc, 8));  // no free block: evicts (1,1) and (1,0)
  CHECK(c->stats().evicted_blocks == 2);
  CHECK(c->cached_prefix_tokens(req(9, 9, 8, 1)) == 0);
  CHECK(c->cached_prefix_tokens(req(9, 9, 8, 2)) == 8);

  // d (group 2, 9 tokens) would take the 2 cached group-2 blocks and need 1 more: none is left.
  const Request d = req(3, 9, 8, 2);
  const KvCacheStats before = c->stats();
  CHECK_FALSE(c->allocate(d, 9));
  CHECK(c->used_blocks() == 2);
  CHECK(c->cached_blocks() == 2);
  CHECK(c->blocks_of(d) == 0);
  CHECK(c->stats().prefix_queries == before.prefix_queries);
  CHECK(c->stats().prefix_hit_tokens == before.prefix_hit_tokens);
  CHECK(c->stats().evicted_blocks == before.evicted_blocks);

  c->release(cc);              // queue: (2,1) (2,0) (3,1) (3,0)
  REQUIRE(c->allocate(d, 9));  // takes (2,0) (2,1) out of the queue, evicts (3,1) for its third block
  CHECK(c->stats().prefix_hit_tokens == before.prefix_hit_tokens + 8);
  CHECK(c->stats().evicted_blocks == 3);
  CHECK(c->cached_prefix_tokens(req(9, 9, 8, 3)) == 4);  // (3,0) survives, (3,1) went
  CHECK(c->used_blocks() == 3);
  CHECK(c->cached_blocks() == 1);
  CHECK(free_blocks(*c) == 0);
}

TEST_CASE("kv cache hash_lru: a request preempted by recompute finds its own computed tokens again") {
  auto c = make_kv_cache(50, 16, 0, PrefixCaching::hash_lru);
  const Request r = req(7, 40, 20, 2);  // 1 shared block, then its own tokens
  REQUIRE(c->allocate(r, 40));
  for (std::int64_t t = 41; t <= 70; ++t) REQUIRE(c->allocate(r, t));  // 30 decode steps
  CHECK(c->blocks_of(r) == 5);                                         // ceil(70 / 16)
  c->release(r);  // preempted: the 4 full blocks (64 tokens) stay cached
  CHECK(c->cached_blocks() == 4);
  CHECK(c->cached_prefix_tokens(r) == 32);                      // the prompt alone: capped at 39 tokens
  CHECK(c->cached_prefix_tokens(r, 70) == 64);                  // its whole context: 4 blocks
  CHECK(c->cached_prefix_tokens(r, 64) == 48);                  // a context ending on a block edge recomputes it
  CHECK(c->cached_prefix_tokens(req(8, 70, 20, 2), 70) == 16);  // another request: the shared block only
  REQUIRE(c->allocate(r, 70));                                  // resumes: 64 found, 1 new block
  CHECK(c->stats().prefix_hit_tokens == 64);
  CHECK(c->stats().prefix_query_tokens == 40 + 70);
  CHECK(c->used_blocks() == 5);
  CHECK(c->cached_blocks() == 0);
}

TEST_CASE("kv cache: swap_out and swap_in move exactly the request's blocks and fail cleanly") {
  for (const PrefixCaching mode : {PrefixCaching::none, PrefixCaching::hash_lru, PrefixCaching::radix}) {
    CAPTURE(prefix_caching_names.name(mode));
    auto c = make_kv_cache(10, 16, 6, mode);
    const Request a = req(0, 80), b = req(1, 100);
    REQUIRE(c->allocate(a, 80));  // 5 blocks
    REQUIRE(c->allocate(b, 20));  // 2 blocks
    const auto out = c->swap_out(b);
    REQUIRE(out.has_value());
    CHECK(*out == 2);
    CHECK(c->used_host_blocks() == 2);
    CHECK(c->blocks_of(b) == 0);
    CHECK_FALSE(c->swap_out(a).has_value());  // 5 do not fit in the 4 host blocks left
    CHECK(c->blocks_of(a) == 5);
    CHECK(c->used_host_blocks() == 2);
    CHECK(c->used_blocks() == 5);
    REQUIRE(c->allocate(req(2, 80), 80));  // 5 more: the GPU is full (a 5, c 5)
    CHECK_FALSE(c->swap_in(b).has_value());
    CHECK(c->used_host_blocks() == 2);
    c->release(a);
    const auto back = c->swap_in(b);
    REQUIRE(back.has_value());
    CHECK(*back == 2);
    CHECK(c->blocks_of(b) == 2);
    CHECK(c->used_host_blocks() == 0);
    CHECK(c->allocate(b, 33));  // grows as before: a third block
    CHECK(c->blocks_of(b) == 3);
    CHECK(c->used_blocks() + c->cached_blocks() + free_blocks(*c) == 10);
  }
}

TEST_CASE("kv cache: make_kv_cache rejects impossible sizes") {
  CHECK_THROWS_AS(make_kv_cache(-1, 16, 0, PrefixCaching::none), std::invalid_argument);
  CHECK_THROWS_AS(make_kv_cache(10, 0, 0, PrefixCaching::hash_lru), std::invalid_argument);
  CHECK_THROWS_AS(make_kv_cache(10, 16, -1, PrefixCaching::radix), std::invalid_argument);
}
