#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "scenario.hpp"
#include "sim/error.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const ServingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;

namespace {

// The relative error of one serving validation case (its published figure and source are in the
// file and in docs/validation.md's serving table).
double case_error(const std::string& name) {
  const auto file = std::filesystem::path(CTWIN_SOURCE_DIR) / "scenarios" / "validation" / (name + ".json");
  const Scenario sc = load_scenario(file.string());
  REQUIRE(sc.validation.present());
  const ServingJob& job = serving_job(sc);
  const ServingReplicaRun run = run_serving_replica(job.deployment, job.scheduler, job.traffic);
  REQUIRE(run.capacity.refusal.empty());
  return (predicted_metric(sc, run.result) - sc.validation.published) / sc.validation.published;
}

// Issue 14, "Accuracy": every case within 15%, the mean absolute error within 8%, one set of
// per-GPU defaults (the shipped profiles); the FP8 offline set (AIConfigurator's) within 5% on
// average. The list is explicit so a case joins the bound only once reviewed and documented.
const char* const kLatencyCases[] = {
    "serving-t1-llama2-7b-h100-fp8-ttft", "serving-t1-llama2-7b-a100-fp16-ttft", "serving-t3-llama31-8b-h100-2qps-ttft",
    "serving-t3-llama31-8b-h100-2qps-itl", "serving-t4-llama31-8b-h100-16qps-ttft",
    "serving-t4-llama31-8b-h100-16qps-itl", "serving-t4-llama31-8b-h100-32qps-ttft",
    "serving-t4-llama31-8b-h100-32qps-itl", "serving-v1-llama3-8b-h200-batch8",
    // Concurrency 1 on Llama-3.3-70B FP8, TP2: batch-1 TTFT and TPOT.
    "serving-n1-llama33-70b-fp8-h100-tp2-c1-5000-500-ttft", "serving-n1-llama33-70b-fp8-h100-tp2-c1-5000-500-itl",
    "serving-n1-llama33-70b-fp8-h100-tp2-c1-500-2000-ttft", "serving-n1-llama33-70b-fp8-h100-tp2-c1-500-2000-itl"};
const char* const kFp8OfflineCases[] = {
    "serving-t6-llama31-8b-fp8-h100-128-128", "serving-t6-llama31-8b-fp8-h100-128-2048",
    "serving-t6-llama31-8b-fp8-h100-2048-128", "serving-t6-llama31-8b-fp8-h100-2048-2048",
    "serving-t6-llama31-8b-fp8-h200-128-128", "serving-t6-llama31-8b-fp8-h200-128-2048",
    "serving-t6-llama31-8b-fp8-h200-2048-128", "serving-t6-llama31-8b-fp8-h200-2048-2048",
    // Llama-3.3-70B: TP2 on H100 (the TP all-reduce in every layer) and TP1 on H200.
    "serving-t7-llama33-70b-fp8-h100-tp2-128-128", "serving-t7-llama33-70b-fp8-h100-tp2-128-2048",
    "serving-t7-llama33-70b-fp8-h100-tp2-2048-128", "serving-t7-llama33-70b-fp8-h100-tp2-2048-2048",
    "serving-t7-llama33-70b-fp8-h200-128-128", "serving-t7-llama33-70b-fp8-h200-128-2048",
    "serving-t7-llama33-70b-fp8-h200-2048-128", "serving-t7-llama33-70b-fp8-h200-2048-2048"};
const char* const kA100OfflineCases[] = {"serving-t8-llama31-8b-a100-128-128", "serving-t8-llama31-8b-a100-128-2048",
                                         "serving-t8-llama31-8b-a100-2048-128", "serving-t8-llama31-8b-a100-2048-2048"};

}  // namespace

TEST_CASE("serving validation: every case is within 15% of its published figure, the mean within 8%") {
  double sum = 0;
  int n = 0;
  auto run = [&](const char* name) {
    const double err = case_error(name);
    CAPTURE(name);
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.15);
    sum += std::fabs(err);
    ++n;
  };
  for (const char* name : kLatencyCases) run(name);
  for (const char* name : kFp8OfflineCases) run(name);
  for (const char* name : kA100OfflineCases) run(name);
  CHECK(n >= 6);
  CHECK(sum / n <= 0.08);
}

TEST_CASE("serving validation: offline FP8 throughput on H100 and H200 within 5% on average") {
  double sum = 0;
  int n = 0;
  for (const char* name : kFp8OfflineCases) {
    const double err = case_error(name);
    CAPTURE(name);
    CAPTURE(err);
    sum += std::fabs(err);
    ++n;
  }
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
