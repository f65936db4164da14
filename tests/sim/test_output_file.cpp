#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/error.hpp"
#include "sim/output_file.hpp"

namespace fs = std::filesystem;
using ctwin::InputError;
using ctwin::write_file_atomically;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ctwin_output_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

int entries(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("an output is written whole, with the usual permissions, and leaves no temporary file") {
  const fs::path d = scratch("new");
  const fs::path out = d / "trace.json";
  write_file_atomically(out, false, "--trace", [](std::ostream& o) { o << "{\"a\": 1}\n"; });
  CHECK(read(out) == "{\"a\": 1}\n");
  CHECK(entries(d) == 1);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((fs::status(out).permissions() & fs::perms::all) == static_cast<fs::perms>(0666 & ~mask));
}

TEST_CASE("an existing file is replaced only with replace, and refused before anything is written") {
  const fs::path d = scratch("exists");
  const fs::path out = d / "report.txt";
  put(out, "the user's file");
  bool called = false;
  CHECK_THROWS_AS(write_file_atomically(out, false, "--write", [&](std::ostream&) { called = true; }), InputError);
  CHECK_FALSE(called);
  CHECK(read(out) == "the user's file");
  write_file_atomically(out, true, "--write", [](std::ostream& o) { o << "new"; });
  CHECK(read(out) == "new");
  CHECK(entries(d) == 1);
}

TEST_CASE("a symbolic link at the output is never followed, even with replace") {
  const fs::path d = scratch("link");
  put(d / "precious", "keep me");
  fs::create_symlink(d / "precious", d / "out.json");
  CHECK_THROWS_WITH_AS(write_file_atomically(d / "out.json", true, "--trace", [](std::ostream& o) { o << "x"; }),
                       doctest::Contains("symbolic link"), InputError);
  CHECK(read(d / "precious") == "keep me");
  CHECK(fs::is_symlink(d / "out.json"));
}

TEST_CASE("a writer that fails half way leaves the old file and no temporary file") {
  const fs::path d = scratch("throws");
  const fs::path out = d / "t.ctt";
  put(out, "old trace");
  CHECK_THROWS(write_file_atomically(out, true, "--trace", [](std::ostream& o) {
    o << "half of a new tr";
    throw std::runtime_error("simulated failure");
  }));
  CHECK(read(out) == "old trace");
  CHECK(entries(d) == 1);
}

TEST_CASE("a process killed mid-write with --force keeps the previous file intact") {
  const fs::path d = scratch("killed");
  const fs::path out = d / "t.json";
  const std::string old(1 << 20, 'o');
  put(out, old);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    write_file_atomically(out, true, "--trace", [](std::ostream& o) {
      o << std::string(1 << 19, 'n');
      o.flush();
      ::raise(SIGKILL);  // killed with half the new file written
    });
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(read(out) == old);
}

TEST_CASE("a missing directory is named before any work") {
  const fs::path d = scratch("nodir");
  CHECK_THROWS_WITH_AS(ctwin::check_output_path(d / "missing" / "t.json", false, "--trace"),
                       doctest::Contains("does not exist"), InputError);
}

TEST_CASE("a file that appears while the output is written is kept, not clobbered") {
  const fs::path d = scratch("race");
  const fs::path out = d / "t.json";
  CHECK_THROWS_WITH_AS(write_file_atomically(out, false, "--trace",
                                             [&](std::ostream& o) {
                                               put(out, "written meanwhile");
                                               o << "ours";
                                             }),
                       doctest::Contains("appeared"), InputError);
  CHECK(read(out) == "written meanwhile");
  CHECK(entries(d) == 1);
}

TEST_CASE("Ctrl-C while an output is written removes the temporary file and keeps the old one") {
  const fs::path d = scratch("sigint");
  const fs::path out = d / "t.json";
  put(out, "old");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    write_file_atomically(out, true, "--trace", [](std::ostream& o) {
      o << "partial";
      o.flush();
      ::raise(SIGINT);
    });
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  CHECK(read(out) == "old");
  CHECK(entries(d) == 1);  // no temporary file left behind
}
