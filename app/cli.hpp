// Command-line parsing shared by the subcommands: flags are declared with their help text,
// unknown flags and missing values are InputErrors naming the flag.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"

namespace ctwin {

struct FlagSpec {
  std::string name;   // "--json"
  std::string value;  // "" for a switch; otherwise the value's name, e.g. "FILE"
  std::string help;
  bool repeatable = false;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // flag -> values ("" for switches)

  bool has(const std::string& flag) const { return values.count(flag) != 0; }
  std::optional<std::string> get(const std::string& flag) const;
  std::vector<std::string> all(const std::string& flag) const;
  // Parses a number; InputError naming the flag if it is not one.
  double number(const std::string& flag, double fallback) const;
  // Parses sizes such as 8, 64K, 1M, 8G (powers of 1024), as nccl-tests does.
  double bytes(const std::string& flag, double fallback) const;
};

// Returns nullopt when --help was given (after printing help for the command on stdout).
std::optional<ParsedArgs> parse_args(const Args& args, const std::string& usage, const std::vector<FlagSpec>& flags);

// Parses "8G" style sizes; throws InputError naming `what`.
double parse_bytes(const std::string& text, const std::string& what);

// Writes `text` to `path` for a --write flag: refuses an existing file unless `force`, and
// writes a temporary file beside it that is renamed into place, so a failed write never leaves
// a half-written file where the user's was. Throws InputError naming the path.
void write_output_file(const std::string& path, const std::string& text, bool force);

// A "\rLABEL 42.0%" line on stderr for work that runs longer than a second, only when stderr is
// a terminal (never in pipes, files or tests); the destructor clears it.
class ProgressLine {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit ProgressLine(std::string label);
  // For tests: where it writes, whether that is a terminal, and the clock it reads.
  ProgressLine(std::string label, std::FILE* out, bool tty, Clock clock);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(double fraction);
  // With what is done in words ("120/7000 configurations") and, once a tenth of a second per
  // percent has been seen, the time left at the rate so far.
  void update(double fraction, const std::string& detail);
  void clear();  // before printing on stdout, which shares the terminal

 private:
  bool held_back() const;  // not a terminal, or within the first second
  std::string label_;
  std::FILE* out_;
  bool tty_;
  Clock clock_;
  bool shown_ = false;
  std::size_t last_width_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ctwin
