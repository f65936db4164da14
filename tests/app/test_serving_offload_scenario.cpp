// The shipped KV offloading scenario (scenarios/serving-kv-offload-chat.json, docs/serving.md):
// 400 chat sessions on one H100 whose conversations outgrow its HBM. With a host tier large
// enough never to evict, the replica finds what an unbounded cache finds: checked against an
// independent replay of the same requests, one after another, through a cache with room for all.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_traffic.hpp"

namespace ctwin {
namespace {

nlohmann::json run_json(const std::string& args) {
  const auto r = test::cli("run " + args + " --json");
  CAPTURE(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("serving scenarios shipped: a host tier that never evicts finds what an unbounded cache finds") {
  const std::string file = test::source_dir() + "/scenarios/serving-kv-offload-chat.json";
  const auto on = run_json(file);
  const auto& o = on.at("kv_cache").at("offload");
  REQUIRE(o.at("evicted_pages").get<long long>() == 0);
  // The replay: every request of the same stream, its prompt then its output allocated and
  // released before the next, in a hash_lru cache of 2^22 blocks (nothing is ever evicted).
  const Scenario sc = load_scenario(file);
  const auto source = make_traffic(serving_job(sc).traffic);
  auto cache = make_kv_cache(1 << 22, 16, 0, PrefixCaching::hash_lru);
  while (source->next_arrival()) {
    const Request r = source->pop();
    REQUIRE(cache->allocate(r, r.prompt_tokens));
    REQUIRE(cache->allocate(r, r.prompt_tokens + r.output_tokens - 1));
    cache->release(r);
  }
  const double unbounded =
      static_cast<double>(cache->stats().prefix_hit_tokens) / static_cast<double>(cache->stats().prefix_query_tokens);
  CAPTURE(unbounded);
  // Within 2%: the replica runs requests side by side (a turn may arrive before its session's
  // previous one is done), the replay one at a time.
  CHECK(on.at("kv_cache").at("prefix_hit_rate").get<double>() == test::rel_approx(unbounded, 0.02));
  // The GPUs alone hold a small part of it; with the tier most hits come from host memory.
  const auto off = run_json(file + " --set /serving/kv_offloading_size=0");
  CHECK(off.at("kv_cache").at("prefix_hit_rate").get<double>() < 0.25 * unbounded);
  CHECK(o.at("hit_rate").get<double>() > 0.5 * unbounded);
}

}  // namespace ctwin
