// A routed fleet's economics, random failures and scale from zero through `ctwin run`: each pool
// priced on its own GPU for the replica-seconds it held (the shipped A100 + H100 fleet), a pool's
// own price, the gpu_utilization metric and min_replicas 0 running instead of being refused,
// random crashes deterministic for a seed, and bad failure keys refused with exit status 2.
#include <cctype>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

namespace ctwin {
namespace {

using nlohmann::json;
using test::check_input_error;
using test::cli;
using test::rel_approx;
using test::temp_dir;

// Catalog on-demand prices per GPU-hour (topology/catalog/gpus.json, Lambda list prices).
constexpr double kA100Usd = 1.79, kH100Usd = 2.99;

json hetero() {
  std::ifstream in(test::source_dir() + "/scenarios/serving-fleet-hetero-a100-h100.json");
  json j = json::parse(in);
  j["traffic"]["duration_s"] = 20;  // short: the figures' relations, not their size
  return j;
}

json run_json(const json& j, const std::string& name) {
  const auto f = (temp_dir() / (name + ".json")).string();
  std::ofstream(f, std::ios::binary) << j.dump(1);
  const auto r = cli("run " + f + " --json");
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("hetero fleet: each pool pays its replica-seconds x GPUs at its own GPU's price; pools add up") {
  const json out = run_json(hetero(), "hetero");
  const json& pools = out["cost"]["by_pool"];
  REQUIRE(pools.size() == 2);
  CHECK(pools[0]["gpu"] == "A100-SXM-80GB");
  CHECK(pools[1]["gpu"] == "H100-SXM");
  double usd = 0, hours = 0;
  for (std::size_t p = 0; p < 2; ++p) {
    const json& x = pools[p];
    const double price = p == 0 ? kA100Usd : kH100Usd;
    CHECK(x["gpu_hour_usd"].get<double>() == rel_approx(price, 1e-12));
    // A fleet of 4 replicas serving from 0 to the end, none added, drained or down.
    const double end = out["makespan_s"].get<double>();
    CHECK(x["replica_s"]["serving"].get<double>() == rel_approx(4 * end, 1e-9));
    CHECK(x["replica_s"]["billed"].get<double>() == rel_approx(4 * end, 1e-9));
    const double gpu_hours = x["replica_s"]["billed"].get<double>() * 1 / 3600;
    CHECK(x["gpu_hours"].get<double>() == rel_approx(gpu_hours, 1e-12));
    CHECK(x["gpu_usd"].get<double>() == rel_approx(gpu_hours * price, 1e-12));
    const double tokens = x["input_tokens"].get<double>() + x["output_tokens"].get<double>();
    CHECK(x["usd_per_million_tokens"].get<double>() == rel_approx(gpu_hours * price / tokens * 1e6, 1e-9));
    CHECK(x["joules_per_token"].get<double>() == rel_approx(x["energy_j"].get<double>() / tokens, 1e-12));
    usd += x["total_usd"].get<double>();
    hours += x["gpu_hours"].get<double>();
  }
  CHECK(out["cost"]["total_usd"].get<double>() == rel_approx(usd, 1e-12));
  CHECK(out["cost"]["gpu_hours"].get<double>() == rel_approx(hours, 1e-12));
  const double tokens = out["requests"]["input_tokens"].get<double>() + out["requests"]["output_tokens"].get<double>();
  CHECK(out["cost"]["usd_per_million_tokens"].get<double>() == rel_approx(usd / tokens * 1e6, 1e-9));
}

TEST_CASE("hetero fleet: a pool's own gpu_hour_usd replaces its GPU's catalog price") {
  json j = hetero();
  j["serving"]["pools"][0]["gpu_hour_usd"] = 1.0;
  const json out = run_json(j, "hetero-price");
  const json& a = out["cost"]["by_pool"][0];
  CHECK(a["gpu_hour_usd"].get<double>() == rel_approx(1.0, 1e-12));
  CHECK(a["gpu_usd"].get<double>() == rel_approx(a["gpu_hours"].get<double>(), 1e-12));
  CHECK(out["cost"]["by_pool"][1]["gpu_hour_usd"].get<double>() == rel_approx(kH100Usd, 1e-12));
}

TEST_CASE("random failures: crashes at the MTBF's rate, deterministic for the seed, counted in the report") {
  json j = hetero();
  // 8 replicas for ~20 s at an MTBF of 0.005 h (18 s): about 9 crashes.
  j["serving"]["failures"] = {{"mtbf_hours", 0.005}, {"restart_s", 2}};
  const json out = run_json(j, "hetero-crash");
  const auto crashes = out["fleet"]["router"]["random_crashes"].get<long long>();
  CHECK(crashes > 0);
  CHECK(out["fleet"]["router"]["crashes"].get<long long>() == crashes);
  CHECK(out["fleet"]["random_failures"]["crashes"].get<long long>() == crashes);
  CHECK(out["cost"]["by_pool"][0]["crashes"].get<long long>() + out["cost"]["by_pool"][1]["crashes"].get<long long>() ==
        crashes);
  // Each crash keeps its replica down for restart_s (restarted before the run ends).
  const double down = out["cost"]["by_pool"][0]["replica_s"]["down"].get<double>() +
                      out["cost"]["by_pool"][1]["replica_s"]["down"].get<double>();
  CHECK(down == rel_approx(2.0 * static_cast<double>(crashes), 1e-9));
  CHECK(out["requests"]["completed"].get<long long>() + out["fleet"]["router"]["lost"].get<long long>() ==
        out["requests"]["arrived"].get<long long>());
  CHECK(run_json(j, "hetero-crash") == out);
}

TEST_CASE("autoscaling on gpu_utilization and scale to zero run (no longer refused)") {
  json j = hetero();
  j["serving"]["autoscaling"] = {{"metric", "gpu_utilization"}, {"target", 0.5}, {"max_replicas", 4}};
  const json util = run_json(j, "hetero-util");
  CHECK(util["fleet"]["timeline"].size() >= 1);

  // Scale to zero from zero: the pools start empty; the first request activates a replica in
  // each and waits for its cold start (20 s container + 16 GB of weights at 2 GB/s + 20 s
  // engine init = 48 s, serving_cold_start.hpp), held at the router meanwhile.
  j["serving"]["autoscaling"] = {{"metric", "queue_length"}, {"target", 4}, {"min_replicas", 0}, {"max_replicas", 2}};
  j["serving"]["pools"][0]["replicas"] = 0;
  j["serving"]["pools"][1]["replicas"] = 0;
  const json zero = run_json(j, "hetero-zero");
  const json& w = zero["fleet"]["cold_start_waits"];
  CHECK(w["requests"].get<long long>() > 0);
  CHECK(w["ttft_s"]["p50"].get<double>() > 40.0);
  CHECK(zero["fleet"]["router"]["unrouted"].get<long long>() == 0);
  CHECK(zero["requests"]["completed"].get<long long>() == zero["requests"]["arrived"].get<long long>());
  CHECK(zero["cost"]["by_pool"][0]["replica_s"]["starting"].get<double>() > 40.0);
}

// The report's "GPU time" line: shares of the replica-seconds the fleet's replicas served or
// drained (cost.by_pool[].replica_s), which for a fleet that scales or starts from zero is not the
// initial replica count times the makespan (that gave decode 184% and, from zero, inf%).
TEST_CASE("an autoscaled fleet's GPU time shares are over its replicas' serving seconds and add up to 100%") {
  json j = hetero();
  j["serving"]["autoscaling"] = {{"metric", "queue_length"}, {"target", 4}, {"min_replicas", 0}, {"max_replicas", 2}};
  j["serving"]["pools"][0]["replicas"] = 0;
  j["serving"]["pools"][1]["replicas"] = 0;
  const json out = run_json(j, "hetero-zero-shares");
  double served_s = 0;
  for (const json& p : out["cost"]["by_pool"])
    served_s += p["replica_s"]["serving"].get<double>() + p["replica_s"]["draining"].get<double>();
  REQUIRE(served_s > 0);
  const auto f = (temp_dir() / "hetero-zero-shares.json").string();
  const auto r = cli("run " + f);
  REQUIRE(r.status == 0);
  // The header says where the count starts and its bounds: 2 pools x at most 2 replicas of 1 GPU.
  CHECK(r.out.find("a fleet of 0 replicas at the start, autoscaled between 0 and 2 a pool (4 GPUs at most)") !=
        std::string::npos);
  const auto at = r.out.find("GPU time");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  CAPTURE(line);
  CHECK(line.find("nan") == std::string::npos);
  CHECK(line.find("inf") == std::string::npos);
  // Each printed share, in order: prefill, decode, communication, overhead, draft, swap, idle.
  std::vector<double> shares;
  for (std::size_t k = line.find('%'); k != std::string::npos; k = line.find('%', k + 1)) {
    std::size_t b = k;
    while (b > 0 && (std::isdigit(static_cast<unsigned char>(line[b - 1])) || line[b - 1] == '.')) --b;
    shares.push_back(std::stod(line.substr(b, k - b)));
  }
  REQUIRE(shares.size() == 7);
  const json& g = out["gpu_time_s"];
  // Printed to 0.1: within half of that of the JSON's seconds over the served replica-seconds.
  CHECK(std::fabs(shares[0] - 100 * g["prefill"].get<double>() / served_s) <= 0.0501);
  CHECK(std::fabs(shares[1] - 100 * g["decode"].get<double>() / served_s) <= 0.0501);
  double sum = 0;
  for (double x : shares) sum += x;
  CHECK(std::fabs(sum - 100) <= 0.35);  // seven shares, each rounded to 0.1
}

// Multi-LoRA on a fleet of pools: each pool's replica takes the traffic's adapters as /serving's
// does (it stopped on an internal error, "LoRA is off"), and the report's GPU time, with the
// LoRA kernels and loads beside it, accounts for the replicas' served seconds once.
TEST_CASE("a fleet of pools serves LoRA traffic; its GPU time and LoRA shares add up to 100%") {
  json j = hetero();
  std::ifstream in(test::source_dir() + "/scenarios/serving-multi-lora-100-adapters.json");
  const json lora = json::parse(in);
  for (const char* k : {"max_loras", "max_cpu_loras", "max_lora_rank", "lora_load_gbyte_per_s"})
    j["serving"][k] = lora["serving"][k];
  j["traffic"]["lora"] = lora["traffic"]["lora"];
  const json out = run_json(j, "hetero-lora");
  REQUIRE(out.contains("lora"));
  CHECK(out["gpu_time_s"]["lora"].get<double>() > 0);
  const auto r = cli("run " + (temp_dir() / "hetero-lora.json").string());
  REQUIRE(r.status == 0);
  std::vector<double> shares;  // every percentage of the "GPU time" line and the LoRA line under it
  const auto at = r.out.find("GPU time");
  REQUIRE(at != std::string::npos);
  const auto lora_at = r.out.find("LoRA kernels", at);
  REQUIRE(lora_at != std::string::npos);
  for (const std::string& line :
       {r.out.substr(at, r.out.find('\n', at) - at), r.out.substr(lora_at, r.out.find('\n', lora_at) - lora_at)}) {
    for (std::size_t k = line.find('%'); k != std::string::npos; k = line.find('%', k + 1)) {
      std::size_t b = k;
      while (b > 0 && (std::isdigit(static_cast<unsigned char>(line[b - 1])) || line[b - 1] == '.')) --b;
      shares.push_back(std::stod(line.substr(b, k - b)));
    }
  }
  REQUIRE(shares.size() == 9);  // prefill .. idle, LoRA kernels, LoRA loads
  double sum = 0;
  for (double x : shares) sum += x;
  CHECK(std::fabs(sum - 100) <= 0.45);  // nine shares, each rounded to 0.1
}

TEST_CASE("ctwin run refuses a bad random-failure key with exit status 2, naming it") {
  for (const auto& [key, value] : {std::pair{"mtbf_hours", json(-1)}, std::pair{"restart_s", json("soon")}}) {
    const std::string name = key;  // clang 14 cannot CAPTURE a structured binding
    CAPTURE(name);
    json j = hetero();
    j["serving"]["failures"] = {{name, value}};
    const auto f = (temp_dir() / ("bad-failures-" + name + ".json")).string();
    std::ofstream(f, std::ios::binary) << j.dump(1);
    check_input_error(cli("run " + f + " --json"), f, "/serving/failures/" + name);
  }
}

}  // namespace ctwin
