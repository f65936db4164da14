// /serving/autoscaling and /serving/admission in a scenario: read into the ServingJob (the cold
// start's network bandwidth from the cluster), checked against the cluster and /traffic's
// classes, and run on the fleet simulation (gpu_utilization and scale to zero: test_serving_fleet_econ.cpp).
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "tolerance.hpp"

namespace ctwin {
namespace {

using nlohmann::json;
using test::check_input_error;
using test::cli;
using test::rel_approx;
using test::temp_dir;

// Llama-3-8B, TP 2, on one DGX H100 (8 GPUs, 50 GB/s NIC per GPU), two traffic classes.
json scenario() {
  return json::parse(R"({"name": "autoscale", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b", "serving": {"tensor_parallel_size": 2},
    "traffic": {"arrival": {"process": "poisson", "rate_per_s": 2}, "duration_s": 10,
                "input_tokens": {"dist": "fixed", "value": 100}, "output_tokens": {"dist": "fixed", "value": 20},
                "classes": [{"name": "chat"}, {"name": "batch", "priority": 1}]}})");
}

Scenario parse(const json& j) { return parse_scenario(j.dump(), "t.json"); }

// The JSON pointer of the InputError reading (or running) `j` throws; "" when none.
std::string error_path(const json& j) {
  try {
    serving_job(parse(j));
  } catch (const InputError& e) {
    return e.path;
  }
  return "";
}

}  // namespace

TEST_CASE("/serving/autoscaling and /serving/admission are read into the ServingJob") {
  json j = scenario();
  j["serving"]["autoscaling"] = {{"metric", "running_requests"}, {"target", 32}, {"max_replicas", 3}, {"warm_pool", 1}};
  j["serving"]["admission"] = {{"max_queued_requests", 64},
                               {"classes", {{{"class", "batch"}, {"shed_fraction", 0.25}}}}};
  const Scenario sc = parse(j);
  const auto& job = std::get<ServingJob>(sc.job);
  REQUIRE(job.autoscaling);
  CHECK(job.autoscaling->hpa.metric == AutoscaleMetric::running_requests);
  CHECK(job.autoscaling->hpa.max_replicas == 3);
  CHECK(job.autoscaling->warm_pool == 1);
  // Weights over the network: the replica's 2 GPUs x 50 GB/s of NIC.
  CHECK(job.autoscaling->start.network_bytes_per_s == rel_approx(100e9, 1e-12));
  REQUIRE(job.admission);
  CHECK(job.admission->max_queued == 64);
  REQUIRE(job.admission->classes.size() == 2);
  CHECK(job.admission->classes[1].shed_fraction == rel_approx(0.25, 1e-15));
  CHECK(job.admission->classes[0].shed_fraction == rel_approx(1, 1e-15));
}

TEST_CASE("/serving/autoscaling: the largest fleet and its warm pool must fit the cluster") {
  json j = scenario();
  // 3 + 1 replicas of 2 GPUs = 8 GPUs: fits one DGX; 3 + 2 = 10 does not.
  j["serving"]["autoscaling"] = {{"metric", "queue_length"}, {"target", 4}, {"max_replicas", 3}, {"warm_pool", 2}};
  CHECK(error_path(j) == "/serving/autoscaling/max_replicas");
  j["serving"]["autoscaling"]["max_replicas"] = 5;
  j["serving"]["autoscaling"]["warm_pool"] = 0;
  CHECK(error_path(j) == "/serving/autoscaling/max_replicas");
  j["serving"]["autoscaling"]["max_replicas"] = 4;
  CHECK(std::get<ServingJob>(parse(j).job).autoscaling->hpa.max_replicas == 4);
  j["serving"]["disaggregation"] = json::object();
  CHECK(error_path(j) == "/serving/autoscaling");
}

TEST_CASE("/serving/admission: a class name /traffic does not declare is an error") {
  json j = scenario();
  j["serving"]["admission"] = {{"classes", {{{"class", "premium"}, {"rate_per_s", 1}}}}};
  CHECK(error_path(j) == "/serving/admission/classes/0/class");
}

TEST_CASE("ctwin run runs autoscaling and admission on the fleet (exit 0, same bytes twice)") {
  json j = scenario();
  j["serving"]["autoscaling"] = {{"metric", "queue_length"}, {"target", 4}, {"max_replicas", 2}, {"sync_period_s", 2}};
  j["serving"]["admission"] = {{"max_queued_requests", 10}};
  CHECK(error_path(j).empty());
  const auto f = (temp_dir() / "autoscale-runs.json").string();
  std::ofstream(f, std::ios::binary) << j.dump(1);
  const auto a = cli("run " + f + " --json");
  REQUIRE(a.status == 0);
  const json out = json::parse(a.out);
  // Arrivals in [0, 10 s), a tick every 2 s: at least those at 2, 4, 6 and 8 s, one row each.
  CHECK(out["fleet"]["timeline"].size() >= 4);
  CHECK(out["fleet"]["timeline"][0]["t_s"].get<double>() == rel_approx(2.0, 1e-12));
  CHECK(out["fleet"]["admission"]["accepted"].get<long long>() +
            out["fleet"]["admission"]["rejected"].get<long long>() ==
        out["requests"]["arrived"].get<long long>());
  CHECK(cli("run " + f + " --json").out == a.out);
}

}  // namespace ctwin
