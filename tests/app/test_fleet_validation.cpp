// Issue 18, "Accuracy": fleet and disaggregated serving cases against published figures
// (docs/validation.md, "Serving fleets (issue 18)"), and the fleet metrics `ctwin validate` reads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "serving_fleet.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const ServingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

std::filesystem::path validation_dir() {
  return std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation";
}

// Every fleet-*.json of scenarios/validation (a case outside the band goes to open/ with its
// reason, docs/validation.md).
std::vector<std::string> fleet_cases() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(validation_dir())) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".json" && stem.rfind("fleet-", 0) == 0) names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// As `ctwin validate` runs a case: the scenario's whole job (one replica, a data-parallel fleet
// or both disaggregated pools) through run_serving_job.
double case_error(const std::string& name) {
  const Scenario sc = load_scenario((validation_dir() / (name + ".json")).string());
  REQUIRE(sc.validation.present());
  const ServingFleetRun run = run_serving_job(serving_job(sc), {}, 1);
  REQUIRE(run.run.capacity.refusal.empty());
  return (predicted_metric(sc, run.run.result) - sc.validation.published) / sc.validation.published;
}

Scenario fleet_scenario(const std::string& serving, const std::string& traffic, const std::string& metric) {
  return parse_scenario(R"({"name": "x", "kind": "serving", "cluster": {"preset": "dgx-a100", "nodes": 1},
    "model": "opt-13b", "serving": )" +
                            serving + R"(, "traffic": )" + traffic + R"(, "validation": {"source": "s", "metric": ")" +
                            metric + R"(", "published": 1}})",
                        "t.json");
}

}  // namespace

// The gate: issue 18 asks the mean error at most 15%. Each case is also bound at 25%: the
// DistServe cases are engine-level anchors of its deployments (its authors' fitted A100 profiles), priced
// with the shipped A100 defaults that were fitted to other engines (TRT-LLM, newer vLLM), so a
// gap of ~20% to the 2024 vLLM fork is expected and documented; 25% still catches a broken fleet
// mechanism (a pool at the wrong TP, a KV transfer or a request overhead lost or doubled).
TEST_CASE("fleet validation: every case within 25% of its published figure, the mean within 15%") {
  double sum = 0;
  int n = 0;
  for (const std::string& name : fleet_cases()) {
    const double err = case_error(name);
    CAPTURE(name);
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.25);
    sum += std::fabs(err);
    ++n;
  }
  // docs/validation.md's fleet table: DistServe's six engine anchors, Splitwise's six TP2 phase
  // times and Mooncake's two cache ratios (S-LoRA's, SGLang's and llm-d's cases are in open/, with why).
  CHECK(n >= 14);
  CHECK(sum / n <= 0.15);
}

// Splitwise (Patel et al., ISCA 2024): the authors' prompt- and token-phase profile of
// Llama-2-70B on DGX-A100 and DGX-H100 (Mutinifni/splitwise-sim @378088013a54 data/perf_model.csv),
// TP2, one request: e.g. A100 prompt 512 in 196.65 ms, token 54.84 ms; H100 83.86 ms and 37.00 ms.
// Held at the main set's 10%, not the DistServe anchors' 25%. Its TP4/TP8 rows are open (a host-bound
// decode floor of its 2023 engine, docs/validation.md).
TEST_CASE("fleet validation: Splitwise's TP2 prompt and token phase times on A100 and H100 within 10%") {
  int n = 0;
  for (const std::string& name : fleet_cases()) {
    if (name.rfind("fleet-splitwise-", 0) != 0) continue;
    const double err = case_error(name);
    CAPTURE(name);
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.10);
    ++n;
  }
  CHECK(n == 6);
}

TEST_CASE(
    "fleet validation: goodput per GPU divides by both disaggregated pools' GPUs; attainment and prefix hits "
    "are the result's") {
  const std::string traffic =
      R"({"arrival": {"process": "offline"}, "requests": 1, "input_tokens": {"dist": "fixed", "value": 8},
          "output_tokens": {"dist": "fixed", "value": 2}})";
  ServingResult r;
  r.goodput_requests_per_s = 6;
  r.slo_attainment = 0.7;
  r.prefix_hit_rate = 0.4;
  // 2 prefill replicas of TP2 + 1 decode replica of TP1: 5 GPUs.
  const Scenario dis = fleet_scenario(R"({"disaggregation": {"prefill_replicas": 2, "prefill_tensor_parallel_size": 2,
      "decode_replicas": 1, "decode_tensor_parallel_size": 1}})",
                                      traffic, "goodput_requests_per_s_per_gpu");
  CHECK(predicted_metric(dis, r) == rel_approx(6.0 / 5, 1e-12));
  // 3 aggregated replicas of TP2: 6 GPUs.
  const Scenario agg = fleet_scenario(R"({"tensor_parallel_size": 2, "data_parallel_size": 3})", traffic,
                                      "goodput_requests_per_s_per_gpu");
  CHECK(predicted_metric(agg, r) == rel_approx(6.0 / 6, 1e-12));
  CHECK(predicted_metric(fleet_scenario("{}", traffic, "slo_attainment"), r) == rel_approx(0.7, 1e-12));
  CHECK(predicted_metric(fleet_scenario("{}", traffic, "prefix_hit_rate"), r) == rel_approx(0.4, 1e-12));
}

TEST_CASE("fleet validation: a fleet's and a disaggregated run's attainment count rejected requests") {
  // Prompts of 8 or 3000 tokens against max_model_len 2048 (OPT's): the long ones are rejected.
  // No SLO (the default class), so every completed request meets it and attainment is
  // completed / (completed + rejected), what DistServe counts (every request sent).
  const std::string traffic =
      R"({"arrival": {"process": "poisson", "rate_per_s": 50}, "requests": 40,
          "input_tokens": {"dist": "empirical", "values": [8, 3000]}, "output_tokens": {"dist": "fixed", "value": 4}})";
  for (const char* serving :
       {R"({"data_parallel_size": 2})", R"({"disaggregation": {"prefill_replicas": 1, "decode_replicas": 1}})"}) {
    CAPTURE(serving);
    const Scenario sc = fleet_scenario(serving, traffic, "slo_attainment");
    const ServingResult r = run_serving_job(serving_job(sc), {}, 1).run.result;
    REQUIRE(r.rejected_requests > 0);
    REQUIRE(r.completed_requests > 0);
    CHECK(predicted_metric(sc, r) == rel_approx(static_cast<double>(r.completed_requests) /
                                                    static_cast<double>(r.completed_requests + r.rejected_requests),
                                                1e-12));
  }
}
