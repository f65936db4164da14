// `ctwin bench serving`: the figures' structure only (timings are not checked by tests).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using namespace ctwin::test;

TEST_CASE("ctwin bench serving reports the fast loop, the reference, round-robin replicas, the fleet and memory") {
  const Run r = cli("bench serving --quick --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* part : {"fast", "reference", "round_robin"}) {
    CAPTURE(part);
    const auto& p = j.at(part);
    for (const char* key : {"wall_s", "cpu_s", "simulated_s", "simulated_s_per_wall_s", "iterations_per_s", "requests"})
      CHECK(p.contains(key));
    CHECK(p["simulated_s_per_wall_s"].get<double>() ==
          rel_approx(p["simulated_s"].get<double>() / p["wall_s"].get<double>(), 1e-9));
  }
  CHECK(j["ratio"].get<double>() == rel_approx(j["fast"]["simulated_s_per_wall_s"].get<double>() /
                                                   j["reference"]["simulated_s_per_wall_s"].get<double>(),
                                               1e-9));
  CHECK(j["fast_equals_reference"] == true);
  CHECK(j["round_robin"]["replicas"] == 4);
  CHECK(j["fast"].contains("rss_growth_mib"));
  CHECK(j["round_robin"]["stream_requests"] == j["round_robin"]["requests"]);
  // 4 replicas at 4 x 100/s for the quick 60 s: about 24,000 requests (Poisson, +-5 sigma).
  CHECK(j["round_robin"]["requests"].get<double>() == rel_approx(24000, 0.04));
  CHECK(j["memory"]["at_stable_load"].contains("rss_growth_ratio"));
  // The fleet case (--quick: 8 Llama-3-70B TP8 replicas at 8/128 of 500 requests/s for 40 s).
  const auto& fleet = j.at("fleet");
  CHECK(fleet["replicas"] == 8);
  CHECK(fleet["gpus"] == 64);
  CHECK(fleet["rate_per_s"].get<double>() == rel_approx(31.25, 1e-12));
  for (const char* part : {"fast", "fast_same_horizon", "reference"}) {
    CAPTURE(part);
    const auto& p = fleet.at(part);
    for (const char* key :
         {"wall_s", "cpu_s", "simulated_s", "requests", "simulated_requests_per_wall_s", "peak_rss_mib"})
      CHECK(p.contains(key));
    CHECK(p["simulated_requests_per_wall_s"].get<double>() ==
          rel_approx(p["requests"].get<double>() / p["wall_s"].get<double>(), 1e-9));
  }
  CHECK(fleet["fast_equals_reference"] == true);
  CHECK(fleet["independent_round_robin"]["horizon_s"].get<double>() == rel_approx(10, 1e-12));
  CHECK(fleet["independent_round_robin"].contains("coupled_over_independent_cpu"));
  // The same stream split another way: the same requests.
  CHECK(fleet["independent_round_robin"]["requests"] == fleet["fast_same_horizon"]["requests"]);
  CHECK(fleet["ratio"].get<double>() ==
        rel_approx(fleet["reference"]["wall_s"].get<double>() / fleet["fast_same_horizon"]["wall_s"].get<double>(),
                   1e-9));
  CHECK(fleet["fast"]["horizon_s"].get<double>() == rel_approx(40, 1e-12));
  CHECK(fleet["memory"]["short_horizon_s"].get<double>() == rel_approx(10, 1e-12));
  // Gamma arrivals of cv 2 at 31.25/s for 40 s: 1250 expected, count variance about cv^2 x 1250
  // (sd 71, 5.7%); +-5 sigma.
  CHECK(fleet["fast"]["requests"].get<double>() == rel_approx(1250, 0.29));
  const Run text = cli("bench serving --quick");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("round_robin") != std::string::npos);
}
