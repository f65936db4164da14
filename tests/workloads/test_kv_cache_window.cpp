// The paged KV cache with sliding-window layers (kv_cache.hpp KvWindow, vLLM's hybrid KV cache
// manager) in all three modes, against hand-worked block counts: the windowed pages a request
// holds, pages before the window freed at the next allocation, an allocation that fails by one
// block, prefix hits decided by the full-attention pages, and swapping.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

#include "kv_requests.hpp"
#include "workloads/kv_cache.hpp"

using namespace ctwin;

namespace {

Request req(std::int64_t id, std::int32_t prompt, std::int32_t shared = 0, std::int64_t group = -1) {
  return test::kv_request(id, prompt, shared, group);
}

constexpr PrefixCaching kModes[] = {PrefixCaching::none, PrefixCaching::hash_lru, PrefixCaching::radix};

// Block size 16, a window of 32 tokens (two pages), one pool block a windowed page.
constexpr KvWindow kWindow{32, 1};

}  // namespace

TEST_SUITE("kv cache window") {
  TEST_CASE("window_blocks: the pages from the window's first to the last, times the share, rounded up") {
    const KvWindow w{128, 1};
    CHECK(window_blocks(w, 16, 0, 100) == 7);  // nothing computed: pages 0..6 of 100 tokens
    // 1,000 computed, one more: tokens before 1000 - 128 + 1 = 873 are out of every query's
    // window, so floor(873 / 16) = 54 pages are freed; ceil(1001 / 16) = 63 pages, 9 held.
    CHECK(window_blocks(w, 16, 1000, 1001) == 9);
    CHECK(window_blocks(w, 16, 127, 128) == 8);                     // 0 tokens out of the window yet
    CHECK(window_blocks(w, 16, 144, 145) == 9);                     // 17 out: page 0 is freed, pages 1..9 held
    CHECK(window_blocks(KvWindow{128, 5.2}, 16, 0, 100) == 37);     // ceil(5.2 x 7 = 36.4)
    CHECK(window_blocks(KvWindow{128, 0.5}, 16, 1000, 1001) == 5);  // ceil(4.5)
    CHECK(window_blocks(KvWindow{}, 16, 0, 100) == 0);
    CHECK(window_blocks(w, 16, 0, 0) == 0);
    CHECK_THROWS_AS(make_kv_cache(8, 16, 0, PrefixCaching::none, {}, KvWindow{-1, 1}), std::invalid_argument);
    CHECK_THROWS_AS(make_kv_cache(8, 16, 0, PrefixCaching::none, {}, KvWindow{32, -1}), std::invalid_argument);
  }

  TEST_CASE("a request fits only because the pages before its window are freed, and fails one block short") {
    for (const PrefixCaching mode : kModes) {
      CAPTURE(static_cast<int>(mode));
      // A 64-token prompt: 4 full pages, and 4 windowed ones (nothing computed before it, so
      // every page of the chunk is held): 8 blocks, the whole pool.
      auto c = make_kv_cache(8, 16, 0, mode, {}, kWindow);
      const Request a = req(0, 64);
      REQUIRE(c->allocate(a, 64));
      CHECK(c->used_blocks() == 8);
      CHECK(c->blocks_of(a) == 8);
      // Its first decode token (65): 5 full pages; 64 computed, so tokens before 64 - 32 + 1 = 33
      // are out of the window, pages 0 and 1 freed, pages 2..4 held: 5 + 3 = 8, still the pool.
      CHECK(c->allocate(a, 65));
      CHECK(c->used_blocks() == 8);
      // At 81 tokens: 6 full pages, pages 2..5 windowed (34 out: floor(34 / 16) = 2): 10 > 8.
      CHECK_FALSE(c->allocate(a, 81));
      CHECK(c->used_blocks() == 8);  // a failed allocation changes nothing
      c->release(a);
      CHECK(c->used_blocks() == 0);

      // The same at 9 blocks fails by one; at 10 it fits.
      for (const std::int64_t pool : {9, 10}) {
        auto d = make_kv_cache(pool, 16, 0, mode, {}, kWindow);
        REQUIRE(d->allocate(a, 64));
        REQUIRE(d->allocate(a, 65));
        CHECK(d->allocate(a, 81) == (pool == 10));
      }
    }
  }

  TEST_CASE("decoding token by token holds ceil(t / 16) full pages and the window's pages") {
    for (const PrefixCaching mode : kModes) {
      CAPTURE(static_cast<int>(mode));
      auto c = make_kv_cache(1000, 16, 0, mode, {}, kWindow);
      const Request a = req(0, 40);
      REQUIRE(c->allocate(a, 40));
      // 40 tokens at once: 3 full pages, 3 windowed.
      CHECK(c->used_blocks() == 6);
      for (std::int64_t t = 41; t <= 300; ++t) {
        REQUIRE(c->allocate(a, t));
        // Allocating t after t - 1: windowed pages from floor(max(0, t - 32) / 16) to the last.
        const std::int64_t full = (t + 15) / 16;
        const std::int64_t window = full - std::max<std::int64_t>(0, t - 32) / 16;
        CAPTURE(t);
        CHECK(c->used_blocks() == full + window);
        CHECK(c->blocks_of(a) == full + window);
      }
      c->release(a);
      CHECK(c->used_blocks() == 0);
      // Windowed blocks are never findable: only the 18 full pages (288 tokens) stay cached, as a
      // request's own full pages do, and nothing without prefix caching.
      CHECK(c->cached_blocks() == (mode == PrefixCaching::none ? 0 : 18));
    }
  }

  TEST_CASE("hash_lru and radix: a shared prefix hits the full pages; the window's pages are taken fresh") {
    for (const PrefixCaching mode : {PrefixCaching::hash_lru, PrefixCaching::radix}) {
      CAPTURE(static_cast<int>(mode));
      auto c = make_kv_cache(100, 16, 0, mode, {}, kWindow);
      const Request a = req(0, 100, 96, 7), b = req(1, 100, 96, 7);
      REQUIRE(c->allocate(a, 100));
      // a: 7 full pages and 7 windowed (nothing computed before its prefill).
      CHECK(c->used_blocks() == 14);
      // b finds a's 6 full shared pages (96 tokens), as without a window.
      CHECK(c->cached_prefix_tokens(b) == 96);
      REQUIRE(c->allocate(b, 100));
      // b: 1 fresh full page beside the 6 it shares; windowed pages from 96 computed: tokens before
      // 96 - 32 + 1 = 65 are out, floor(65 / 16) = 4 pages freed, pages 4..6 held: 3. In all
      // 14 + 1 + 3 = 18.
      CHECK(c->used_blocks() == 18);
      CHECK(c->blocks_of(b) == 7 + 3);
      CHECK(c->stats().prefix_hit_tokens == 96);
      c->release(a);
      c->release(b);
      CHECK(c->used_blocks() == 0);
      // Cached afterwards: the 6 full pages of the prefix. Each tail (tokens 96..99) is a partial
      // page, and no windowed page is ever findable, so 6 of the 18 blocks taken.
      CHECK(c->cached_blocks() == 6);
    }
  }

  TEST_CASE("swapping moves the windowed pages with the request") {
    for (const PrefixCaching mode : kModes) {
      CAPTURE(static_cast<int>(mode));
      auto c = make_kv_cache(20, 16, 20, mode, {}, kWindow);
      const Request a = req(0, 64);
      REQUIRE(c->allocate(a, 64));
      REQUIRE(c->allocate(a, 65));  // 5 full pages and 3 windowed (above)
      const auto out = c->swap_out(a);
      REQUIRE(out.has_value());
      CHECK(*out == 8);
      CHECK(c->used_host_blocks() == 8);
      CHECK(c->used_blocks() == 0);
      const auto in = c->swap_in(a);
      REQUIRE(in.has_value());
      CHECK(*in == 8);
      CHECK(c->used_blocks() == 8);
      CHECK(c->blocks_of(a) == 8);
      // Growing after the swap frees from the same window as before it.
      REQUIRE(c->allocate(a, 81));  // 6 full, pages 2..5 windowed
      CHECK(c->used_blocks() == 10);
      c->release(a);
      CHECK(c->used_blocks() == 0);
    }
  }
}
