// `ctwin run` on a serving scenario: the report's keys (issue 14 lists the minimum; they are
// never renamed) and the relations between its figures, from the shipped scenario.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using ctwin::test::abs_approx;
using ctwin::test::cli;
using ctwin::test::rel_approx;
using nlohmann::json;

namespace {

json serving_json(const std::string& extra = "") {
  const auto r = cli("run " + ctwin::test::source_dir() + "/scenarios/serving-llama3-8b-h100.json --json " + extra);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("serving --json holds every key the issue names, and the figures agree with each other") {
  const json j = serving_json("--set /traffic/duration_s=120");
  CHECK(j.at("kind") == "serving");
  for (const char* k : {"ttft_s", "tpot_s", "e2e_s"}) {
    CAPTURE(k);
    const json& l = j.at(k);
    for (const char* q : {"p50", "p90", "p99", "mean"}) CHECK(l.at(q).is_number());
    // Percentiles are ordered, and the mean lies between the least and the greatest sample.
    CHECK(l.at("p50").get<double>() <= l.at("p90").get<double>());
    CHECK(l.at("p90").get<double>() <= l.at("p99").get<double>());
    CHECK(l.at("mean").get<double>() > 0);
  }
  const json& t = j.at("throughput");
  const json& req = j.at("requests");
  const double makespan = j.at("makespan_s");
  // Rates are the counts over the makespan.
  CHECK(t.at("requests_per_s").get<double>() == rel_approx(req.at("completed").get<double>() / makespan, 1e-9));
  CHECK(t.at("input_tokens_per_s").get<double>() == rel_approx(req.at("input_tokens").get<double>() / makespan, 1e-9));
  CHECK(t.at("output_tokens_per_s").get<double>() ==
        rel_approx(req.at("output_tokens").get<double>() / makespan, 1e-9));
  CHECK(t.at("output_tokens_per_s_per_gpu").get<double>() ==
        rel_approx(t.at("output_tokens_per_s").get<double>() / j.at("replica").at("gpus").get<double>(), 1e-12));
  CHECK(j.at("replica").at("gpus") == 1);
  CHECK(j.at("goodput_requests_per_s").get<double>() <= t.at("requests_per_s").get<double>());
  CHECK(j.at("slo_attainment").get<double>() >= 0);
  CHECK(j.at("slo_attainment").get<double>() <= 1);
  CHECK(j.at("kv_cache").at("peak_utilization").get<double>() > 0);
  CHECK(j.at("kv_cache").at("peak_utilization").get<double>() <= 1);
  CHECK(j.at("preemptions").is_number_integer());
  // The GPU's time parts add up to the makespan.
  double parts = 0;
  for (const auto& [k, v] : j.at("gpu_time_s").items()) parts += v.get<double>();
  CHECK(parts == rel_approx(makespan, 1e-6));
  // Poisson at 8/s for 120 s: about 960 arrivals (5 sigma = 155).
  CHECK(req.at("arrived").get<double>() == abs_approx(960, 155));  // requests
  // Per-token decode on an H100 reads 16 GB of weights at 3.35 TB/s x 0.85: TPOT at least 5.6 ms.
  CHECK(j.at("tpot_s").at("p50").get<double>() > 0.0056);
}

TEST_CASE("serving: the same scenario and seed give byte-identical reports; another seed differs") {
  const auto a = cli("run " + ctwin::test::source_dir() +
                     "/scenarios/serving-llama3-8b-h100.json --json --set /traffic/duration_s=60");
  const auto b = cli("run " + ctwin::test::source_dir() +
                     "/scenarios/serving-llama3-8b-h100.json --json --set /traffic/duration_s=60");
  const auto c = cli("run " + ctwin::test::source_dir() +
                     "/scenarios/serving-llama3-8b-h100.json --json --set /traffic/duration_s=60 --set /seed=7");
  REQUIRE(a.status == 0);
  CHECK(a.out == b.out);
  CHECK(a.out != c.out);
}

TEST_CASE("serving: a replica whose weights do not fit is refused with the reason (exit 3)") {
  const auto r = cli("run " + ctwin::test::source_dir() +
                     "/scenarios/serving-llama3-8b-h100.json --set /model=\"llama3-70b\" --set /traffic/duration_s=10");
  CHECK(r.status == 3);
  CHECK(r.err.find("the replica cannot run") != std::string::npos);
  CHECK(r.out.empty());
}
