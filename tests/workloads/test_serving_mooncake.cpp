// Per-block prefix hashes (Request::prefix_blocks, the Mooncake traces' hash_ids) in the KV caches
// and the prefix-aware router against hand-worked cases; the Mooncake JSONL reader line by line;
// and the caches replaying the shipped traces against an independent replay that builds the
// prefix chains itself (a trie of the ids) and counts reusable prompt pages.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim/error.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_router.hpp"
#include "workloads/serving_traffic.hpp"
#include "workloads/serving_traffic_params.hpp"

using namespace ctwin;
using ctwin::test::abs_approx;
using ctwin::test::rel_approx;

namespace {

// A request naming its prompt blocks by `ids` (kept alive by the caller), 512 tokens a block.
Request hashed(std::int64_t id, std::int32_t prompt, const std::vector<std::uint64_t>& ids,
               std::int32_t block_tokens = 512) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = 8;
  r.prefix_blocks = ids.data();
  r.prefix_block_count = static_cast<std::int32_t>(ids.size());
  r.prefix_block_tokens = block_tokens;
  return r;
}

constexpr PrefixCaching kModes[] = {PrefixCaching::hash_lru, PrefixCaching::radix};

std::string mooncake_error(const std::string& text) {
  try {
    (void)parse_mooncake_trace(text, "t.jsonl", 512);
  } catch (const InputError& e) {
    CHECK(e.file == "t.jsonl");
    return e.path;
  }
  return "(none)";
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The independent replay: an unbounded cache of (chain, page) where a chain is the sequence of
// ids up to a hash block, interned through a trie (so nothing assumes the ids are chain hashes).
// A page of `bs` tokens is reusable when it lies wholly inside the prompt and inside a named
// block, and every page before it was reusable; the last prompt token is always recomputed (at
// most (L - 1) / bs pages), as the serving engines do. Returns (hit tokens, prompt tokens).
std::pair<std::int64_t, std::int64_t> replay_pages(const MooncakeTrace& t, std::int64_t bs, std::size_t rows) {
  std::map<std::pair<std::int64_t, std::uint64_t>, std::int64_t> trie;  // (parent chain, id) -> chain
  std::set<std::pair<std::int64_t, std::int64_t>> seen;                 // (chain, page)
  std::int64_t hit = 0, total = 0;
  std::vector<std::int64_t> chain;
  for (std::size_t i = 0; i < rows; ++i) {
    const std::int64_t L = t.rows[i].context_tokens;
    const auto b0 = static_cast<std::size_t>(t.blocks.offsets[i]),
               b1 = static_cast<std::size_t>(t.blocks.offsets[i + 1]);
    chain.clear();
    std::int64_t parent = -1;
    for (std::size_t b = b0; b < b1; ++b) {
      auto [it, fresh] = trie.try_emplace({parent, t.blocks.ids[b]}, static_cast<std::int64_t>(trie.size()));
      parent = it->second;
      chain.push_back(parent);
    }
    const std::int64_t block = t.blocks.block_tokens;
    auto key = [&](std::int64_t j) -> std::pair<std::int64_t, std::int64_t> {
      const std::int64_t h = j * bs / block;
      if ((j + 1) * bs > L || h >= static_cast<std::int64_t>(chain.size())) return {-1, -1};
      return {chain[static_cast<std::size_t>(h)], j};
    };
    std::int64_t k = 0;
    while (k < (L - 1) / bs && key(k).first >= 0 && seen.count(key(k))) ++k;
    hit += k * bs;
    total += L;
    for (std::int64_t j = 0; key(j).first >= 0; ++j) seen.insert(key(j));
  }
  return {hit, total};
}

// The trace-level ratio the Mooncake README describes: a request reuses min(k * 512, L) tokens
// for its k leading blocks seen before (whole blocks, the last token not held back).
double replay_blocks(const MooncakeTrace& t) {
  std::set<std::pair<std::int64_t, std::uint64_t>> seen;  // (position, id): ids are chain hashes
  std::int64_t hit = 0, total = 0;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const std::int64_t L = t.rows[i].context_tokens;
    const std::int64_t n = t.blocks.offsets[i + 1] - t.blocks.offsets[i];
    const std::uint64_t* ids = t.blocks.ids.data() + t.blocks.offsets[i];
    std::int64_t k = 0;
    while (k < n && seen.count({k, ids[k]})) ++k;
    hit += std::min(k * t.blocks.block_tokens, L);
    total += L;
    for (std::int64_t b = 0; b < n; ++b) seen.insert({b, ids[b]});
  }
  return static_cast<double>(hit) / static_cast<double>(total);
}

