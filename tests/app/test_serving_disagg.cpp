// /serving/disaggregation through `ctwin run`: the keys and their defaults, the report's
// "disaggregation" object against the run's own counts and the closed forms (transfer volume =
// prompt tokens x the model's KV bytes per token; GPUs = both pools'), the GPU budget and the
// other refusals (exit 2 naming file + pointer), and the shipped comparison.
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

// Llama-3-8B on one DGX H100; `n` requests one a second of exactly 1000 prompt and 20 output
// tokens; 1 prefill TP 1 + 1 decode TP 2 unless changed.
json disagg_scenario(int n) {
  json j = json::parse(R"({"name": "disagg", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b",
    "serving": {"max_num_seqs": 64,
                "disaggregation": {"prefill_replicas": 1, "decode_replicas": 1, "decode_tensor_parallel_size": 2}},
    "traffic": {"arrival": {"process": "constant", "rate_per_s": 1},
                "input_tokens": {"dist": "fixed", "value": 1000}, "output_tokens": {"dist": "fixed", "value": 20},
                "classes": [{"name": "chat", "ttft_slo_s": 1.0, "tpot_slo_s": 0.1}]}})");
  j["traffic"]["requests"] = n;
  return j;
}

std::string write(const std::string& name, const json& j) {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << j.dump(1);
  return p.string();
}

using ctwin::test::check_input_error;

}  // namespace

TEST_CASE("serving disagg: the report's disaggregation object, from closed forms and the run's counts") {
  const std::string f = write("disagg.json", disagg_scenario(10));
  const auto r = cli("run " + f + " --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const json j = json::parse(r.out);
  REQUIRE(j.contains("disaggregation"));
  const json& d = j["disaggregation"];
  CHECK(d["prefill"]["gpus"] == 1);
  CHECK(d["decode"]["gpus"] == 2);
  CHECK(d["decode"]["tensor_parallel_size"] == 2);
  CHECK(d["gpus"] == 3);
  CHECK(j["fleet"]["gpus"] == 3);
  CHECK(j["requests"]["completed"] == 10);
  CHECK(j["requests"]["output_tokens"] == 200);
  // Llama-3-8B's KV: 32 layers x 2 x 8 KV heads x 128 x 2 bytes = 131072 bytes per token.
  CHECK(d["kv_transfer"]["bytes_per_token"].get<double>() == rel_approx(131072, 1e-12));
  CHECK(d["kv_transfer"]["transfers"] == 10);
  CHECK(d["kv_transfer"]["bytes"].get<double>() == rel_approx(10 * 1000 * 131072.0, 1e-12));
  // Both pools fit the node: NVLink, two GPUs (min(1, 2) = 1 of them) sending at once.
  const ServingJob job = serving_job(load_scenario(f));
  CHECK(d["kv_transfer"]["link_gbyte_per_s"].get<double>() ==
        rel_approx(job.deployment.cluster.spec.intra_gbyte_per_s, 1e-12));
  // One a second, each alone: every transfer on an idle link takes bytes / bandwidth + latency.
  const double one = 1000 * 131072.0 / (job.deployment.cluster.spec.intra_gbyte_per_s * 1e9) +
                     job.deployment.cluster.spec.intra_latency_us * 1e-6;
  // (The flow's completion rounds up to the engine's next picosecond: 1 ps in 0.29 ms.)
  CHECK(d["kv_transfer"]["time_s"]["mean"].get<double>() == rel_approx(one, 1e-8));
  // The decode pool computed no prefill: all the prompt tokens were the prefill pool's.
  CHECK(d["decode"]["prefill_tokens_computed"] == 0);
  CHECK(d["prefill"]["prefill_tokens_computed"] == 10000);
  CHECK(d["goodput_requests_per_s_per_gpu"].get<double>() ==
        rel_approx(j["goodput_requests_per_s"].get<double>() / 3, 1e-12));
  // TTFT is the prefill pool's: its queueing and prefill parts add up to it, less the host overhead.
  const double parts = d["ttft_breakdown_s"]["prefill_queueing"]["mean"].get<double>() +
                       d["ttft_breakdown_s"]["prefill"]["mean"].get<double>();
  CHECK(j["ttft_s"]["mean"].get<double>() ==
        rel_approx(parts + job.deployment.overhead.request_overhead_us * 1e-6, 1e-9));
  // The text report names both pools.
  const auto t = cli("run " + f);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("prefill 1 replicas of TP 1, decode 1 replicas of TP 2") != std::string::npos);
  CHECK(t.out.find("KV transfer") != std::string::npos);
}

