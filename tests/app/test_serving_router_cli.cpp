// `ctwin run` on a routed fleet (/serving/router, /serving/pools, /serving/failures): the
// round-robin router gives the independent fleet's figures, the shipped prefix-vs-least-load pair
// shows what it was shipped to show, and the report's /fleet/pools and /fleet/router add up.
#include <cstdint>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"

namespace ctwin {
namespace {

nlohmann::json run_json(const std::string& args) {
  const auto r = test::cli("run " + args + " --json");
  CAPTURE(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

const std::string kPair = "scenarios/serving-router-prefix-vs-least-load";
const std::string kShort = " --set /traffic/duration_s=30";

}  // namespace

TEST_CASE("routed fleet: a round_robin router gives data_parallel_size's independent fleet figures") {
  const std::string base =
      "scenarios/serving-llama3-8b-h100.json --set /traffic/duration_s=20 --set "
      "/traffic/arrival/rate_per_s=24 --set /serving/data_parallel_size=3";
  const auto a = run_json(base);
  const auto b = run_json(base + " --set '/serving/router={\"policy\": \"round_robin\"}'");
  for (const char* k : {"ttft_s", "tpot_s", "e2e_s", "requests", "gpu_time_s", "makespan_s", "kv_cache"}) {
    CAPTURE(k);
    CHECK(a[k] == b[k]);
  }
  CHECK(b["fleet"]["router"]["routed"].size() == 3);
}

TEST_CASE("routed fleet: prefix_aware beats least_outstanding on hits and TTFT; the router's counts add up") {
  const auto pa = run_json(kPair + ".json" + kShort);
  const auto ll = run_json(kPair + "-least-load.json" + kShort);
  CHECK(pa["fleet"]["routing"] == "prefix_aware");
  CHECK(ll["fleet"]["routing"] == "least_outstanding");
  CHECK(pa["kv_cache"]["prefix_hit_rate"].get<double>() > ll["kv_cache"]["prefix_hit_rate"].get<double>() + 0.2);
  CHECK(pa["ttft_s"]["p50"].get<double>() < ll["ttft_s"]["p50"].get<double>());
  CHECK(pa["fleet"]["router"]["router_prefix_hit_rate"].get<double>() > 0);
  for (const auto* j : {&pa, &ll}) {
    std::int64_t routed = 0;
    for (const auto& n : (*j)["fleet"]["router"]["routed"]) routed += n.get<std::int64_t>();
    CHECK(routed == (*j)["requests"]["arrived"].get<std::int64_t>());
    CHECK((*j)["fleet"]["pools"].size() == 1);
    CHECK((*j)["fleet"]["pools"][0]["completed"] == (*j)["requests"]["completed"]);
  }
}

TEST_CASE("routed fleet: a crash with retry loses nothing, with lose it loses what the replica held") {
  const std::string crash = kPair + ".json" + kShort +
                            " --set '/serving/failures={\"events\": [{\"t_s\": 10, \"pool\": \"h100\", \"replica\": 3, "
                            "\"restart_s\": 5}]}'";
  const auto r = run_json(crash);
  CHECK(r["fleet"]["router"]["crashes"] == 1);
  CHECK(r["fleet"]["router"]["retried"].get<std::int64_t>() > 0);
  CHECK(r["fleet"]["router"]["lost"] == 0);
  CHECK(r["requests"]["completed"].get<std::int64_t>() + r["requests"]["rejected"].get<std::int64_t>() ==
        r["requests"]["arrived"].get<std::int64_t>());
  const auto l = run_json(crash + " --set /serving/failures/retry=lose");
  CHECK(l["fleet"]["router"]["lost"] == r["fleet"]["router"]["retried"]);
  CHECK(l["requests"]["completed"].get<std::int64_t>() + l["requests"]["rejected"].get<std::int64_t>() +
            l["fleet"]["router"]["lost"].get<std::int64_t>() ==
        l["requests"]["arrived"].get<std::int64_t>());
}

}  // namespace ctwin