// The cache replaying the first `rows` requests of t one at a time (allocate the prompt, release):
// hit tokens over prompt tokens from its stats.
std::pair<std::int64_t, std::int64_t> replay_cache(const MooncakeTrace& t, int bs, std::size_t rows, PrefixCaching mode,
                                                   std::int64_t num_blocks) {
  auto c = make_kv_cache(num_blocks, bs, 0, mode);
  for (std::size_t i = 0; i < rows; ++i) {
    Request r;
    r.id = static_cast<std::int64_t>(i);
    r.prompt_tokens = t.rows[i].context_tokens;
    r.output_tokens = 1;
    r.prefix_blocks = t.blocks.ids.data() + t.blocks.offsets[i];
    r.prefix_block_count = static_cast<std::int32_t>(t.blocks.offsets[i + 1] - t.blocks.offsets[i]);
    r.prefix_block_tokens = t.blocks.block_tokens;
    REQUIRE(c->allocate(r, r.prompt_tokens));
    c->release(r);
  }
  CHECK(c->stats().evicted_blocks == 0);
  return {c->stats().prefix_hit_tokens, c->stats().prefix_query_tokens};
}

MooncakeTrace shipped(const std::string& name) {
  const auto p = std::filesystem::path(test::source_dir()) / "scenarios/data/mooncake" / name;
  return parse_mooncake_trace(read_text(p), p.string(), 512);
}

}  // namespace

TEST_CASE("hash blocks: [1,2,3] then [1,2,9] at 512 tokens a block find exactly 2 x 512 tokens cached") {
  const std::vector<std::uint64_t> a_ids{1, 2, 3}, b_ids{1, 2, 9};
  for (const PrefixCaching mode : kModes) {
    CAPTURE(prefix_caching_names.name(mode));
    auto c = make_kv_cache(1000, 16, 0, mode);
    const Request a = hashed(0, 1536, a_ids), b = hashed(1, 1536, b_ids);
    REQUIRE(c->allocate(a, 1536));
    CHECK(c->cached_prefix_tokens(b) == 1024);  // while a holds its blocks
    c->release(a);
    CHECK(c->cached_prefix_tokens(b) == 1024);  // and after, from the cache
    REQUIRE(c->allocate(b, 1536));
    CHECK(c->stats().prefix_hit_tokens == 1024);
    CHECK(c->used_blocks() == 96);  // b: 64 pages found + 32 fresh; a's 96 pages stay cached
    // A third request with the first block only in common.
    const std::vector<std::uint64_t> c_ids{1, 7};
    CHECK(c->cached_prefix_tokens(hashed(2, 1024, c_ids)) == 512);
    // A different first id finds nothing, whatever follows (a chain breaks at its first block).
    const std::vector<std::uint64_t> d_ids{4, 2, 3};
    CHECK(c->cached_prefix_tokens(hashed(3, 1536, d_ids)) == 0);
  }
}

