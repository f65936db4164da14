// A typed view of a JSON object that knows its own JSON pointer, so every error names the
// file, the path, what was found and what is expected. Unknown keys are errors with a
// "did you mean" suggestion; nothing is defaulted silently (defaults are the caller's,
// documented in docs/scenarios.md).
#pragma once

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
// A value as the user wrote it, for messages: 3, "abc", true, an object, ...
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
  const Json& raw(const std::string& key) const { return j_.at(key); }

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
// Parses text as JSON; a syntax error is an InputError naming the file, line and column.
Json parse_json(const std::string& text, const std::string& file);
// "\"a\", \"b\"" for messages.
std::string list_of(const std::vector<std::string>& names);

}  // namespace ctwin
