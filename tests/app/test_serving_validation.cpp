#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "sim/error.hpp"
#include "test_paths.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const ServingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;

namespace {

// The relative error of one serving validation case (its published figure and source are in the
// file and in docs/validation.md's serving table).
double case_error(const std::string& name) {
  const auto file = std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" / (name + ".json");
  const Scenario sc = load_scenario(file.string());
  REQUIRE(sc.validation.present());
  const ServingJob& job = serving_job(sc);
  const ServingReplicaRun run = run_serving_replica(job.deployment, job.scheduler, job.traffic);
  REQUIRE(run.capacity.refusal.empty());
  return (predicted_metric(sc, run.result) - sc.validation.published) / sc.validation.published;
}

// Issue 14, "Accuracy": every case within 15%, the mean absolute error within 8%, one set of
// per-GPU defaults (the shipped profiles); the FP8 offline set (AIConfigurator's: T6 and T7)
// within 5% on average. Every serving-*.json of scenarios/validation is bound (a case outside
// the band goes to scenarios/validation/open/ with its reason, docs/validation.md).
std::vector<std::string> serving_cases(const std::string& prefix = "serving-") {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(ctwin::test::source_dir()) /
                                                           "scenarios" / "validation")) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".json" && stem.rfind(prefix, 0) == 0) names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("serving validation: every case is within 15% of its published figure, the mean within 8%") {
  double sum = 0;
  int n = 0;
  for (const std::string& name : serving_cases()) {
    const double err = case_error(name);
    CAPTURE(name);
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.15);
    sum += std::fabs(err);
    ++n;
  }
  CHECK(n >= 50);  // the 51 cases of docs/validation.md
  CHECK(sum / n <= 0.08);
}

TEST_CASE("serving validation: offline FP8 throughput on H100 and H200 within 5% on average") {
  double sum = 0;
  int n = 0;
  for (const char* prefix : {"serving-t6-", "serving-t7-"}) {
    for (const std::string& name : serving_cases(prefix)) {
      const double err = case_error(name);
      CAPTURE(name);
      CAPTURE(err);
      sum += std::fabs(err);
      ++n;
    }
  }
  CHECK(n == 16);
  CHECK(sum / n <= 0.05);
}

TEST_CASE("serving validation: a serving metric on a training scenario is an input error naming /validation/metric") {
  const std::string text = R"({"name": "x", "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
    "training": {"micro_batch": 1, "global_batch": 8, "seq_len": 2048, "parallelism": {"dp": 8}},
    "validation": {"source": "s", "metric": "ttft_mean_s", "published": 1}})";
  try {
    (void)parse_scenario(text, "t.json");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/validation/metric") != std::string::npos);
  }
}
