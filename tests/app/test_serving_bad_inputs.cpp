// Bad serving input (issue 14, "Bad input"): every /serving and /traffic defect ends with exit
// status 2 and one error line naming the scenario file and the JSON pointer; a referenced data
// file's defect names that file's row or line too. Requests that can never fit are not an input
// error: they are rejected and counted, as vLLM does, and the run exits 0.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"

namespace ctwin {
namespace {

using test::cli;
using test::slurp;
using test::temp_dir;

std::size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  std::size_t n = 0;
  for (std::size_t b = 0; b < text.size();) {
    std::size_t e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    if (text.compare(b, prefix.size(), prefix) == 0) ++n;
    b = e + 1;
  }
  return n;
}

// Exit 2, exactly one "error: " line (and nothing else on stderr), naming `file` and `pointer`.
void check_refused(const test::Run& r, const std::string& file, const std::string& pointer) {
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(count_lines_starting(r.err, "error: ") == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(file) != std::string::npos);
  CHECK(r.err.find(": " + pointer) != std::string::npos);
}

// A small serving scenario (50 requests of 100 + 20 tokens) to edit.
nlohmann::json small_serving() {
  return nlohmann::json::parse(R"({"name": "s", "kind": "serving", "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b", "serving": {"max_num_seqs": 16, "max_num_batched_tokens": 2048},
    "traffic": {"arrival": {"process": "poisson", "rate_per_s": 10}, "requests": 50,
                "input_tokens": {"dist": "fixed", "value": 100}, "output_tokens": {"dist": "fixed", "value": 20}}})");
}

std::string write(const std::string& name, const nlohmann::json& j) {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << j.dump();
  return p.string();
}

nlohmann::json run_json(const std::string& file) {
  const auto r = cli("run " + file + " --json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("every serving scenario in tests/app/scenarios/bad is refused with exit 2 at its pointer" *
          doctest::test_suite("slow")) {
  const auto dir = std::filesystem::path(ctwin::test::source_dir()) / "tests/app/scenarios/bad";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("serving-", 0) == 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 50);
  for (const auto& f : files) {
    CAPTURE(f.filename().string());
    const auto sc = nlohmann::json::parse(slurp(f));
    REQUIRE(sc.contains("_expect_error"));
    CHECK(sc.at("kind") == "serving");
    const std::string rel = "tests/app/scenarios/bad/" + f.filename().string();
    check_refused(cli("run " + rel + " --json"), rel, sc.at("_expect_error").get<std::string>());
  }
}

TEST_CASE("a malformed trace or length file is refused at the key naming it, with the file's row or line") {
  const std::string trace = "tests/app/scenarios/bad/serving-trace-malformed.json";
  auto r = cli("run " + trace);
  check_refused(r, trace, "/traffic/arrival/file");
  CHECK(r.err.find("serving-data/trace-malformed.csv, row 2, column ContextTokens: found \"lots\"") !=
        std::string::npos);

  // Line 3 of the length file is "56 abc 77": the error quotes the field, not the rest of the line.
  const std::string lengths = "tests/app/scenarios/bad/serving-empirical-file-malformed.json";
  r = cli("run " + lengths);
  check_refused(r, lengths, "/traffic/input_tokens/file");
  CHECK(r.err.find("serving-data/lengths-malformed.txt, line 3: found \"abc\";") != std::string::npos);
}

TEST_CASE("a bad serving key through --set is refused naming the scenario and the pointer") {
  const std::string sc = "scenarios/serving-llama3-8b-h100.json";
  check_refused(cli("run " + sc + " --set /serving/max_num_seqs=0 --json"), sc, "/serving/max_num_seqs");
  check_refused(cli("run " + sc + " --set /traffic/arrival/rate_per_s='\"fast\"' --json"), sc,
                "/traffic/arrival/rate_per_s");
  check_refused(cli("run " + sc + " --set /serving/quantization='\"fp4\"' --json"), sc, "/serving/quantization");
  // The message says the value came from the command line, not the file.
  CHECK(cli("run " + sc + " --set /serving/max_num_seqs=0").err.find("(set by --set /serving/max_num_seqs=0)") !=
        std::string::npos);
  CHECK(cli("run " + sc + " --set /serving='{\"max_num_seq\": 3}'").err.find("(set by --set /serving=") !=
        std::string::npos);
  // A bad key of the file itself, beside an unrelated --set: no mention of --set.
  const std::string bad = "tests/app/scenarios/bad/serving-unknown-key.json";
  CHECK(cli("run " + bad + " --set /serving/max_num_seqs=8").err.find("set by") == std::string::npos);
}

TEST_CASE("serving: requests beyond max_model_len are rejected and counted, the run exits 0") {
  // 500 + 20 = 520 tokens: max_model_len 520 admits them all, 519 rejects them all (vLLM's test is
  // prompt + max_tokens > max_model_len).
  auto sc = small_serving();
  sc["traffic"]["input_tokens"]["value"] = 500;
  sc["serving"]["max_model_len"] = 520;
  auto j = run_json(write("fits.json", sc));
  CHECK(j["requests"]["rejected"] == 0);
  CHECK(j["requests"]["completed"] == 50);
  sc["serving"]["max_model_len"] = 519;
  j = run_json(write("too-long.json", sc));
  CHECK(j["requests"]["rejected"] == 50);
  CHECK(j["requests"]["completed"] == 0);
  CHECK(j["requests"]["arrived"] == 50);
}

TEST_CASE("serving: a KV cache smaller than max_model_len refuses to start (exit 3); at its size every request fits") {
  // 20.5% of an H100 leaves a KV cache of a few hundred blocks after Llama-3-8B's ~15 GiB of
  // weights: below the model's 8192-token context, which vLLM refuses ("max_model_len is larger
  // than the KV cache can store").
  auto sc = small_serving();
  sc["serving"]["gpu_memory_utilization"] = 0.205;
  const auto refused = cli("run " + write("small-kv.json", sc) + " --json");
  CHECK(refused.status == 3);
  const auto at = refused.err.find("is larger than the ");
  REQUIRE(at != std::string::npos);
  const std::int64_t capacity = std::stoll(refused.err.substr(at + 19));
  REQUIRE(capacity > 200);
  REQUIRE(capacity < 8192);

  // max_model_len at the capacity: the longest request (prompt + 20 = capacity) is served; one
  // token more is rejected and counted.
  sc["serving"]["max_model_len"] = capacity;
  sc["traffic"]["input_tokens"]["value"] = capacity - 20;
  auto j = run_json(write("kv-fits.json", sc));
  CHECK(j["kv_cache"]["tokens"] == capacity);
  CHECK(j["requests"]["rejected"] == 0);
  CHECK(j["requests"]["completed"] == 50);
  sc["traffic"]["input_tokens"]["value"] = capacity - 19;
  const auto r = cli("run " + write("kv-too-big.json", sc) + " --json");
  CHECK(r.status == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["requests"]["rejected"] == 50);
  CHECK(j["requests"]["completed"] == 0);
  CHECK(r.err.find("50 requests rejected") != std::string::npos);  // and a warning says so
}

}  // namespace ctwin
