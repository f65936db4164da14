// Malformed and extreme inputs (the "Reliability" issue): each ends with exit status 2 and one
// line of stderr naming the file and the JSON pointer, never a signal, an "internal error" or a
// run that exhausts memory. tests/app/scenarios/bad/ holds one scenario per defect; its
// "_expect_error" comment is the pointer the error must name (HF configs: the config's key).
#include <sys/stat.h>
#include <sys/wait.h>

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

using test::slurp;
using test::temp_dir;

// ctwin under a time limit (a FIFO or /dev/zero read by mistake would otherwise hang the test).
test::Run limited(const std::string& args) {
  const auto d = temp_dir();
  const std::string out = (d / "out").string(), err = (d / "err").string();
  const std::string cmd = std::string("cd ") + ctwin::test::source_dir() + " && timeout 30 " +
                          ctwin::test::ctwin_exe() + " " + args + " >" + out + " 2>" + err;
  test::Run r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// The one "error: " line of stderr.
std::string error_line(const std::string& err) {
  std::string line;
  std::size_t lines = 0;
  for (std::size_t b = 0; b < err.size();) {
    std::size_t e = err.find('\n', b);
    if (e == std::string::npos) e = err.size();
    const std::string l = err.substr(b, e - b);
    if (l.rfind("error: ", 0) == 0) {
      line = l;
      ++lines;
    }
    b = e + 1;
  }
  CHECK(lines == 1);
  return line;
}

// Exit 2, no internal error, and an error line naming `file` and `pointer`.
void check_refused(const test::Run& r, const std::string& file, const std::string& pointer) {
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find("internal error") == std::string::npos);
  const std::string line = error_line(r.err);
  CHECK(line.find(file) != std::string::npos);
  CHECK(line.find(pointer) != std::string::npos);
  CHECK(line.size() < 600);
}

std::string write(const std::string& name, const std::string& text) {
  const auto p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

const char* kQuickstart = R"({"name": "q", "kind": "training", "seed": 1, "cluster": {"preset": "dgx-h100", "nodes": 1},
  "model": "llama3.2-1b", "training": {"micro_batch": 2, "global_batch": 64, "seq_len": 4096}})";

}  // namespace

TEST_CASE("every scenario in tests/app/scenarios/bad is refused with exit 2 naming its file and pointer" *
          doctest::test_suite("slow")) {
  const auto dir = std::filesystem::path(ctwin::test::source_dir()) / "tests/app/scenarios/bad";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 12 && name.substr(name.size() - 12) == ".config.json") continue;  // HF configs they name
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 30);
  for (const auto& f : files) {
    CAPTURE(f.filename().string());
    // Read as text: some of these files are not JSON nlohmann can parse (1e400).
    const std::string text = slurp(f), tag = "\"_expect_error\": \"";
    const auto at = text.find(tag);
    REQUIRE(at != std::string::npos);
    const auto begin = at + tag.size();
    const std::string expect = text.substr(begin, text.find('"', begin) - begin);
    const std::string stem = f.stem().string();  // the scenario, or the HF config named after it
    check_refused(limited("run tests/app/scenarios/bad/" + f.filename().string() + " --json"),
                  "tests/app/scenarios/bad/" + stem + ".", expect);
  }
}

TEST_CASE("a scenario nested 10^5 deep is refused at its pointer, not a stack overflow") {
  const std::string f = write("deep.json", "{\"name\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  check_refused(limited("run " + f + " --json"), f, "/name/0/0/0");
}

TEST_CASE("1e400 through --set is refused naming the flag and the pointer") {
  const auto r = limited("run scenarios/quickstart.json --set /training/seq_len=1e400 --json");
  check_refused(r, "scenarios/quickstart.json (--set)", "/training/seq_len");
  check_refused(limited("run scenarios/quickstart.json --set /training/seq_len=[[1e400]] --json"), "(--set)",
                "/training/seq_len/0/0");
}

TEST_CASE("/dev/zero, a directory or a FIFO as the scenario is refused naming it") {
  check_refused(limited("run /dev/zero --json"), "/dev/zero", "a character device, not a regular file");
  const std::string dir = temp_dir().string();
  check_refused(limited("run " + dir + " --json"), dir, "is a directory, not a regular file");
  const std::string fifo = (temp_dir() / "fifo.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_refused(limited("run " + fifo + " --json"), fifo, "is a FIFO (named pipe), not a regular file");
  std::filesystem::remove(fifo);
}

TEST_CASE("/dev/zero as /cluster/file, as /model/hf_config or as /profile/file is refused at that key") {
  auto sc = nlohmann::json::parse(kQuickstart);
  sc["cluster"] = {{"file", "/dev/zero"}};
  check_refused(limited("run " + write("cf.json", sc.dump()) + " --json"), "cf.json", "/cluster/file");
  sc = nlohmann::json::parse(kQuickstart);
  sc["model"] = {{"hf_config", "/dev/zero"}};
  check_refused(limited("run " + write("hf.json", sc.dump()) + " --json"), "hf.json", "/model/hf_config");
  sc = nlohmann::json::parse(kQuickstart);
  sc["profile"] = {{"file", "/dev/zero"}};
  check_refused(limited("run " + write("pf.json", sc.dump()) + " --json"), "pf.json", "/profile/file");
}

TEST_CASE("a scenario file over 64 MiB is refused before it is read") {
  const std::string f = write("big.json", kQuickstart);
  std::filesystem::resize_file(f, (64ull << 20) + 1);  // sparse
  check_refused(limited("run " + f + " --json"), f, "over the limit of 64 MiB");
}

}  // namespace ctwin
