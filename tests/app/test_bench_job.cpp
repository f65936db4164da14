// `ctwin bench job`: the figures' structure and the checks that do not depend on timing (the
// per-step baseline agrees with the segment engine; step_fn is asked once per configuration).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using namespace ctwin::test;

TEST_CASE("ctwin bench job reports the replications, the interval search and the per-step baseline" *
          doctest::test_suite("slow")) {
  const Run r = cli("bench job --quick --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"gpus", "train_steps", "simulated_step_time_s", "replications", "wall_s", "cpu_s", "interval_search_wall_s",
        "time_to_train_days_p10", "time_to_train_days_p50", "time_to_train_days_p90", "ettr_p50", "young_interval_s",
        "best_interval_s", "baseline_cpu_s_per_replication", "engine_cpu_s_per_replication", "speedup_vs_per_step",
        "per_step_simulator_estimate_s"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["replications"] == 50);
  CHECK(j["step_fn_calls"] == 2);  // the full configuration and the background write
  CHECK(j["baseline_max_rel_diff_time_to_train"].get<double>() <= 1e-9);
  // The baseline asks step_fn at least once a step of the job.
  CHECK(j["baseline_step_fn_calls_per_replication"].get<double>() >= j["train_steps"].get<double>());
  CHECK(j["time_to_train_days_p10"].get<double>() <= j["time_to_train_days_p50"].get<double>());
  CHECK(j["time_to_train_days_p50"].get<double>() <= j["time_to_train_days_p90"].get<double>());
  CHECK(j["ettr_p50"].get<double>() > 0);
  CHECK(j["ettr_p50"].get<double>() <= 1);
}
