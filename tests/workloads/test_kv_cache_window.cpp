// The paged KV cache with sliding-window layers (kv_cache.hpp KvWindow, vLLM's hybrid KV cache
// manager) in all three modes, against hand-worked block counts: the windowed pages a request
// holds, pages before the window freed at the next allocation, an allocation that fails by one
// block, prefix hits decided by the full-attention pages, and swapping; and the three modes
// against a plain model of the rules over random traffic with nothing shared.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "kv_requests.hpp"
#include "sim/random.hpp"
#include "workloads/kv_cache.hpp"

using namespace ctwin;

namespace {

Request req(std::int64_t id, std::int32_t prompt, std::int32_t shared = 0, std::int64_t group = -1) {
  return test::kv_request(id, prompt, shared, group);
}

constexpr PrefixCaching kModes[] = {PrefixCaching::none, PrefixCaching::hash_lru, PrefixCaching::radix};

// Block size 16, a window of 32 tokens (two pages), one pool block a windowed page.
constexpr KvWindow kWindow{32, 1};

// window_blocks's closed form reckoned in integers, the share a fraction num / den: an account
// of the rule independent of the cache's floating-point one.
std::int64_t model_window(std::int64_t w, int bs, std::int64_t num, std::int64_t den, std::int64_t computed,
                          std::int64_t tokens) {
  const std::int64_t pages = (tokens + bs - 1) / bs - std::max<std::int64_t>(0, computed - w + 1) / bs;
  return (num * std::max<std::int64_t>(0, pages) + den - 1) / den;
}

// With nothing shared and no request resumed after its release, no mode finds anything, so each
// request holds ceil(tokens / bs) full pages and its window's blocks, and the room for more is
// the pool less the blocks held (cached blocks are evictable).
struct WindowModel {
  struct Seq {
    std::int64_t tokens = 0, blocks = 0, host = 0;  // blocks: GPU blocks, the window's included
  };
  std::int64_t pool, host_capacity, w, num, den;
  int bs;
  std::map<std::int64_t, Seq> seqs;
  std::int64_t used = 0, host_used = 0;

  bool allocate(std::int64_t id, std::int64_t tokens) {
    Seq& s = seqs[id];  // tokens always grow here, so a failed first call leaves an empty Seq
    const std::int64_t need = (tokens + bs - 1) / bs + model_window(w, bs, num, den, s.tokens, tokens) - s.blocks;
    if (used + need > pool) {
      if (s.tokens == 0) seqs.erase(id);
      return false;
    }
    used += need;
    s.blocks += need;
    s.tokens = tokens;
    return true;
  }
  void release(std::int64_t id) {
    used -= seqs[id].blocks;
    seqs.erase(id);
  }
  std::optional<std::int64_t> swap_out(std::int64_t id) {
    Seq& s = seqs.at(id);
    if (host_used + s.blocks > host_capacity) return std::nullopt;
    s.host = s.blocks;
    host_used += s.host;
    used -= s.blocks;
    s.blocks = 0;
    return s.host;
  }
  std::optional<std::int64_t> swap_in(std::int64_t id) {
    Seq& s = seqs.at(id);
    if (used + s.host > pool) return std::nullopt;
    s.blocks = s.host;
    used += s.host;
    host_used -= s.host;
    s.host = 0;
    return s.blocks;
  }
};

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

