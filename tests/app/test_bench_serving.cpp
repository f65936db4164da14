// `ctwin bench serving`: the figures' structure only (timings are not checked by tests).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using namespace ctwin::test;

TEST_CASE("ctwin bench serving reports the fast loop, the reference, round-robin replicas and memory") {
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
  const Run text = cli("bench serving --quick");
  REQUIRE(text.status == 0);
  CHECK(text.out.find("round_robin") != std::string::npos);
}
