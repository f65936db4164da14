// The shipped serving scenarios (scenarios/serving-*.json, docs/serving.md) run, account for every
// request, and show what each was shipped to show, checked against closed forms where one exists.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_traffic.hpp"

namespace ctwin {
namespace {

nlohmann::json run_json(const std::string& scenario) {
  const auto r = test::cli("run " + scenario + " --json");
  CAPTURE(scenario);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("serving scenarios shipped: each runs and accounts for every request") {
  int n = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(ctwin::test::source_dir()) / "scenarios")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("serving-", 0) != 0) continue;
    ++n;
    const auto j = run_json("scenarios/" + name);
    CAPTURE(name);
    CHECK(j["kind"] == "serving");
    const auto& q = j["requests"];
    CHECK(q["completed"].get<std::int64_t>() + q["rejected"].get<std::int64_t>() == q["arrived"].get<std::int64_t>());
    CHECK(q["completed"].get<std::int64_t>() > 0);
    CHECK(j["ttft_s"]["p50"].get<double>() <= j["ttft_s"]["p99"].get<double>());
    CHECK(j["kv_cache"]["peak_utilization"].get<double>() <= 1.0);
  }
  CHECK(n >= 11);
}

TEST_CASE("serving scenarios shipped: the Azure-layout trace rejects exactly the rows beyond 8192 tokens") {
  // Independent count from the CSV: ContextTokens + GeneratedTokens > Llama-3-8B's 8192 context.
  std::ifstream csv(ctwin::test::source_dir() + "/scenarios/data/azure-conv-sample.csv");
  std::string line;
  std::getline(csv, line);  // header
  std::int64_t rows = 0, too_long = 0;
  while (std::getline(csv, line)) {
    std::istringstream fields(line);
    std::string stamp, ctx, gen;
    std::getline(fields, stamp, ',');
    std::getline(fields, ctx, ',');
    std::getline(fields, gen, ',');
    ++rows;
    if (std::stoll(ctx) + std::stoll(gen) > 8192) ++too_long;
  }
  REQUIRE(too_long > 0);
  const auto j = run_json("scenarios/serving-azure-trace.json");
  CHECK(j["requests"]["arrived"] == rows);
  CHECK(j["requests"]["rejected"] == too_long);
}

TEST_CASE("serving scenarios shipped: prefix caching hits the shared share of the prompt tokens") {
  // 90% of requests start with a 2000-token system prompt (125 full blocks of 16, all cacheable
  // after each group's first use); own input lognormal, median 300, sigma 0.8: mean
  // 300 exp(0.32) = 412.7. Hit share = 0.9 * 2000 / (0.9 * 2000 + 412.7) = 0.8135.
  const auto j = run_json("scenarios/serving-prefix-caching.json");
  const double expected = 0.9 * 2000 / (0.9 * 2000 + 300 * std::exp(0.8 * 0.8 / 2));
  CHECK(j["kv_cache"]["prefix_hit_rate"].get<double>() == test::rel_approx(expected, 0.02));
  const auto off = run_json("scenarios/serving-prefix-caching.json --set /serving/enable_prefix_caching=false");
  CHECK(off["kv_cache"]["prefix_hit_rate"].get<double>() == 0);
  CHECK(off["ttft_s"]["p50"].get<double>() > 10 * j["ttft_s"]["p50"].get<double>());
}

TEST_CASE("serving scenarios shipped: closed-loop throughput follows the interactive response-time law") {
  // N users with think time Z: X = N / (R + Z) (Little's law on the closed loop), R the mean
  // end-to-end latency. Edge effects of a 300 s run (the start together, the drain) stay within 5%.
  const auto j = run_json("scenarios/serving-closed-loop.json");
  const double r_s = j["e2e_s"]["mean"];
  CHECK(j["throughput"]["requests_per_s"].get<double>() == test::rel_approx(64 / (r_s + 2.0), 0.05));
}

TEST_CASE("serving scenarios shipped: speculative decoding and FP8 cut TPOT, chunked prefill its tail") {
  const auto spec_on = run_json("scenarios/serving-speculative-on.json");
  const auto spec_off = run_json("scenarios/serving-speculative-off.json");
  // k = 4 at 0.7 gives (1 - 0.7^5) / (1 - 0.7) = 2.77 tokens per target step: TPOT at most
  // 1 / 2.77 of the plain one plus the draft's and the wider verification's cost.
  const double gain = spec_off["tpot_s"]["p50"].get<double>() / spec_on["tpot_s"]["p50"].get<double>();
  CHECK(gain > 1.5);
  CHECK(gain < (1 - std::pow(0.7, 5)) / (1 - 0.7));
  const auto fp8 = run_json("scenarios/serving-llama3-70b-tp4-fp8.json");
  const auto bf16 = run_json("scenarios/serving-llama3-70b-tp4-bf16.json");
  CHECK(fp8["tpot_s"]["p50"].get<double>() < bf16["tpot_s"]["p50"].get<double>());
  // FP8 KV halves the bytes per block and weights take half as much: more than twice the blocks.
  CHECK(fp8["kv_cache"]["blocks"].get<double>() > 2 * bf16["kv_cache"]["blocks"].get<double>());
  const auto chunked = run_json("scenarios/serving-llama3-70b-tp8-chunked.json");
  const auto whole = run_json("scenarios/serving-llama3-70b-tp8-no-chunked.json");
  CHECK(chunked["tpot_s"]["p99"].get<double>() < whole["tpot_s"]["p99"].get<double>());
}

// serving-kv-offload-chat.json: 400 chat sessions on one H100 whose conversations outgrow its HBM.
// With a host tier large enough never to evict, the replica finds what an unbounded cache finds:
// checked against an independent replay of the same requests, one after another, through a cache
// with room for all.
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