TEST_CASE("serving disagg: both pools beyond the cluster's GPUs is exit 2 naming /serving/disaggregation") {
  json j = disagg_scenario(5);
  j["serving"]["disaggregation"]["prefill_replicas"] = 3;
  j["serving"]["disaggregation"]["prefill_tensor_parallel_size"] = 2;
  j["serving"]["disaggregation"]["decode_replicas"] = 2;  // 3 x 2 + 2 x 2 = 10 GPUs of 8
  const std::string f = write("disagg-over.json", j);
  const auto r = cli("run " + f + " --json");
  check_input_error(r, f, "/serving/disaggregation");
  CHECK(r.err.find("10 GPUs in all, but the cluster has 8") != std::string::npos);
  // 8 fit exactly.
  j["serving"]["disaggregation"]["prefill_replicas"] = 2;
  CHECK(cli("run " + write("disagg-fits.json", j) + " --json").status == 0);
}

TEST_CASE("serving disagg: a bad pool TP, data_parallel_size beside it: exit 2; --trace is written") {
  json j = disagg_scenario(5);
  j["serving"]["disaggregation"]["decode_tensor_parallel_size"] = 3;  // 32 heads
  std::string f = write("disagg-tp3.json", j);
  check_input_error(cli("run " + f + " --json"), f, "/serving/disaggregation/decode_tensor_parallel_size");
  j = disagg_scenario(5);
  j["serving"]["data_parallel_size"] = 2;
  f = write("disagg-dp.json", j);
  check_input_error(cli("run " + f + " --json"), f, "/serving/data_parallel_size");
  j = disagg_scenario(5);
  j["serving"]["disaggregation"]["kv_link_gbyte_per_s"] = 0;
  f = write("disagg-bw0.json", j);
  check_input_error(cli("run " + f + " --json"), f, "/serving/disaggregation/kv_link_gbyte_per_s");
  // --trace, once refused here, writes the fleet trace (tests/app/test_fleet_trace_cli.cpp).
  f = write("disagg-trace.json", disagg_scenario(5));
  const auto out = temp_dir() / "disagg-trace-out.json";
  std::filesystem::remove(out);
  CHECK(cli("run " + f + " --trace " + out.string()).status == 0);
  CHECK(std::filesystem::exists(out));
}

TEST_CASE("serving disagg: an overridden link: the transfer time is bytes / bandwidth + latency") {
  json j = disagg_scenario(4);
  j["serving"]["disaggregation"]["kv_link_gbyte_per_s"] = 2;
  j["serving"]["disaggregation"]["kv_link_latency_us"] = 300;
  const auto r = cli("run " + write("disagg-link.json", j) + " --json");
  REQUIRE(r.status == 0);
  const json d = json::parse(r.out)["disaggregation"];
  // 1000 x 131072 bytes over 2 GB/s = 65.536 ms, plus 0.3 ms; the link is idle for each (1 s apart).
  CHECK(d["kv_transfer"]["time_s"]["mean"].get<double>() == rel_approx(0.065536 + 0.0003, 1e-9));
  CHECK(d["kv_transfer"]["link_busy_s"].get<double>() == rel_approx(4 * 0.065536, 1e-9));
  // The same bandwidth written with its unit in bits: 16 Gb/s = 2 GB/s.
  j["serving"]["disaggregation"]["kv_link_gbyte_per_s"] = "16 Gb/s";
  const auto bits = cli("run " + write("disagg-link-bits.json", j) + " --json");
  REQUIRE(bits.status == 0);
  CHECK(json::parse(bits.out)["disaggregation"]["kv_transfer"]["link_gbyte_per_s"].get<double>() ==
        rel_approx(2, 1e-12));
}

TEST_CASE("serving disagg: the shipped comparison: same 16 GPUs, disaggregation gives more goodput per GPU") {
  const auto dis = cli("run scenarios/serving-disagg-vs-agg-llama3-70b.json --json");
  const auto agg = cli("run scenarios/serving-disagg-vs-agg-llama3-70b-agg.json --json");
  REQUIRE(dis.status == 0);
  REQUIRE(agg.status == 0);
  const json d = json::parse(dis.out), a = json::parse(agg.out);
  CHECK(d["fleet"]["gpus"] == 16);
  CHECK(a["fleet"]["gpus"] == 16);
  CHECK(d["disaggregation"]["prefill"]["gpus"] == 8);
  CHECK(d["disaggregation"]["decode"]["gpus"] == 8);
  // The same traffic (same seed): the same requests arrive.
  CHECK(d["requests"]["arrived"] == a["requests"]["arrived"]);
  // The decode pool never runs a prefill chunk beside a decode step: its TPOT stays below the
  // aggregated fleet's, whose decodes share iterations with 8192-token prefill chunks.
  CHECK(d["tpot_s"]["p99"].get<double>() < a["tpot_s"]["p99"].get<double>());
  CHECK(d["fleet"]["goodput_requests_per_s_per_gpu"].get<double>() >
        1.5 * a["fleet"]["goodput_requests_per_s_per_gpu"].get<double>());
}

}  // namespace ctwin