TEST_CASE("hash blocks: a prompt ending inside its last hash block shares only the pages wholly inside both prompts") {
  const std::vector<std::uint64_t> ids{1, 2};
  for (const PrefixCaching mode : kModes) {
    CAPTURE(prefix_caching_names.name(mode));
    {
      // A short prompt first: 600 tokens, block 2 holds 88 of them, pages 32..36 (up to token
      // 592) whole, page 37 (592..608) partial and a's own. b (1024 tokens, the same ids) finds
      // 32 + 5 = 37 pages = 592 tokens, not the 1023 its own limit would allow.
      auto c = make_kv_cache(1000, 16, 0, mode);
      REQUIRE(c->allocate(hashed(0, 600, ids), 600));
      c->release(hashed(0, 600, ids));
      CHECK(c->cached_prefix_tokens(hashed(1, 1024, ids)) == 592);
    }
    {
      // Output tokens are the request's own even inside a named block: a decodes to 700 tokens,
      // filling page 37 (592..608) with 8 prompt and 8 output tokens; b still finds 592.
      auto c = make_kv_cache(1000, 16, 0, mode);
      REQUIRE(c->allocate(hashed(0, 600, ids), 600));
      REQUIRE(c->allocate(hashed(0, 600, ids), 700));
      CHECK(c->cached_prefix_tokens(hashed(1, 1024, ids)) == 592);
    }
    {
      // The long prompt first: the short one finds its 37 whole pages (592 tokens; its limit is
      // (600 - 1) / 16 = 37 pages too).
      auto c = make_kv_cache(1000, 16, 0, mode);
      REQUIRE(c->allocate(hashed(0, 1024, ids), 1024));
      CHECK(c->cached_prefix_tokens(hashed(1, 600, ids)) == 592);
      // A prompt of exactly 1024 tokens holds its last token back: 63 pages.
      CHECK(c->cached_prefix_tokens(hashed(2, 1024, ids)) == 1008);
      // Tokens past the named blocks are the request's own: 1100 tokens, [1, 2] cover 1024.
      CHECK(c->cached_prefix_tokens(hashed(3, 1100, ids)) == 1024);
    }
  }
}

TEST_CASE("hash blocks: a block size that does not divide the hash block keys only pages inside one hash block") {
  // 512 % 48 != 0 (the loader refuses it; the caches stay safe): pages of 48 tokens, page 10
  // spans tokens 480..528 across blocks 0 and 1 and is the request's own, so the match stops
  // after 10 pages (480 tokens) whatever follows.
  const std::vector<std::uint64_t> ids{1, 2};
  for (const PrefixCaching mode : kModes) {
    CAPTURE(prefix_caching_names.name(mode));
    auto c = make_kv_cache(1000, 48, 0, mode);
    REQUIRE(c->allocate(hashed(0, 1024, ids), 1024));
    CHECK(c->cached_prefix_tokens(hashed(1, 1024, ids)) == 480);
  }
}

TEST_CASE("router prefix_aware: a request goes to the replica holding its hash-block prefix") {
  RouterSpec s{.policy = RouterPolicy::prefix_aware};
  s.cache_threshold = 0.5;
  s.balance_abs_threshold = 32;
  Router r(s, -1, 1);
  r.add_replica();
  r.add_replica();
  const std::vector<RouterReplicaView> v(2, {true, ReplicaLoad{}});
  const std::vector<std::uint64_t> a{1, 2, 3}, x{7, 8}, b{1, 2, 9}, y{7, 8, 5}, z{1, 6}, w{4};
  CHECK(r.route(hashed(0, 1536, a), v) == 0);  // nothing matches: the least loaded, the lower id
  CHECK(r.route(hashed(1, 1024, x), v) == 1);  // no match: the least loaded, {1, 0}
  CHECK(r.route(hashed(2, 1536, b), v) == 0);  // 1024 of 1536 on replica 0 > 0.5
  CHECK(r.route(hashed(3, 1400, y), v) == 1);  // 1024 of 1400 on replica 1
  CHECK(r.route(hashed(4, 1000, z), v) == 0);  // 512 of 1000 > 0.5 on replica 0
  // Matched where they went: 0 + 0 + 1024 + 1024 + 512.
  CHECK(r.stats().matched_tokens == 2560);
  CHECK(r.stats().cache_routed == 3);
  // A partial last block counts its tokens seen: a 600-token prompt [9, 10] then a 1024-token one.
  const std::vector<std::uint64_t> p{9, 10};
  Router q(s, -1, 1);
  q.add_replica();
  const std::vector<RouterReplicaView> one(1, {true, ReplicaLoad{}});
  q.route(hashed(0, 600, p), one);
  q.route(hashed(1, 1024, p), one);  // matches 512 + 88
  q.route(hashed(2, 1024, p), one);  // the second filled block 2: 1024
  q.route(hashed(3, 300, w), one);   // nothing
  CHECK(q.stats().matched_tokens == 600 + 1024);
}

