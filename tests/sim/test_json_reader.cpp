// The JSON reader's limits: nesting depth, numbers beyond a double, bounded excerpts of values,
// and input files that are regular and at most 64 MiB.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace ctwin {
namespace {

// The InputError's (path, problem) of parse_json(text), or empty strings when it parses.
std::pair<std::string, std::string> parse_failure(const std::string& text) {
  try {
    parse_json(text, "f.json");
  } catch (const InputError& e) {
    return {e.path, e.problem};
  }
  return {};
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ctwin_json_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

}  // namespace

TEST_CASE("JSON nested 256 deep parses; 257 deep, or 10^5 deep, is an InputError at its pointer, not a crash") {
  CHECK(parse_failure(nested(kMaxJsonDepth)).first.empty());
  const auto [path, problem] = parse_failure(nested(kMaxJsonDepth + 1));
  CHECK(problem.find("nested more than 256 levels") != std::string::npos);
  CHECK(path.rfind("/0/0/0/", 0) == 0);
  CHECK(path.size() < 80);  // the pointer is cut short: one line
  const auto deep = parse_failure("{\"a\": " + nested(100000) + "}");
  CHECK(deep.first.rfind("/a/0/0", 0) == 0);
  CHECK(deep.second.find("nested more than 256 levels") != std::string::npos);
}

TEST_CASE("a number beyond a double is an InputError at the value's pointer, in objects, arrays and keys with '/'") {
  CHECK(parse_failure(R"({"a": [1, {"b": 1e400}]})") ==
        std::pair<std::string, std::string>{"/a/1/b", "found 1e400, beyond the range of a double"});
  CHECK(parse_failure(R"({"x": "1e400", "y/z": -1E+999})").first == "/y~1z");
  CHECK(parse_failure("1e400").first == "/");
  // Tiny numbers round to zero or a subnormal: a value, left to the key's bounds.
  CHECK(parse_failure(R"({"a": 1e-400, "b": 1.7e308, "c": 123456789012345678901234567890})").first.empty());
}

TEST_CASE("check_json_text prefixes its pointer: a --set value names the flag's pointer") {
  try {
    check_json_text("[2, 1e999]", "s.json (--set)", "/training/x");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.file == "s.json (--set)");
    CHECK(e.path == "/training/x/1");
  }
}

TEST_CASE("shown() quotes at most 60 characters of a value, however large or deep") {
  Json deep = Json::array();
  Json* at = &deep;
  for (int i = 0; i < 10000; ++i) {
    at->push_back(Json::array());
    at = &(*at)[0];
  }
  const std::string d = shown(deep);
  CHECK(d.size() == 60);
  CHECK(d == std::string(57, '[') + "...");
  Json wide = Json::object();
  for (int i = 0; i < 1000; ++i) wide["key" + std::to_string(i)] = std::string(1000, 'x');
  CHECK(shown(wide).size() == 60);
  CHECK(shown(Json(std::string(100000, 'y'))).size() == 60);
  CHECK(shown(Json{{"a", 1}, {"b", "c"}}) == R"({"a":1,"b":"c"})");
  CHECK(shown(Json(3)) == "3");
}

TEST_CASE("shown() never cuts a UTF-8 character in two (a fuzz finding: dump() threw on the half)") {
  // "\u04d0" is two bytes (0xD3 0x90); strings, keys and the final cut land on every offset.
  const std::string two = "\xd3\x90";
  for (std::size_t pad = 0; pad < 4; ++pad) {
    std::string text(pad, 'a');
    for (int i = 0; i < 60; ++i) text += two;
    const std::string v = shown(Json(text));
    const std::string k = shown(Json{{text, 1}});
    for (const std::string& s : {v, k}) {
      CAPTURE(s);
      CHECK(s.size() <= 60);
      CHECK(s.size() >= 56);  // at most one character short of the cut
      CHECK_NOTHROW((void)Json(s).dump());
      // Every lead byte 0xD3 is followed by its 0x90.
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (static_cast<unsigned char>(s[i]) == 0xD3)
          CHECK((i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x90));
      }
    }
  }
}

TEST_CASE("an unknown key a megabyte long is named by its first characters, without a suggestion") {
  const Json j{{std::string(1 << 20, 'k'), 1}};
  try {
    JsonObject(j, "/top", "f.json").only({"name"});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.path == "/top/" + std::string(57, 'k') + "...");
    CHECK(e.problem == "unknown key");
  }
}

TEST_CASE("raw() of a missing key is an InputError naming its pointer, not a JSON library exception") {
  const Json j{{"a", 1}};
  const std::string file = "f.json";  // JsonObject keeps a reference to it
  const JsonObject o(j, "/top", file);
  CHECK(o.raw("a") == 1);
  try {
    (void)o.raw("b");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.file == "f.json");
    CHECK(e.path == "/top/b");
    CHECK(e.problem == "missing required key");
  }
}

TEST_CASE("read_input_file refuses a directory, a device, a missing file and one over 64 MiB, naming the file") {
  auto problem = [](const std::string& path) {
    try {
      read_input_file(path, "scenario.json", "/cluster/file", "a cluster file");
    } catch (const InputError& e) {
      CHECK(e.file == "scenario.json");
      CHECK(e.path == "/cluster/file");
      CHECK(e.expected == "a cluster file");
      return e.problem;
    }
    return std::string();
  };
  CHECK(problem("/dev/zero") == "\"/dev/zero\" is a character device, not a regular file");
  const auto dir = scratch("");
  CHECK(problem(dir.string()).find("is a directory, not a regular file") != std::string::npos);
  CHECK(problem((dir / "missing.json").string()).find("cannot open") != std::string::npos);
  const auto big = scratch("big.json");
  { std::ofstream(big) << "{}"; }
  CHECK(read_input_file(big.string(), "s", "", "x") == "{}");
  std::filesystem::resize_file(big, kMaxInputBytes + 1);  // sparse: costs no disk
  const std::string too_big = problem(big.string());
  CHECK(too_big.find(big.string()) != std::string::npos);
  CHECK(too_big.find("is 67108865 bytes, over the limit of 64 MiB on an input file") != std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace ctwin
