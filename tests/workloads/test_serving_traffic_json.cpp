// The /traffic loader (serving_traffic_params.hpp) and the Azure request-trace CSV reader:
// values read through the tables, and every bad value an InputError naming its place.
#include <doctest/doctest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/error.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "workloads/serving_traffic_params.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

const std::string kFile = "scenario.json";

TrafficSpec load(const std::string& text, const std::filesystem::path& dir = ".") {
  const Json j = Json::parse(text);
  return traffic_from_json(JsonObject(j, "/traffic", kFile), kFile, dir);
}

// The InputError's path for a bad /traffic, or "(none)".
std::string error_path(const std::string& text, const std::filesystem::path& dir = ".") {
  try {
    (void)load(text, dir);
  } catch (const InputError& e) {
    return e.path;
  }
  return "(none)";
}

std::string csv_error(const std::string& text) {
  try {
    (void)parse_request_trace(text, "t.csv");
  } catch (const InputError& e) {
    CHECK(e.file == "t.csv");
    return e.path;
  }
  return "(none)";
}

struct TempDir {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("ctwin-traffic-" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(p); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(p / name) << text; }
};

const char* kLens =
    R"("input_tokens": {"dist": "fixed", "value": 128}, "output_tokens": {"dist": "fixed", "value": 16})";

}  // namespace

TEST_CASE("request trace CSV: arrivals after the first row to the picosecond, tokens as written") {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:15:46.6805900,374,44\r\n"
      "2023-11-16 18:15:47.0000001,10,0\r\n"
      "2023-11-17 00:00:00,5,3\r\n";
  const auto rows = parse_request_trace(text, "t.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].arrival == Time{0});
  // 47.0000001 - 46.68059 = 0.3194101 s.
  CHECK(rows[1].arrival == Time{319410100000});
  // Midnight - 18:15:46.68059 = 5 h 44 min 13.31941 s = 20653.31941 s.
  CHECK(rows[2].arrival == Time{20653319410000000});
  CHECK(rows[0].context_tokens == 374);
  CHECK(rows[0].generated_tokens == 44);
  CHECK(rows[1].generated_tokens == 0);
  // Across a month and a leap day: 2024-02-28 23:59:59 -> 2024-03-01 00:00:00 is 86401 s.
  const auto leap = parse_request_trace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-02-28 23:59:59,1,1\n2024-03-01 00:00:00,1,1", "t.csv");
  CHECK(leap[1].arrival == seconds(86401));
}

TEST_CASE("request trace CSV errors name the row and column") {
  const std::string h = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  const std::string ok = "2023-11-16 18:15:46.6805900,374,44\n";
  CHECK(csv_error("timestamp,context,generated\n" + ok) == "row 0 (the header)");
  CHECK(csv_error(h) == "row 1");  // no rows
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47,12a,4\n") == "row 2, column ContextTokens");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47,12,-4\n") == "row 2, column GeneratedTokens");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47,0,4\n") == "row 2, column ContextTokens");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47,16777217,4\n") == "row 2, column ContextTokens");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:40,12,4\n") == "row 2, column TIMESTAMP");  // decreasing
  CHECK(csv_error(h + ok + "2023-13-16 18:15:47,12,4\n") == "row 2, column TIMESTAMP");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47.,12,4\n") == "row 2, column TIMESTAMP");
  CHECK(csv_error(h + ok + "2023-11-16 18:15:47,12\n") == "row 2, column TIMESTAMP");    // two fields
  CHECK(csv_error(h + ok + "2024-11-16 18:15:47,12,4\n") == "row 2, column TIMESTAMP");  // a year later
  CHECK(csv_error(h + ok) == "(none)");
}

TEST_CASE("the shipped sample trace loads and replays at a requested mean rate") {
  const std::filesystem::path dir = ctwin::test::source_dir() + "/scenarios";
  const TrafficSpec s =
      load(R"({"arrival": {"process": "trace", "file": "data/azure-conv-sample.csv", "rate_per_s": 10}})", dir);
  REQUIRE(s.arrival.trace);
  CHECK(s.arrival.trace->size() == 300);
  auto src = make_traffic(s);
  std::vector<Request> rs;
  while (src->next_arrival()) rs.push_back(src->pop());
  REQUIRE(rs.size() == 300);
  // 299 gaps at 10/s span 29.9 s (up to the picosecond rounding of the scaled times).
  CHECK(rs.back().arrival.seconds() == rel_approx(29.9, 1e-9));
  CHECK(rs[0].prompt_tokens == 837);
  CHECK(rs[0].output_tokens == 503);
}