TEST_CASE("mooncake trace reader: good lines parse exactly") {
  const std::string text =
      "{\"timestamp\": 27482, \"input_length\": 1100, \"output_length\": 52, \"hash_ids\": [46, 47, 2353]}\n"
      "{\"timestamp\": 30535.5, \"input_length\": 600, \"output_length\": 0, \"hash_ids\": [46, 48], \"x\": 1}\r\n"
      "{\"hash_ids\": [], \"output_length\": 7, \"input_length\": 1, \"timestamp\": 30535.5}\n";
  const MooncakeTrace t = parse_mooncake_trace(text, "t.jsonl", 512);
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[0].arrival == Time{});
  CHECK(t.rows[1].arrival == picoseconds(30535500000000 - 27482000000000));  // 3.0535 s exactly
  CHECK(t.rows[2].arrival == t.rows[1].arrival);
  CHECK(t.rows[0].context_tokens == 1100);
  CHECK(t.rows[0].generated_tokens == 52);
  CHECK(t.rows[1].generated_tokens == 0);
  CHECK(t.rows[2].context_tokens == 1);
  CHECK(t.blocks.ids == std::vector<std::uint64_t>{46, 47, 2353, 46, 48});
  CHECK(t.blocks.offsets == std::vector<std::int64_t>{0, 3, 5, 5});
  CHECK(t.blocks.block_tokens == 512);
  // Replayed: the requests point into the pool, output 0 generates 1.
  TrafficSpec s;
  s.arrival.process = ArrivalProcess::trace;
  s.arrival.trace = std::make_shared<const std::vector<TraceRow>>(t.rows);
  s.arrival.trace_blocks = std::make_shared<const PrefixBlockPool>(t.blocks);
  const auto src = make_traffic(s);
  const Request r0 = src->pop(), r1 = src->pop(), r2 = src->pop();
  CHECK(r0.prefix_block_count == 3);
  CHECK(r0.prefix_blocks[2] == 2353);
  CHECK(r0.prefix_block_tokens == 512);
  CHECK(r0.prefix_group == -1);
  CHECK(r1.prefix_block_count == 2);
  CHECK(r1.prefix_blocks[1] == 48);
  CHECK(r1.output_tokens == 1);
  CHECK(r2.prefix_block_count == 0);
  CHECK_FALSE(src->next_arrival());
}

