// /serving/data_parallel_size: `ctwin run` on a fleet of identical replicas behind a round-robin
// split. Every figure is checked against a closed form (Poisson counts, fixed output lengths) or
// against the JSON's own counts, never against a value copied from an earlier run.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "tolerance.hpp"

namespace ctwin {
namespace {

using nlohmann::json;
using test::cli;
using test::rel_approx;
using test::temp_dir;

// Llama-3-8B on one DGX H100 (8 GPUs), Poisson arrivals at `rate_per_s` for `duration_s`,
// 100-token prompts and exactly 20 output tokens each: a light load, so every request completes.
json fleet_scenario(double rate_per_s, double duration_s, int tp) {
  json j = json::parse(R"({"name": "fleet", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b", "serving": {"max_num_seqs": 64},
    "traffic": {"arrival": {"process": "poisson"},
                "input_tokens": {"dist": "fixed", "value": 100}, "output_tokens": {"dist": "fixed", "value": 20},
                "classes": [{"name": "chat", "ttft_slo_s": 1.0, "tpot_slo_s": 0.1}]}})");
  j["traffic"]["arrival"]["rate_per_s"] = rate_per_s;
  j["traffic"]["duration_s"] = duration_s;
  j["serving"]["tensor_parallel_size"] = tp;
  return j;
}

std::string write(const std::string& name, const json& j) {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << j.dump(1);
  return p.string();
}

json run_json(const std::string& file) {
  const auto r = cli("run " + file + " --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

using ctwin::test::check_input_error;

}  // namespace

TEST_CASE("data_parallel_size is declared with the default a scenario without it loads with") {
  const auto& d = serving_fleet_params[0];
  CHECK(d.key == "data_parallel_size");
  CHECK(d.type == ParamType::integer);
  CHECK(d.min == 1);
  const Scenario sc = parse_scenario(fleet_scenario(10, 10, 2).dump(), "fleet.json");
  CHECK(d.def == serving_job(sc).data_parallel_size);
  CHECK(serving_job(sc).gpus() == 2);
  const Scenario four =
      parse_scenario(fleet_scenario(10, 10, 2).dump(), "fleet.json", {parse_override("/serving/data_parallel_size=4")});
  CHECK(serving_job(four).data_parallel_size == 4);
  CHECK(serving_job(four).gpus() == 8);
}

TEST_CASE("a fleet of N replicas at rate N*lambda gives each replica lambda's Poisson request count") {
  // N = 4 replicas of TP 2 on 8 GPUs. The fleet's arrivals over T seconds are Poisson(N lambda T);
  // the round-robin split gives each replica a 1/N share, so arrived/N has mean lambda T and
  // standard deviation sqrt(N lambda T)/N. One replica at lambda: Poisson(lambda T).
  const int n = 4, tp = 2;
  const double lambda = 5, t_s = 200;
  const double mean = lambda * t_s;  // 1000 requests per replica
  auto fj = fleet_scenario(n * lambda, t_s, tp);
  fj["serving"]["data_parallel_size"] = n;
  const json fleet = run_json(write("fleet.json", fj));
  const json one = run_json(write("one.json", fleet_scenario(lambda, t_s, tp)));

  const double fleet_arrived = fleet.at("/requests/arrived"_json_pointer).get<double>();
  const double one_arrived = one.at("/requests/arrived"_json_pointer).get<double>();
  const double per_replica = fleet_arrived / n;
  CHECK(std::fabs(per_replica - mean) < 4 * std::sqrt(n * mean) / n);
  CHECK(std::fabs(one_arrived - mean) < 4 * std::sqrt(mean));
  // Their difference: variance mean/N + mean.
  CHECK(std::fabs(per_replica - one_arrived) < 4 * std::sqrt(mean / n + mean));

  // Light load: every request completes with exactly its 20 output tokens.
  CHECK(fleet.at("/requests/completed"_json_pointer).get<double>() == fleet_arrived);
  CHECK(fleet.at("/requests/output_tokens"_json_pointer).get<double>() == 20 * fleet_arrived);

  // The fleet's size: N replicas of TP x PP GPUs.
  CHECK(fleet.at("/fleet/replicas"_json_pointer) == n);
  CHECK(fleet.at("/fleet/gpus"_json_pointer) == n * tp);
  CHECK(fleet.at("/replica/gpus"_json_pointer) == tp);
  CHECK(one.at("/fleet/replicas"_json_pointer) == 1);
  CHECK(one.at("/fleet/gpus"_json_pointer) == tp);

  // Throughput per GPU from the JSON's own counts: output tokens / makespan / (N tp pp).
  const double makespan = fleet.at("/makespan_s"_json_pointer).get<double>();
  const double tokens = fleet.at("/requests/output_tokens"_json_pointer).get<double>();
  CHECK(makespan >= t_s * 0.99);  // the last arrival is close to T, its completion after it
  CHECK(fleet.at("/throughput/output_tokens_per_s_per_gpu"_json_pointer).get<double>() ==
        rel_approx(tokens / makespan / (n * tp * 1), 1e-12));
  CHECK(fleet.at("/throughput/output_tokens_per_s"_json_pointer).get<double>() == rel_approx(tokens / makespan, 1e-12));
}

TEST_CASE("the text report of a fleet names its replicas and its total GPUs") {
  auto fj = fleet_scenario(20, 20, 2);
  fj["serving"]["data_parallel_size"] = 4;
  const auto r = cli("run " + write("fleet-text.json", fj));
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("on 4 replicas of 2 x H100-SXM (TP 2, PP 1) = 8 GPUs, requests split round-robin") !=
        std::string::npos);
}

TEST_CASE("data_parallel_size 1 gives the same bytes as a scenario without the key") {
  const json without = fleet_scenario(10, 30, 1);
  json with = without;
  with["serving"]["data_parallel_size"] = 1;
  const std::string a = write("without.json", without), b = write("with.json", with);
  for (const char* flags : {" --json", ""}) {
    CAPTURE(flags);
    const auto ra = cli("run " + a + flags), rb = cli("run " + b + flags);
    REQUIRE(ra.status == 0);
    REQUIRE(rb.status == 0);
    CHECK(ra.out == rb.out);
    CHECK(ra.err == rb.err);
  }
}

TEST_CASE("a fleet beyond the cluster's GPUs is refused with exit 2 naming data_parallel_size and the numbers") {
  // 5 replicas of TP 2 = 10 GPUs on one 8-GPU node.
  auto fj = fleet_scenario(10, 10, 2);
  fj["serving"]["data_parallel_size"] = 5;
  const std::string f = write("too-many.json", fj);
  const auto r = cli("run " + f + " --json");
  check_input_error(r, f, "/serving/data_parallel_size");
  CHECK(r.err.find("= 10 GPUs, but the cluster has 8") != std::string::npos);
  CHECK(r.err.find("at most 4 replicas of 2 GPUs") != std::string::npos);
  // Four fit exactly.
  fj["serving"]["data_parallel_size"] = 4;
  CHECK(cli("run " + write("just-fits.json", fj) + " --json").status == 0);
}

TEST_CASE("closed-loop traffic cannot be split round-robin: more than one replica is exit 2") {
  const std::string sc = "scenarios/serving-closed-loop.json";
  check_input_error(cli("run " + sc + " --set /serving/data_parallel_size=2 --json"), sc,
                    "/serving/data_parallel_size");
  // validate prints its table's header before loading the cases: only the error is checked.
  const auto v = cli("validate " + sc + " --set /serving/data_parallel_size=2");
  CHECK(v.status == 2);
  CHECK(v.err.find(sc + ": /serving/data_parallel_size: found 2 replicas under closed-loop traffic") !=
        std::string::npos);
  // One replica of it still runs (a short window of the shipped scenario).
  CHECK(cli("run " + sc + " --set /serving/data_parallel_size=1 --set /traffic/duration_s=20 --json").status == 0);
}

TEST_CASE("--trace of a fleet is refused with exit 2 before simulating, and writes nothing") {
  auto fj = fleet_scenario(10, 10, 1);
  fj["serving"]["data_parallel_size"] = 2;
  const std::string f = write("trace-fleet.json", fj);
  const auto trace = temp_dir() / "fleet-trace.json";
  const auto r = cli("run " + f + " --trace " + trace.string());
  check_input_error(r, f, "/serving/data_parallel_size");
  CHECK(r.err.find("--trace records one replica") != std::string::npos);
  CHECK(!std::filesystem::exists(trace));
}

}  // namespace ctwin

