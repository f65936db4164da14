// `ctwin run --trace` on a serving scenario: refused before simulating when it would overwrite a
// file or has an unknown extension; deterministic; its summary agrees with the --json report and
// its request and counter tracks are there.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using ctwin::test::cli;
using ctwin::test::rel_approx;
using ctwin::test::Run;
using ctwin::test::slurp;
using ctwin::test::temp_dir;

namespace {
const std::string kScenario = "scenarios/serving-llama3-8b-h100.json";
}

TEST_CASE("serving --trace: same scenario same bytes; the summary is the report's; requests and counters" *
          doctest::test_suite("slow")) {
  const auto d = temp_dir();
  const std::string a = (d / "s1.json").string(), b = (d / "s2.json").string();
  std::filesystem::remove(a);
  std::filesystem::remove(b);
  const Run r = cli("run " + kScenario + " --json --trace " + a);
  REQUIRE(r.status == 0);
  REQUIRE(cli("run " + kScenario + " --trace " + b).status == 0);
  const std::string ta = slurp(a);
  CHECK(ta == slurp(b));
  const auto report = nlohmann::json::parse(r.out);
  const auto trace = nlohmann::json::parse(ta);
  std::map<std::string, double> summary;
  for (const auto& kv : trace["ctwin"]["summary"]) summary[kv[0].get<std::string>()] = kv[1].get<double>();
  CHECK(summary.at("ttft_p99_s") == rel_approx(report["ttft_s"]["p99"].get<double>(), 1e-12));
  CHECK(summary.at("tpot_p50_s") == rel_approx(report["tpot_s"]["p50"].get<double>(), 1e-12));
  CHECK(summary.at("requests_per_second") == rel_approx(report["throughput"]["requests_per_s"].get<double>(), 1e-12));
  // Every completed request has exactly one prefill span; the counters are all present.
  std::set<std::string> prefilled, counters;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "prefill" && e["name"].get<std::string>().rfind("req ", 0) == 0) {
      CHECK(prefilled.insert(e["name"].get<std::string>()).second);
    }
    if (e["ph"] == "C") counters.insert(e["name"].get<std::string>());
  }
  CHECK(static_cast<double>(prefilled.size()) == summary.at("completed_requests"));
  CHECK(counters ==
        std::set<std::string>{"batch_tokens", "kv_blocks_used", "kv_utilization", "queue_length", "running"});
}

TEST_CASE("serving --trace: an existing file is kept without --force; an unknown extension is refused") {
  const auto d = temp_dir();
  const std::string t = (d / "keep.ctt").string();
  std::ofstream(t) << "precious";
  const Run r = cli("run " + kScenario + " --trace " + t);
  CHECK(r.status == 2);
  CHECK(r.err.find("--force") != std::string::npos);
  CHECK(slurp(t) == "precious");
  const Run f = cli("run " + kScenario + " --trace " + t + " --force");
  CHECK(f.status == 0);
  CHECK(slurp(t) != "precious");
  const Run x = cli("run " + kScenario + " --trace " + (d / "t.txt").string());
  CHECK(x.status == 2);
  CHECK(x.err.find("--trace") != std::string::npos);
}
