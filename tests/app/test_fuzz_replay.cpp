// Every saved fuzz input (tests/fuzz/corpus/TARGET/ seeds and tests/fuzz/regressions/TARGET/
// crashes) through the same entry points the libFuzzer targets call (tests/fuzz/fuzz_entries.hpp):
// each ends normally or with an expected error (InputError, TimeOverflow, OutputError), in every
// build. Files named *.known are open findings and are skipped (docs/reliability.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "../fuzz/fuzz_entries.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;

namespace {

using Entry = std::function<void(std::string_view)>;

const std::map<std::string, Entry>& entries() {
  static const std::map<std::string, Entry> e = {
      {"scenario",
       [](std::string_view b) { ctwin::fuzz::run_scenario(b, ctwin::fuzz::scenario_path(ctwin::test::source_dir())); }},
      {"hf_config", [](std::string_view b) { ctwin::fuzz::run_hf_config(b, fs::temp_directory_path()); }},
      {"cluster_json", [](std::string_view b) { ctwin::fuzz::run_cluster_json(b); }},
      {"profile", [](std::string_view b) { ctwin::fuzz::run_profile(b); }},
      {"measurements", [](std::string_view b) { ctwin::fuzz::run_measurements(b); }},
      {"trace_binary", [](std::string_view b) { ctwin::fuzz::run_trace_binary(b); }},
      {"chrome_trace", [](std::string_view b) { ctwin::fuzz::run_chrome_trace(b); }},
      {"request_trace", [](std::string_view b) { ctwin::fuzz::run_request_trace(b); }},
      {"mooncake_trace", [](std::string_view b) { ctwin::fuzz::run_mooncake_trace(b); }},
  };
  return e;
}

std::vector<fs::path> saved_inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(ctwin::test::source_dir()) / "tests/fuzz" / kind / target;
  if (!fs::is_directory(dir)) return files;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (!f.is_regular_file() || f.path().extension() == ".known" || f.path().filename() == "README.md") continue;
    files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replay(const std::string& kind) {
  std::size_t total = 0;
  for (const auto& entry : entries()) {
    const Entry& run = entry.second;  // not a structured binding: clang 14 cannot capture those
    for (const auto& file : saved_inputs(kind, entry.first)) {
      ++total;
      CAPTURE(file.string());
      const std::string bytes = read_bytes(file);
      std::string unexpected;
      try {
        ctwin::fuzz::expected_outcome([&] { run(bytes); });
      } catch (const std::exception& e) {
        unexpected = e.what();
      } catch (...) {
        unexpected = "a non-standard exception";
      }
      CHECK_MESSAGE(unexpected.empty(), "unexpected outcome: ", unexpected);
    }
  }
  MESSAGE(kind, ": ", total, " inputs replayed");
}

}  // namespace

TEST_CASE("fuzz seed corpora end normally or as InputError") { replay("corpus"); }

TEST_CASE("every input a fuzz target ever crashed on ends normally or as InputError") {
  replay("regressions");
  CHECK(fs::is_directory(fs::path(ctwin::test::source_dir()) / "tests/fuzz/regressions"));
}