TEST_CASE("mooncake trace reader: each kind of bad line is an error naming its line and field") {
  const std::string ok = "{\"timestamp\": 5, \"input_length\": 1024, \"output_length\": 3, \"hash_ids\": [1, 2]}\n";
  auto line2 = [&](const std::string& l) { return mooncake_error(ok + l + "\n"); };
  CHECK(mooncake_error("") == "line 1");
  CHECK(line2("not json") == "line 2");
  CHECK(line2("[1, 2]") == "line 2");
  CHECK(mooncake_error(ok + "\n" + ok) == "line 2");  // a blank line inside
  CHECK(line2(R"({"input_length": 1, "output_length": 1, "hash_ids": []})") == "line 2, field timestamp");
  CHECK(line2(R"({"timestamp": 4, "input_length": 1, "output_length": 1, "hash_ids": []})") ==
        "line 2, field timestamp");  // before the line above
  CHECK(line2(R"({"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []})") ==
        "line 2, field timestamp");
  CHECK(line2(R"({"timestamp": "9", "input_length": 1, "output_length": 1, "hash_ids": []})") ==
        "line 2, field timestamp");
  CHECK(line2(R"({"timestamp": 9e12, "input_length": 1, "output_length": 1, "hash_ids": []})") ==
        "line 2, field timestamp");
  CHECK(line2(R"({"timestamp": 9, "output_length": 1, "hash_ids": []})") == "line 2, field input_length");
  CHECK(line2(R"({"timestamp": 9, "input_length": 0, "output_length": 1, "hash_ids": []})") ==
        "line 2, field input_length");
  CHECK(line2(R"({"timestamp": 9, "input_length": 16777217, "output_length": 1, "hash_ids": []})") ==
        "line 2, field input_length");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1.5, "output_length": 1, "hash_ids": []})") ==
        "line 2, field input_length");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1, "output_length": -1, "hash_ids": []})") ==
        "line 2, field output_length");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1, "output_length": 1})") == "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1, "output_length": 1, "hash_ids": 3})") == "line 2, field hash_ids");
  // 513 tokens hold 2 blocks of 512: a third id is one too many; exactly 2 is fine.
  CHECK(line2(R"({"timestamp": 9, "input_length": 513, "output_length": 1, "hash_ids": [1, 2, 3]})") ==
        "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 513, "output_length": 1, "hash_ids": [1, 2]})") == "(none)");
  CHECK(line2(R"({"timestamp": 9, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]})") ==
        "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1024, "output_length": 1, "hash_ids": [1, 1]})") ==
        "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1024, "output_length": 1, "hash_ids": [1, -2]})") ==
        "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1024, "output_length": 1, "hash_ids": [1.5]})") ==
        "line 2, field hash_ids");
  CHECK(line2(R"({"timestamp": 9, "input_length": 1024, "output_length": 1, "hash_ids": [9007199254740992]})") ==
        "line 2, field hash_ids");  // 2^53
  // The message says what was found and what is expected.
  try {
    (void)parse_mooncake_trace(ok + R"({"timestamp": 9, "input_length": 0, "output_length": 1, "hash_ids": []})",
                               "t.jsonl", 512);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.problem == "found 0");
    CHECK(e.expected == "an integer from 1 to 16777216 (tokens)");
  }
}

