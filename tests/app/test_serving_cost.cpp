// `ctwin run --json` on serving scenarios: /cost and /energy against relations among the JSON's
// own figures (GPU-hours = GPUs x makespan, cost = GPU-hours x price, energy = GPU time x power),
// and the price against the catalog's, never against a number copied from an earlier run.
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"

namespace ctwin {
namespace {

using nlohmann::json;
using test::cli;
using test::rel_approx;
using test::temp_dir;

// Llama-3-8B on a DGX H100, 2 replicas of TP 2, a few seconds of light Poisson traffic.
json cost_scenario() {
  return json::parse(R"({"name": "cost", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b", "serving": {"tensor_parallel_size": 2, "data_parallel_size": 2, "max_num_seqs": 64},
    "traffic": {"arrival": {"process": "poisson", "rate_per_s": 20}, "duration_s": 5,
                "input_tokens": {"dist": "fixed", "value": 300}, "output_tokens": {"dist": "fixed", "value": 30},
                "classes": [{"name": "chat", "ttft_slo_s": 1.0, "tpot_slo_s": 0.1}]}})");
}

json run_json(const json& scenario, const std::string& name, const std::string& extra = "") {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << scenario.dump(1);
  const auto r = cli("run " + p.string() + " --json" + extra);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

double d(const json& j) { return j.get<double>(); }

}  // namespace

TEST_CASE("ctwin run --json: a fleet's cost is every GPU x makespan x the catalog's price, split by GPU time") {
  const json j = run_json(cost_scenario(), "cost.json");
  const json& c = j["cost"];
  const double makespan = d(j["makespan_s"]);
  REQUIRE(makespan > 0);
  CHECK(j["fleet"]["gpus"] == 4);
  CHECK(d(c["gpu_hours"]) == rel_approx(4 * makespan / 3600, 1e-9));
  CHECK(d(c["gpu_hour_usd"]) == builtin_gpus().gpus.at("H100-SXM").gpu_hour_usd);
  CHECK(d(c["gpu_usd"]) == rel_approx(d(c["gpu_hours"]) * d(c["gpu_hour_usd"]), 1e-9));
  CHECK(d(c["total_usd"]) == rel_approx(d(c["gpu_usd"]), 1e-12));  // electricity not counted by default
  CHECK(d(c["input_usd"]) + d(c["output_usd"]) == rel_approx(d(c["total_usd"]), 1e-9));
  const json& g = j["gpu_time_s"];
  CHECK(d(c["prefill_share"]) ==
        rel_approx(d(g["prefill"]) / (d(g["prefill"]) + d(g["decode"]) + d(g["draft"])), 1e-9));
  const json& req = j["requests"];
  CHECK(d(c["usd_per_million_output_tokens"]) == rel_approx(d(c["output_usd"]) / d(req["output_tokens"]) * 1e6, 1e-9));
  CHECK(d(c["usd_per_million_input_tokens"]) == rel_approx(d(c["input_usd"]) / d(req["input_tokens"]) * 1e6, 1e-9));

  // Energy: each part's replica-seconds x 2 GPUs per replica x its power; idle the rest of 2 x makespan.
  const json& e = j["energy"];
  const double tdp = d(e["tdp_w"]), idle = d(e["idle_w"]);
  const auto power = [&](const char* part) { return idle + (tdp - idle) * d(e["utilization"][part]); };
  CHECK(d(e["by_part_j"]["prefill"]) == rel_approx(2 * d(g["prefill"]) * power("prefill"), 1e-9));
  CHECK(d(e["by_part_j"]["decode"]) == rel_approx(2 * d(g["decode"]) * power("decode"), 1e-9));
  const double busy = d(g["prefill"]) + d(g["decode"]) + d(g["comm"]) + d(g["overhead"]) + d(g["draft"]) + d(g["swap"]);
  CHECK(d(e["by_part_j"]["idle"]) == rel_approx(2 * (2 * makespan - busy) * idle, 1e-6));
  double sum = 0;
  for (const auto& [k, v] : e["by_part_j"].items()) sum += d(v);
  CHECK(d(e["energy_j"]) == rel_approx(sum, 1e-9));
  CHECK(d(e["energy_kwh"]) == rel_approx(sum / 3.6e6, 1e-9));
  CHECK(d(e["average_power_w_per_gpu"]) == rel_approx(sum / (4 * makespan), 1e-9));
  CHECK(d(e["joules_per_output_token"]) == rel_approx(sum / d(req["output_tokens"]), 1e-9));
}

TEST_CASE("ctwin run: /serving/cost sets the GPU-hour's price and charges electricity") {
  json sc = cost_scenario();
  sc["serving"]["cost"] = {{"gpu_hour_usd", 10}, {"electricity_usd_per_kwh", 0.2}};
  const json j = run_json(sc, "priced.json");
  const json& c = j["cost"];
  CHECK(d(c["gpu_hour_usd"]) == 10);
  CHECK(d(c["gpu_usd"]) == rel_approx(d(c["gpu_hours"]) * 10, 1e-9));
  CHECK(d(c["electricity_usd"]) == rel_approx(d(j["energy"]["energy_kwh"]) * 0.2, 1e-9));
  CHECK(d(c["total_usd"]) == rel_approx(d(c["gpu_usd"]) + d(c["electricity_usd"]), 1e-9));
  const auto text = cli("run " + (temp_dir() / "priced.json").string());
  REQUIRE(text.status == 0);
  CHECK(text.out.find("GPU-hours at $10.000") != std::string::npos);
  CHECK(text.out.find("J per output token") != std::string::npos);
  sc["serving"]["cost"] = {{"gpu_hour_usd", -1}};
  std::ofstream(temp_dir() / "bad_price.json", std::ios::binary) << sc.dump(1);
  const auto bad = cli("run " + (temp_dir() / "bad_price.json").string());
  CHECK(bad.status == 2);
  CHECK(bad.err.find("/serving/cost/gpu_hour_usd") != std::string::npos);
}

TEST_CASE("ctwin run --json: a disaggregated run pays for both pools over the run") {
  json sc = cost_scenario();
  sc["serving"].erase("data_parallel_size");
  sc["serving"]["tensor_parallel_size"] = 1;
  sc["serving"]["disaggregation"] = {{"prefill_replicas", 1}, {"decode_replicas", 2}};
  const json j = run_json(sc, "disagg.json");
  const double makespan = d(j["makespan_s"]);
  const json& c = j["cost"];
  CHECK(d(c["gpu_hours"]) == rel_approx(3 * makespan / 3600, 1e-9));
  CHECK(d(c["pools"]["prefill"]["gpu_hours"]) == rel_approx(1 * makespan / 3600, 1e-9));
  CHECK(d(c["pools"]["decode"]["gpu_hours"]) == rel_approx(2 * makespan / 3600, 1e-9));
  CHECK(d(c["pools"]["prefill"]["energy_j"]) + d(c["pools"]["decode"]["energy_j"]) ==
        rel_approx(d(j["energy"]["energy_j"]), 1e-9));
  // Both pools work: each pool's draw, and the cost split between input and output.
  CHECK(d(c["pools"]["prefill"]["average_power_w"]) > 0);
  CHECK(d(c["prefill_share"]) > 0);
  CHECK(d(c["prefill_share"]) < 1);
}

}  // namespace ctwin
