// /serving/disaggregation/kv_transfer through `ctwin run`: a bad value is exit 2 naming the key,
// layerwise reports the exposed and the overlapped transfer against the hand-worked closed form
// (tests/workloads/test_serving_disagg_layerwise.cpp derives it), the default leaves the report
// as it was, and the shipped 2P1D comparison streams its KV ahead of the first token.
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

// Llama-3-8B on one DGX H100, 1 prefill TP 1 + 1 decode TP 2, one request a second of 1000
// prompt and 20 output tokens, a 2 GB/s link of 300 us (each transfer alone on it).
json layerwise_scenario(const char* mode) {
  json j = json::parse(R"({"name": "disagg-lw", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b",
    "serving": {"max_num_seqs": 64,
                "disaggregation": {"prefill_replicas": 1, "decode_replicas": 1, "decode_tensor_parallel_size": 2,
                                   "kv_link_gbyte_per_s": 2, "kv_link_latency_us": 300}},
    "traffic": {"arrival": {"process": "constant", "rate_per_s": 1}, "requests": 4,
                "input_tokens": {"dist": "fixed", "value": 1000}, "output_tokens": {"dist": "fixed", "value": 20}}})");
  if (mode) j["serving"]["disaggregation"]["kv_transfer"] = mode;
  return j;
}

std::string write(const std::string& name, const json& j) {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << j.dump(1);
  return p.string();
}

}  // namespace

TEST_CASE("serving disagg kv_transfer: a bad value is exit 2 naming /serving/disaggregation/kv_transfer") {
  const std::string f = write("disagg-lw-bad.json", layerwise_scenario("per_layer"));
  const auto r = cli("run " + f + " --json");
  test::check_input_error(r, f, "/serving/disaggregation/kv_transfer");
  CHECK(r.err.find("layerwise") != std::string::npos);  // the accepted values are named
}

TEST_CASE("serving disagg kv_transfer: layerwise reports the exposed and overlapped transfer, closed form") {
  const std::string fl = write("disagg-lw.json", layerwise_scenario("layerwise"));
  const std::string fa = write("disagg-lw-after.json", layerwise_scenario("after_prefill"));
  const std::string fd = write("disagg-lw-default.json", layerwise_scenario(nullptr));
  const auto l = cli("run " + fl + " --json"), a = cli("run " + fa + " --json"), dflt = cli("run " + fd + " --json");
  CAPTURE(l.err);
  REQUIRE(l.status == 0);
  REQUIRE(a.status == 0);
  // The default is after_prefill, and its report is unchanged: no mode, no overlapped part.
  CHECK(a.out == dflt.out);
  const json ja = json::parse(a.out), jl = json::parse(l.out);
  CHECK_FALSE(ja["disaggregation"]["kv_transfer"].contains("overlapped_time_s"));
  const json& k = jl["disaggregation"]["kv_transfer"];
  CHECK(k["mode"] == "layerwise");
  // One prefill iteration of D (K = 1, n = 32 layers), B = 1000 x 131072 bytes over bw = 2 GB/s:
  // the link is slower than the prefill's B / D, so the KV lands at s + D/n + lat + B/bw; exposed
  // = lat + B/bw - (n-1)/n D, overlapped = (n-1)/n D.
  const double d = jl["disaggregation"]["ttft_breakdown_s"]["prefill"]["mean"].get<double>();
  const double b = 1000 * 131072.0, bw = 2e9, lat = 300e-6, n = 32;
  REQUIRE(b / d > bw);
  CHECK(k["time_s"]["mean"].get<double>() == rel_approx(lat + b / bw - (n - 1) / n * d, 1e-8));
  CHECK(k["overlapped_time_s"]["mean"].get<double>() == rel_approx((n - 1) / n * d, 1e-8));
  CHECK(ja["disaggregation"]["kv_transfer"]["time_s"]["mean"].get<double>() == rel_approx(lat + b / bw, 1e-8));
  // The text report names the parts.
  const auto t = cli("run " + fl);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("KV exposed") != std::string::npos);
  CHECK(t.out.find("KV overlapped") != std::string::npos);
}

TEST_CASE("serving disagg kv_transfer: the shipped 2P1D run streams its KV behind the prefill" *
          doctest::test_suite("slow")) {
  const std::string f = "scenarios/serving-disagg-vs-agg-llama3-70b.json";
  const auto a = cli("run " + f + " --json");
  const auto l = cli("run " + f + " --set /serving/disaggregation/kv_transfer=layerwise --json");
  REQUIRE(a.status == 0);
  REQUIRE(l.status == 0);
  const json ja = json::parse(a.out), jl = json::parse(l.out);
  const json &ka = ja["disaggregation"]["kv_transfer"], &kl = jl["disaggregation"]["kv_transfer"];
  // The same requests, the same bytes; the prefill pool (and so TTFT, its first token) unchanged.
  CHECK(kl["bytes"] == ka["bytes"]);
  CHECK(jl["ttft_s"]["p50"] == ja["ttft_s"]["p50"]);
  // Streaming hides most of the transfer behind the prefill: its exposed p50 below after_prefill's.
  CHECK(kl["time_s"]["p50"].get<double>() < ka["time_s"]["p50"].get<double>());
  CHECK(kl["time_s"]["mean"].get<double>() < ka["time_s"]["mean"].get<double>());
  CHECK(jl["e2e_s"]["p50"].get<double>() <= ja["e2e_s"]["p50"].get<double>());
}

}  // namespace ctwin
