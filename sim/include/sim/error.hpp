// Errors that reach the user. InputError is bad input (exit status 2); anything else
// escaping to main is an internal error (exit status 1).
#pragma once

#include <stdexcept>
#include <string>

namespace ctwin {

enum ExitCode : int { kExitOk = 0, kExitInternal = 1, kExitBadInput = 2, kExitOutOfMemory = 3 };

// One clear message: where (file and JSON pointer path), what was found, what is expected.
struct InputError : std::runtime_error {
  std::string file;      // may be empty for command-line input
  std::string path;      // JSON pointer such as /training/parallelism/tp, or a flag name
  std::string problem;   // what is wrong, including what was found
  std::string expected;  // what would be accepted

  InputError(std::string file_, std::string path_, std::string problem_, std::string expected_ = {})
      : std::runtime_error(format(file_, path_, problem_, expected_)),
        file(std::move(file_)),
        path(std::move(path_)),
        problem(std::move(problem_)),
        expected(std::move(expected_)) {}

  static std::string format(const std::string& file, const std::string& path, const std::string& problem,
                            const std::string& expected) {
    std::string m;
    if (!file.empty()) m += file + ": ";
    if (!path.empty()) m += path + ": ";
    m += problem;
    if (!expected.empty()) m += "; expected " + expected;
    return m;
  }
};

}  // namespace ctwin