  TEST_CASE("windowed blocks evict cached pages as full pages do: free blocks first, then least recently used") {
    // Pool 8. a (48 tokens): 3 full pages, 3 windowed; released, its 3 full pages stay cached
    // and 5 blocks are free. b (48 tokens, its own pages): 6 blocks, 5 free ones and 1 evicted.
    auto h = make_kv_cache(8, 16, 0, PrefixCaching::hash_lru, {}, kWindow);
    const Request a = req(0, 48), b = req(1, 48);
    REQUIRE(h->allocate(a, 48));
    h->release(a);
    CHECK(h->cached_blocks() == 3);
    CHECK(h->cached_prefix_tokens(a, 64) == 48);  // a 64-token context looks at pages 0..2
    REQUIRE(h->allocate(b, 48));
    CHECK(h->used_blocks() == 6);
    // hash_lru evicts a's tail first (a request is unreferenced last page first): pages 0 and 1
    // stay, 32 tokens found.
    CHECK(h->stats().evicted_blocks == 1);
    CHECK(h->cached_blocks() == 2);
    CHECK(h->cached_prefix_tokens(a, 64) == 32);
    // radix keeps a's three pages as one node (one owner), so the one page needed evicts all three.
    auto x = make_kv_cache(8, 16, 0, PrefixCaching::radix, {}, kWindow);
    REQUIRE(x->allocate(a, 48));
    x->release(a);
    REQUIRE(x->allocate(b, 48));
    CHECK(x->used_blocks() == 6);
    CHECK(x->stats().evicted_blocks == 3);
    CHECK(x->cached_blocks() == 0);
    CHECK(x->cached_prefix_tokens(a, 64) == 0);
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
      // Released while swapped out, it has nothing on the GPUs to give back: 8 blocks out, 0 used.
      const Request b = req(1, 64);
      REQUIRE(c->allocate(b, 64));
      REQUIRE(c->allocate(b, 65));
      CHECK(c->swap_out(b) == std::optional<std::int64_t>{8});
      c->release(b);
      CHECK(c->used_blocks() == 0);
    }
  }

  TEST_CASE("none, hash_lru and radix agree with a plain model of the window over random traffic, nothing shared") {
    struct Share {
      double blocks_per_page;
      std::int64_t num, den;
    };
    const Share shares[] = {{1, 1, 1}, {2, 2, 1}, {0.5, 1, 2}, {1.5, 3, 2}};
    for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
      CAPTURE(seed);
      const int bs = 1 + static_cast<int>(mix64(seed) % 4);
      const auto wtokens = 1 + static_cast<std::int64_t>(mix64(seed + 7) % 12);
      const Share share = shares[mix64(seed + 13) % 4];
      const auto pool = 20 + static_cast<std::int64_t>(mix64(seed + 99) % 30);
      const KvWindow window{wtokens, share.blocks_per_page};
      CAPTURE(bs);
      CAPTURE(wtokens);
      CAPTURE(share.blocks_per_page);
      CAPTURE(pool);
      std::unique_ptr<PrefixKvCache> caches[3];
      for (std::size_t m = 0; m < 3; ++m) caches[m] = make_kv_cache(pool, bs, 16, kModes[m], {}, window);
      WindowModel model{pool, 16, wtokens, share.num, share.den, bs, {}, 0, 0};
      std::vector<Request> known;
      std::vector<std::int64_t> live;  // made and not released: a released request never comes back
      std::int64_t ok = 0, failed = 0, shrunk = 0;
      for (std::uint64_t step = 0; step < 3000; ++step) {
        const auto u = [&](std::uint64_t purpose, std::uint64_t n) {
          return mix64(seed * 1000003 + step * 17 + purpose) % n;
        };
        const auto op = u(0, 10);
        if (live.empty() || op < 2) {
          known.push_back(req(static_cast<std::int64_t>(known.size()), 1 + static_cast<std::int32_t>(u(1, 24))));
          live.push_back(known.back().id);
        }
        const auto slot = static_cast<std::size_t>(u(4, live.size()));
        const Request& r = known[static_cast<std::size_t>(live[slot])];
        CAPTURE(step);
        CAPTURE(r.id);
        const auto it = model.seqs.find(r.id);
        const bool held = it != model.seqs.end();
        const bool swapped = held && it->second.host > 0;
        if (op < 6 && !swapped) {  // grow by a chunk of 1 to 8 tokens
          const std::int64_t before = held ? it->second.tokens : 0;
          const std::int64_t window_before = held ? it->second.blocks - (before + bs - 1) / bs : 0;
          const std::int64_t tokens = before + 1 + static_cast<std::int64_t>(u(5, 8));
          const bool want = model.allocate(r.id, tokens);
          for (auto& c : caches) CHECK(c->allocate(r, tokens) == want);
          ok += want;
          failed += !want;
          if (want && held) shrunk += model_window(wtokens, bs, share.num, share.den, before, tokens) < window_before;
        } else if (op < 8 || !held) {
          if (held) model.release(r.id);
          for (auto& c : caches) c->release(r);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(slot));
        } else if (swapped) {
          const auto want = model.swap_in(r.id);
          for (auto& c : caches) CHECK(c->swap_in(r) == want);
        } else {
          const auto want = model.swap_out(r.id);
          for (auto& c : caches) CHECK(c->swap_out(r) == want);
        }
        for (std::size_t m = 0; m < 3; ++m) {
          CAPTURE(static_cast<int>(kModes[m]));
          REQUIRE(caches[m]->used_blocks() == model.used);
          REQUIRE(caches[m]->used_host_blocks() == model.host_used);
          REQUIRE(caches[m]->used_blocks() + caches[m]->cached_blocks() <= pool);
          REQUIRE(caches[m]->stats().prefix_hit_tokens == 0);
          const auto s = model.seqs.find(r.id);
          CHECK(caches[m]->blocks_of(r) == (s == model.seqs.end() ? 0 : s->second.blocks));
        }
      }
      // The traffic exercised the window: growth that freed windowed blocks, and a pool run full.
      CHECK(ok > 300);
      CHECK(failed > 0);
      CHECK(shrunk > 0);
    }
  }
}