TEST_CASE("/traffic values reach the spec: arrival, lengths, prefix, sessions, classes") {
  const TrafficSpec s = load(std::string(R"({"seed": 3, "requests": 50, "duration_s": 60,
      "arrival": {"process": "gamma", "rate_per_s": 12, "cv": 3},
      "input_tokens": {"dist": "lognormal", "mean": 800, "sigma": 1, "max": 4000},
      "output_tokens": {"dist": "uniform", "min": 10, "max": 20},
      "prefix": {"shared_tokens": 256, "share_ratio": 0.5, "groups": 3},
      "sessions": {"turns": 4, "active": 8},
      "classes": [{"name": "chat", "share": 3, "priority": -1, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
                  {"name": "batch", "e2e_slo_s": 600}]})"));
  CHECK(s.seed == 3);
  CHECK(s.requests == 50);
  CHECK(s.duration_s == 60);
  CHECK(s.arrival.process == ArrivalProcess::gamma);
  CHECK(s.arrival.cv == 3);
  // mean 800 with sigma 1: mu = ln 800 - 1/2.
  CHECK(s.input.mu == rel_approx(std::log(800.0) - 0.5, 1e-12));
  CHECK(s.input.max == 4000);
  CHECK(s.output.min == 10);
  CHECK(s.prefix.groups == 3);
  CHECK(s.sessions.active == 8);
  REQUIRE(s.classes.size() == 2);
  CHECK(s.classes[0].priority == -1);
  CHECK(s.classes[1].share == 1);
  CHECK(s.classes[1].e2e_slo_s == 600);

  const TrafficSpec st = load(
      std::string(R"({"duration_s": 10, "arrival": {"process": "steps", "steps": [[0, 1], [5, 0]]}, )") + kLens + "}");
  REQUIRE(st.arrival.steps.size() == 2);
  CHECK(st.arrival.steps[1].t_s == 5);
  CHECK(st.input.value == 128);
}

TEST_CASE("empirical lengths from an inline list or a file beside the scenario") {
  TempDir d;
  d.write("lens.txt", "# prompt lengths\n12, 40\n 7\n");
  const TrafficSpec s = load(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "empirical", "file": "lens.txt"},
      "output_tokens": {"dist": "empirical", "values": [3, 9]}})",
                             d.p);
  REQUIRE(s.input.samples);
  CHECK(*s.input.samples == std::vector<std::int32_t>{12, 40, 7});
  CHECK(*s.output.samples == std::vector<std::int32_t>{3, 9});
  d.write("bad.txt", "12\n40\n7x\n");
  try {
    (void)load(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "empirical", "file": "bad.txt"}, "output_tokens": {"dist": "fixed", "value": 1}})",
               d.p);
    FAIL("no error");
  } catch (const InputError& e) {
    // At the key naming the file, the file's own line in the message (the field only: "7x").
    CHECK(e.file == "scenario.json");
    CHECK(e.path == "/traffic/input_tokens/file");
    CHECK(e.problem == (d.p / "bad.txt").string() + ", line 3: found \"7x\"");
  }
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "empirical", "file": "missing.txt"}, "output_tokens": {"dist": "fixed", "value": 1}})",
                   d.p) == "/traffic/input_tokens/file");
}

TEST_CASE("a bad trace row is an error at /traffic/arrival/file naming the CSV, row and column") {
  TempDir d;
  d.write("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6,3,4\n2023-11-16 18:15:47,x,4\n");
  try {
    (void)load(R"({"arrival": {"process": "trace", "file": "t.csv"}})", d.p);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.file == "scenario.json");
    CHECK(e.path == "/traffic/arrival/file");
    CHECK(e.problem == (d.p / "t.csv").string() + ", row 2, column ContextTokens: found \"x\"");
  }
}

