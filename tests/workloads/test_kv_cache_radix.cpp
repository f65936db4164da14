// The radix mode of the paged KV cache (SGLang's RadixAttention, workloads/kv_cache.hpp) against
// hand-worked trees: matches in whole pages, an edge split where two requests of one session
// diverge, whole unreferenced leaves evicted least recently used first, and the shared-prompt
// workload giving the hash_lru hits when the shared prefix is a whole number of pages.
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

TEST_CASE("kv cache radix: matches whole pages only") {
  // Pages of 4 tokens; a shared prefix of 10 tokens covers 2 whole pages (8 tokens), the third
  // page mixes shared and own tokens and is the request's own.
  auto c = make_kv_cache(20, 4, 0, PrefixCaching::radix);
  REQUIRE(c->allocate(req(0, 12, 10, 5), 12));
  CHECK(c->cached_prefix_tokens(req(1, 12, 10, 5)) == 8);
  CHECK(c->cached_prefix_tokens(req(1, 12, 6, 5)) == 4);  // a shorter share: 1 page
  CHECK(c->cached_prefix_tokens(req(1, 12, 3, 5)) == 0);  // less than a page
  CHECK(c->cached_prefix_tokens(req(1, 8, 8, 5)) == 4);   // the last prompt token is recomputed
}

TEST_CASE("kv cache radix: two requests of a session diverging split the edge") {
  // Page size 1 (SGLang's default). x shares 8 tokens of session 7, y only 6: y's match ends
  // inside x's 8-page edge, which splits into [0, 6) and [6, 8).
  auto c = make_kv_cache(40, 1, 0, PrefixCaching::radix);
  const Request x = req(0, 10, 8, 7), y = req(1, 10, 6, 7);
  REQUIRE(c->allocate(x, 10));
  CHECK(c->cached_prefix_tokens(y) == 6);
  REQUIRE(c->allocate(y, 10));
  CHECK(c->used_blocks() == 14);  // x's 10 and y's own 4
  CHECK(c->stats().prefix_hit_tokens == 6);
  // Both halves of the split edge are still found: a later turn sharing 8 finds all 8.
  CHECK(c->cached_prefix_tokens(req(2, 20, 8, 7)) == 8);
  c->release(x);
  c->release(y);
  CHECK(c->used_blocks() == 0);
  CHECK(c->cached_blocks() == 14);
  // Each request also finds its own tokens again (recompute preemption).
  CHECK(c->cached_prefix_tokens(x, 10) == 9);
  CHECK(c->cached_prefix_tokens(y, 11) == 10);
}

TEST_CASE("kv cache radix: unreferenced leaves are evicted whole, least recently used first") {
  // 10 pages of 1 token; requests of groups 1..4 with 4-token prompts, all shared.
  auto c = make_kv_cache(10, 1, 0, PrefixCaching::radix);
  const Request a = req(0, 4, 4, 1), b = req(1, 4, 4, 2), cc = req(2, 4, 4, 3), d = req(3, 4, 4, 2),
                e = req(4, 4, 4, 4);
  REQUIRE(c->allocate(a, 4));
  c->release(a);
  REQUIRE(c->allocate(b, 4));
  c->release(b);
  REQUIRE(c->allocate(cc, 4));  // 2 free: evicts group 1's leaf (least recent), all 4 pages
  CHECK(c->stats().evicted_blocks == 4);
  CHECK(c->cached_prefix_tokens(req(9, 5, 4, 1)) == 0);
  c->release(cc);
  REQUIRE(c->allocate(d, 4));  // finds 3 of group 2 (splitting its edge), then takes the tree's 4th
  CHECK(c->stats().prefix_hit_tokens == 3);
  CHECK(c->used_blocks() == 4);
  CHECK(c->cached_blocks() == 4);
  c->release(d);               // group 2 is now more recent than group 3
  REQUIRE(c->allocate(e, 4));  // 2 free: evicts group 3's leaf, all 4 pages
  CHECK(c->stats().evicted_blocks == 8);
  CHECK(c->cached_prefix_tokens(req(9, 5, 4, 3)) == 0);
  CHECK(c->cached_prefix_tokens(req(9, 5, 4, 2)) == 4);
  CHECK(c->used_blocks() == 4);
  CHECK(c->cached_blocks() == 4);
  CHECK(free_blocks(*c) == 2);
}

TEST_CASE("kv cache radix: a failed allocation changes nothing") {
  auto c = make_kv_cache(4, 4, 0, PrefixCaching::radix);
  REQUIRE(c->allocate(req(0, 8, 8, 1), 8));
  c->release(req(0, 8, 8, 1));
  REQUIRE(c->allocate(req(1, 8, 8, 2), 8));  // 2 cached (group 1), 2 used
  const Request d = req(2, 13, 8, 1);        // would take group 1's 2 pages and need 2 more
  CHECK_FALSE(c->allocate(d, 13));
  CHECK(c->used_blocks() == 2);
  CHECK(c->cached_blocks() == 2);
  CHECK(c->blocks_of(d) == 0);
  CHECK(c->stats().prefix_queries == 2);
  CHECK(c->stats().evicted_blocks == 0);
  CHECK(c->cached_prefix_tokens(d) == 8);
}

TEST_CASE("kv cache radix: a shared system prompt of whole pages gives the hash_lru hits") {
  // N = 6 requests, P = 100, S = 64, B = 16: 5 * 64 hit tokens in both modes; the pool counts
  // agree after every step.
  auto h = make_kv_cache(60, 16, 0, PrefixCaching::hash_lru);
  auto x = make_kv_cache(60, 16, 0, PrefixCaching::radix);
  for (int i = 0; i < 6; ++i) {
    const Request r = req(i, 100, 64, 4);
    CHECK(x->cached_prefix_tokens(r) == h->cached_prefix_tokens(r));
    REQUIRE(h->allocate(r, 100));
    REQUIRE(x->allocate(r, 100));
    if (i % 3 == 2) {
      h->release(r);
      x->release(r);
    }
    CHECK(x->used_blocks() == h->used_blocks());
    CHECK(x->cached_blocks() == h->cached_blocks());
  }
  CHECK(h->stats().prefix_hit_tokens == 5 * 64);
  CHECK(x->stats().prefix_hit_tokens == 5 * 64);
  CHECK(x->stats().prefix_query_tokens == 600);
}
