// Running the ctwin executable from tests/app: a per-process scratch directory, captured stdout,
// stderr and exit status. Runs the build's ctwin (test_paths.hpp) from the source tree.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.hpp"

namespace ctwin::test {

struct Run {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One scratch directory per test process, removed when the process exits.
inline std::filesystem::path temp_dir() {
  struct Scratch {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ctwin_app_test_" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static Scratch scratch;
  return scratch.dir;
}

// Runs ctwin with `args` from the source tree; captures stdout, stderr and the exit status. Named
// cli, not ctwin, which would clash with the namespace.
inline Run cli(const std::string& args) {
  const auto d = temp_dir();
  const std::string out = (d / "out").string(), err = (d / "err").string();
  const std::string cmd = std::string("cd ") + ctwin::test::source_dir() + " && " + ctwin::test::ctwin_exe() + " " +
                          args + " >" + out + " 2>" + err;
  Run r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A run refused as bad input: exit 2, nothing on stdout, one "error: " naming the file and the
// JSON pointer at fault.
inline void check_input_error(const Run& r, const std::string& file, const std::string& pointer) {
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("error: ", 0) == 0);
  CHECK(r.err.find(file) != std::string::npos);
  CHECK(r.err.find(": " + pointer + ": ") != std::string::npos);
}

}  // namespace ctwin::test