TEST_CASE("bad /traffic values are errors at their JSON pointer") {
  const std::string L = std::string(", ") + kLens;
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "poisson", "rate_per_s": 0})" + L + "}") ==
        "/traffic/arrival/rate_per_s");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "poisson", "rate_per_s": 2e7})" + L + "}") ==
        "/traffic/arrival/rate_per_s");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "gamma", "rate_per_s": 1, "cv": 0})" + L + "}") ==
        "/traffic/arrival/cv");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "gamma", "rate_per_s": 1, "cv": 101})" + L + "}") ==
        "/traffic/arrival/cv");
  // A key of another process is not silently ignored.
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "poisson", "rate_per_s": 1, "cv": 2})" + L + "}") ==
        "/traffic/arrival/cv");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "ramp"})" + L + "}") == "/traffic/arrival/process");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "poisson"})" + L + "}") == "/traffic/arrival/rate_per_s");
  CHECK(error_path(R"({"arrival": {"process": "offline"})" + L + "}") == "/traffic/requests");
  CHECK(error_path(R"({"arrival": {"process": "poisson", "rate_per_s": 1})" + L + "}") == "/traffic/requests");
  CHECK(error_path(R"({"duration_s": 1, "arrival": {"process": "steps", "steps": [[0, 1], [5, 2], [4, 1]]})" + L +
                   "}") == "/traffic/arrival/steps/2/0");
  CHECK(error_path(R"({"duration_s": 1, "arrival": {"process": "steps", "steps": [[1, 1]]})" + L + "}") ==
        "/traffic/arrival/steps/0/0");
  CHECK(error_path(R"({"duration_s": 1, "arrival": {"process": "steps", "steps": [[0, -1]]})" + L + "}") ==
        "/traffic/arrival/steps/0/1");
  CHECK(error_path(R"({"duration_s": 1, "arrival": {"process": "diurnal", "min_rate_per_s": 5, "max_rate_per_s": 2})" +
                   L + "}") == "/traffic/arrival/min_rate_per_s");
  CHECK(error_path(R"({"duration_s": 1, "arrival": {"process": "closed_loop", "users": 0})" + L + "}") ==
        "/traffic/arrival/users");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "fixed", "value": 16777217}, "output_tokens": {"dist": "fixed", "value": 1}})") ==
        "/traffic/input_tokens/value");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "uniform", "min": 10, "max": 5}, "output_tokens": {"dist": "fixed", "value": 1}})") ==
        "/traffic/input_tokens/max");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "lognormal", "sigma": 1}, "output_tokens": {"dist": "fixed", "value": 1}})") ==
        "/traffic/input_tokens/median");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"},
      "input_tokens": {"dist": "empirical", "values": [3, 0]}, "output_tokens": {"dist": "fixed", "value": 1}})") ==
        "/traffic/input_tokens/values/1");
  CHECK(error_path(
            R"({"requests": 5, "arrival": {"process": "offline"}, "input_tokens": {"dist": "fixed", "value": 1}})") ==
        "/traffic/output_tokens");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"}, "prefix": {"share_ratio": 1.5})" + L + "}") ==
        "/traffic/prefix/share_ratio");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"}, "classes": [{"share": 0}])" + L + "}") ==
        "/traffic/classes/0/share");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"}, "classes": [])" + L + "}") ==
        "/traffic/classes");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"}, "sessions": {"turns": 0})" + L + "}") ==
        "/traffic/sessions/turns");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"}, "rate": 3)" + L + "}") == "/traffic/rate");
  CHECK(error_path(R"({"requests": 5, "arrival": {"process": "offline"})" + L + "}") == "(none)");
}

TEST_CASE("traffic_param_tables lists every table with documented keys") {
  const auto tables = traffic_param_tables();
  CHECK(tables.size() == 7);
  for (const auto& t : tables) {
    CAPTURE(t.path);
    CHECK_FALSE(t.params.empty());
    for (const auto& d : t.params) CHECK_FALSE(d.doc.empty());
  }
  CHECK(tables[1].path == "/traffic/arrival");
}