namespace ctwin {

TEST_CASE("the shipped fleet sweep zips TP and replicas over 64 GPUs, and its base fleet runs") {
  const std::string file = "scenarios/sweep-serving-llama3-70b-64xh100.json";
  const json sc = json::parse(test::slurp(std::filesystem::path(test::source_dir()) / file));
  const json& axes = sc.at("/sweep/axes"_json_pointer);
  REQUIRE(axes.size() == 2);
  CHECK(axes[0].at("key") == "/serving/tensor_parallel_size");
  CHECK(axes[1].at("key") == "/serving/data_parallel_size");
  REQUIRE(axes[0].at("values").size() == axes[1].at("values").size());
  const int cluster_gpus = 8 * 8;  // 8 DGX H100 nodes of 8 GPUs
  for (std::size_t i = 0; i < axes[0].at("values").size(); ++i)
    CHECK(axes[0].at("values")[i].get<int>() * axes[1].at("values")[i].get<int>() == cluster_gpus);

  const json j = run_json(file);
  CHECK(j.at("/fleet/gpus"_json_pointer) == cluster_gpus);
  CHECK(j.at("/fleet/replicas"_json_pointer) == sc.at("/serving/data_parallel_size"_json_pointer));
  const auto& q = j.at("requests");
  CHECK(q.at("completed").get<std::int64_t>() + q.at("rejected").get<std::int64_t>() ==
        q.at("arrived").get<std::int64_t>());
  // TP 1: 70e9 BF16 parameters (140 GB) do not fit one 80 GB H100: refused with exit 3.
  CHECK(cli("run " + file + " --set /serving/tensor_parallel_size=1 --set /serving/data_parallel_size=64").status == 3);
}

}  // namespace ctwin
