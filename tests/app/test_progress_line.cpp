#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "cli.hpp"

namespace {

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  for (int c = std::fgetc(f); c != EOF; c = std::fgetc(f)) s.push_back(static_cast<char>(c));
  return s;
}

}  // namespace

TEST_CASE("the progress line stays hidden for the first second, shows after it, and only on a terminal") {
  using namespace std::chrono_literals;
  auto now = std::chrono::steady_clock::time_point{};
  const auto clock = [&now] { return now; };

  std::FILE* out = std::tmpfile();
  REQUIRE(out != nullptr);
  {
    ctwin::ProgressLine line("simulating", out, true, clock);
    now += 999ms;
    line.update(0.5);
    CHECK(read_all(out).empty());  // a run under a second shows nothing
    now += 2ms;
    line.update(0.25);
    CHECK(read_all(out) == "\rsimulating  25.0%");
  }
  // The destructor clears the line it drew: blanks over label + percentage, then back to column 0.
  const std::string cleared = read_all(out);
  CHECK(cleared.rfind("\r" + std::string(18, ' ') + "\r") == cleared.size() - 20);
  std::fclose(out);

  std::FILE* pipe = std::tmpfile();
  REQUIRE(pipe != nullptr);
  {
    ctwin::ProgressLine line("simulating", pipe, false, clock);
    now += 10s;
    line.update(0.9);
  }
  CHECK(read_all(pipe).empty());  // never in pipes or files
  std::fclose(pipe);
}
