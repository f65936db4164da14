// A typed view of a JSON object that knows its own JSON pointer, so every error names the
// file, the path, what was found and what is expected. Unknown keys are errors with a
// "did you mean" suggestion; nothing is defaulted silently (defaults are the caller's,
// documented in docs/scenarios.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ctwin {

using Json = nlohmann::json;

// Levenshtein distance, for suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);
// The closest candidate within a small distance, or empty.
std::string closest(const std::string& word, const std::vector<std::string>& candidates);
// A value as the user wrote it, for messages: 3, "abc", true, an object, ... At most 60
// characters, computed without dumping the whole value (a huge or deep one costs no more).
std::string shown(const Json& v);
// Byte offset -> "line L, column C".
std::string line_column(const std::string& text, std::size_t byte);

class JsonObject {
 public:
  JsonObject(const Json& j, std::string path, const std::string& file);

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  std::string child(const std::string& key) const { return path_ + "/" + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  // The value at key as is; a missing key is an InputError ("missing required key"), never a
  // JSON library exception.
  const Json& raw(const std::string& key) const;

  // Every key must be one of `allowed`; keys starting with '_' are comments.
  void only(std::initializer_list<const char*> allowed) const;
  void only(const std::vector<std::string>& allowed) const;

  std::string string(const std::string& key, const std::optional<std::string>& def = std::nullopt) const;
  // One of `choices`.
  std::string choice(const std::string& key, std::initializer_list<const char*> choices,
                     const std::optional<std::string>& def = std::nullopt) const;
  std::string choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::optional<std::string>& def = std::nullopt) const;
  double number(const std::string& key, const std::optional<double>& def = std::nullopt, double min = -1e300,
                double max = 1e300, bool min_exclusive = false) const;
  long long integer(const std::string& key, const std::optional<long long>& def = std::nullopt, long long min = 0,
                    long long max = (1ll << 53)) const;
  bool boolean(const std::string& key, const std::optional<bool>& def = std::nullopt) const;
  JsonObject object(const std::string& key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& problem, const std::string& expected) const;

 private:
  const Json& at(const std::string& key, const char* what) const;
  const Json& j_;
  std::string path_;
  const std::string& file_;
};

// A scenario's /catalog/<kind>/NAME entries merged onto a builtin catalog (a JSON object of
// entries); each entry remembers where it came from, so errors name the right file and path.
struct CatalogEntry {
  Json value;
  std::string file;
  std::string path;
};
using CatalogEntries = std::map<std::string, CatalogEntry>;
CatalogEntries merged_catalog(const Json& builtin, const std::string& builtin_file, const Json* scenario_part,
                              const std::string& scenario_file, const std::string& kind);
// Limits on JSON inputs (scenarios, cluster files, HF configs, profiles, --set values).
inline constexpr std::size_t kMaxJsonDepth = 256;              // nested arrays/objects
inline constexpr std::uintmax_t kMaxInputBytes = 64ull << 20;  // 64 MiB a file
// The text of an input file: a regular file of at most kMaxInputBytes. A missing or unreadable
// file, a directory, a device (/dev/zero), a FIFO or an oversized file is an InputError at
// err_file / err_pointer (the scenario key that names the file, or "" for the scenario itself)
// naming `path`, with `expected` as what would be accepted.
std::string read_input_file(const std::string& path, const std::string& err_file, const std::string& err_pointer,
                            const std::string& expected);
// Checks JSON text, before parsing, for what the parser would crash on or report without a
// place: nesting deeper than kMaxJsonDepth, and numbers beyond the range of a double (1e400).
// Either is an InputError at file / pointer_prefix + the JSON pointer of the value. Linear,
// without recursion; malformed text is left to the parser.
void check_json_text(const std::string& text, const std::string& file, const std::string& pointer_prefix = "");
// Parses text as JSON (after check_json_text); a syntax error is an InputError naming the file,
// line and column.
Json parse_json(const std::string& text, const std::string& file);
// "\"a\", \"b\"" for messages.
std::string list_of(const std::vector<std::string>& names);

}  // namespace ctwin