TEST_CASE("traffic json: a mooncake_jsonl trace loads with its hashes; format keys checked") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ctwin-mooncake-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.jsonl") << "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 3, \"hash_ids\": "
                                    "[1, 2]}\n{\"timestamp\": 2000, \"input_length\": 700, \"output_length\": 3, "
                                    "\"hash_ids\": [1, 5]}\n";
  std::ofstream(dir / "bad.jsonl") << "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 3, \"hash_ids\": "
                                      "[1, 2]}\n{\"timestamp\": 1, \"input_length\": 0}\n";
  auto load = [&](const std::string& arrival, const std::string& extra = "") {
    const Json j = Json::parse(R"({"arrival": )" + arrival + extra + "}");
    return traffic_from_json(JsonObject(j, "/traffic", "s.json"), "s.json", dir);
  };
  auto error = [&](const std::string& arrival, const std::string& extra = "") -> std::pair<std::string, std::string> {
    try {
      (void)load(arrival, extra);
    } catch (const InputError& e) {
      return {e.path, e.problem};
    }
    return {"(none)", ""};
  };
  const TrafficSpec t =
      load(R"({"process": "trace", "format": "mooncake_jsonl", "file": "m.jsonl", "time_scale": 0.5})");
  REQUIRE(t.arrival.trace_blocks);
  CHECK(t.arrival.trace_blocks->block_tokens == 512);
  CHECK(t.arrival.trace_blocks->ids == std::vector<std::uint64_t>{1, 2, 1, 5});
  REQUIRE(t.arrival.trace->size() == 2);
  CHECK((*t.arrival.trace)[1].arrival == seconds(2.0));
  const TrafficSpec t256 =
      load(R"({"process": "trace", "format": "mooncake_jsonl", "file": "m.jsonl", "block_tokens": 256})");
  CHECK(t256.arrival.trace_blocks->block_tokens == 256);
  // The Azure default has no hashes.
  CHECK(error(R"({"process": "trace", "file": "m.jsonl"})").first == "/traffic/arrival/file");
  CHECK(error(R"({"process": "trace", "file": "m.csv", "block_tokens": 512})").first ==
        "/traffic/arrival/block_tokens");
  CHECK(error(R"({"process": "trace", "format": "parquet", "file": "m.jsonl"})").first == "/traffic/arrival/format");
  CHECK(error(R"({"process": "trace", "format": "mooncake_jsonl", "file": "m.jsonl", "block_tokens": 0})").first ==
        "/traffic/arrival/block_tokens");
  CHECK(error(R"({"process": "trace", "format": "mooncake_jsonl", "file": "m.jsonl"})",
              R"(, "prefix": {"shared_tokens": 64})")
            .first == "/traffic/prefix");
  const auto bad = error(R"({"process": "trace", "format": "mooncake_jsonl", "file": "bad.jsonl"})");
  CHECK(bad.first == "/traffic/arrival/file");
  CHECK(bad.second.find("line 2, field input_length") != std::string::npos);
  // block_tokens against the KV cache's block size.
  const Json j = Json::parse(R"({"arrival": {"process": "trace", "format": "mooncake_jsonl", "file": "m.jsonl"}})");
  const JsonObject traffic(j, "/traffic", "s.json");
  check_trace_block_tokens(t, traffic, 16, "/serving/block_size");  // 512 = 32 x 16
  try {
    check_trace_block_tokens(t, traffic, 48, "/serving/block_size");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.path == "/traffic/arrival/block_tokens");
    CHECK(e.problem == "found 512, not a multiple of /serving/block_size = 48");
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST_CASE("mooncake traces replayed through an unbounded cache: the independent page replay's hits exactly") {
  // The whole trace at pages of 512 tokens (one page a hash block), and the first rows at 16
  // (pages inside a block keyed by their offset): both caches count exactly the pages the
  // trie replay finds, an integer identity (no tolerance).
  for (const char* name : {"conversation_trace.jsonl", "synthetic_trace.jsonl"}) {
    CAPTURE(name);
    const MooncakeTrace t = shipped(name);
    for (const PrefixCaching mode : kModes) {
      CAPTURE(prefix_caching_names.name(mode));
      const auto want512 = replay_pages(t, 512, t.rows.size());
      const auto got512 = replay_cache(t, 512, t.rows.size(), mode, 1 << 18);
      CHECK(got512.first == want512.first);
      CHECK(got512.second == want512.second);
      const std::size_t rows = 400;
      const auto want16 = replay_pages(t, 16, rows);
      const auto got16 = replay_cache(t, 16, rows, mode, 1 << 21);
      CHECK(got16.first == want16.first);
      CHECK(got16.second == want16.second);
    }
  }
}

TEST_CASE("mooncake traces: the block-level reuse ratio of the release, and the page replay within a page a request") {
  // The trace-level ratio (leading blocks seen before, min(k * 512, L) tokens) is 37.36% and
  // 65.12% (computed over the released files; Mooncake's Table 2 cache ratio: 40%, 66%, which
  // its pooled cache with finite capacity reports over its own run). The engine's page replay
  // at 16 tokens a page differs only where a request's prompt ends inside a block or is wholly
  // cached (the last token recomputed): by less than one page plus the partial block per
  // request, so |page - block| <= requests * 512 / prompt tokens.
  for (const auto& named : {std::pair{"conversation_trace.jsonl", 0.37362}, {"synthetic_trace.jsonl", 0.65124}}) {
    const std::string name = named.first;
    const double want = named.second;
    CAPTURE(name);
    const MooncakeTrace t = shipped(name);
    const double blocks = replay_blocks(t);
    CHECK(blocks == abs_approx(want, 5e-6));
    const auto [hit, total] = replay_pages(t, 512, t.rows.size());
    const double pages = static_cast<double>(hit) / static_cast<double>(total);
    const double bound = static_cast<double>(t.rows.size()) * 512 / static_cast<double>(total);
    CHECK(pages <= blocks);
    CHECK(pages == abs_approx(blocks, bound));
  }
}
