// `ctwin run --trace` on a routed fleet and on a disaggregated job (workloads/
// serving_fleet_trace.hpp): the trace against the --json report of the same run (replicas made,
// the autoscaler's ticks, arrivals, KV transfers), byte for byte the same for the same scenario.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "sim/time.hpp"
#include "sim/trace.hpp"
#include "tolerance.hpp"

using ctwin::test::cli;
using ctwin::test::Run;
using ctwin::test::slurp;
using ctwin::test::temp_dir;

namespace {

double value_at(const ctwin::TraceCounterTrack& c, std::int64_t t_ps) {
  double v = 0;
  for (const auto& [at, x] : c.samples)
    if (at <= t_ps) v = x;
  return v;
}

const ctwin::TraceCounterTrack* counter_of(const ctwin::Trace& t, const std::string& process, const std::string& name) {
  for (const auto& c : t.counters)
    if (t.str(c.process) == process && t.str(c.name) == name) return &c;
  return nullptr;
}

std::string fresh(const std::string& name) {
  const auto p = temp_dir() / name;
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace

TEST_CASE("fleet --trace: the autoscaled fleet's lanes, ticks and arrivals are the report's; same bytes twice" *
          doctest::test_suite("slow")) {
  const std::string sc = "scenarios/serving-autoscale-burst.json";
  const std::string a = fresh("fleet-a.ctt"), b = fresh("fleet-b.ctt");
  const Run r = cli("run " + sc + " --json --trace " + a);
  REQUIRE(r.status == 0);
  REQUIRE(cli("run " + sc + " --trace " + b).status == 0);
  CHECK(slurp(a) == slurp(b));
  const auto report = nlohmann::json::parse(r.out);
  const auto& pool = report["fleet"]["pools"][0];
  const std::string name = pool["name"].get<std::string>();
  const int made = pool["replicas_made"].get<int>();
  REQUIRE(made > 2);  // the burst made the autoscaler add replicas
  const ctwin::Trace t = ctwin::read_trace_file(a);
  // A lifecycle lane per replica made; iteration lanes for the first 16.
  int life = 0, iters = 0;
  for (const auto& l : t.lanes) {
    if (t.str(l.process) != name) continue;
    const std::string th = t.str(l.thread);
    (th.ends_with(" iterations") ? iters : life) += 1;
  }
  CHECK(life == made);
  CHECK(iters == std::min(made, 16));
  // At each tick the replicas serving just before it are the tick's; a mark where it asked for
  // a change (this scenario has no crash: the count it had is serving + starting).
  const auto* serving = counter_of(t, name, "serving");
  REQUIRE(serving != nullptr);
  int changes = 0;
  for (const auto& row : report["fleet"]["timeline"]) {
    const std::int64_t at = ctwin::seconds(row["t_s"].get<double>()).ps;
    CAPTURE(at);
    CHECK(value_at(*serving, at - 1) == row["serving"][0].get<double>());
    changes += row["desired"][0].get<int>() != row["serving"][0].get<int>() + row["starting"][0].get<int>();
  }
  int marks = 0;
  for (const auto& e : t.events) marks += t.str(e.kind) == "scale_up" || t.str(e.kind) == "scale_down";
  CHECK(changes > 0);
  CHECK(marks == changes);
  // arrivals_per_s over 1 s intervals integrates to every request routed.
  const auto* rate = counter_of(t, name, "arrivals_per_s");
  REQUIRE(rate != nullptr);
  REQUIRE(rate->samples.back().second == 0.0);
  double routed = 0;
  for (std::size_t i = 0; i + 1 < rate->samples.size(); ++i)
    routed +=
        rate->samples[i].second * static_cast<double>(rate->samples[i + 1].first - rate->samples[i].first) * 1e-12;
  std::int64_t report_routed = 0;
  for (const auto& n : pool["routed"]) report_routed += n.get<std::int64_t>();
  CHECK(routed == ctwin::test::rel_approx(static_cast<double>(report_routed), 1e-9));
}

TEST_CASE("disaggregated --trace: one Chrome flow arrow per KV transfer, prefill pool to decode pool") {
  const std::string sc = "scenarios/serving-disagg-vs-agg-llama3-70b.json";
  const std::string out = fresh("disagg.json");
  const Run r = cli("run " + sc + " --json --trace " + out + " --set /traffic/duration_s=30");
  REQUIRE(r.status == 0);
  const auto report = nlohmann::json::parse(r.out);
  const auto transfers = report["disaggregation"]["kv_transfer"]["transfers"].get<std::int64_t>();
  REQUIRE(transfers > 10);
  const auto trace = nlohmann::json::parse(slurp(out));
  // Flow starts on the prefill pool's process, ends on the decode pool's.
  std::map<std::int64_t, std::string> process;  // pid -> name
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"].get<std::int64_t>()] = e["args"]["name"];
  std::int64_t starts = 0, finishes = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "s") {
      ++starts;
      CHECK(process[e["pid"].get<std::int64_t>()] == "prefill");
    } else if (e["ph"] == "f") {
      ++finishes;
      CHECK(process[e["pid"].get<std::int64_t>()] == "decode");
    }
  }
  CHECK(starts == transfers);
  CHECK(finishes == transfers);
  // The Chrome file reads back with its arrows and summary.
  const ctwin::Trace t = ctwin::read_trace_file(out);
  CHECK(static_cast<std::int64_t>(t.arrows.size()) == transfers);
  bool found = false;
  for (const auto& [k, v] : t.summary)
    if (k == "kv_transfers") found = v == static_cast<double>(transfers);
  CHECK(found);
}

TEST_CASE("routed fleet --trace: a trace is written where it used to be refused; a round-robin split still is") {
  const std::string out = fresh("router.json");
  const Run r =
      cli("run scenarios/serving-router-prefix-vs-least-load.json --trace " + out + " --set /traffic/duration_s=20");
  CHECK(r.status == 0);
  CHECK(std::filesystem::exists(out));
  const Run split = cli("run scenarios/serving-fleet-cost-a100-vs-h100.json --trace " + fresh("split.json"));
  CHECK(split.status == 2);
  CHECK(split.err.find("not a round-robin split") != std::string::npos);
}
