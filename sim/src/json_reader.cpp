#include "sim/json_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sim/error.hpp"

namespace ctwin {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

namespace {

constexpr std::size_t kShownChars = 60;

// The first n bytes of s, shortened so no UTF-8 sequence is cut in two (JSON's dump() rejects
// a cut one, and a message should not end in half a character).
std::string utf8_prefix(const std::string& s, std::size_t n) {
  if (n >= s.size()) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Appends v as JSON to out, stopping once out is longer than `limit`. Each level of nesting
// appends a bracket before recursing, so the recursion is at most `limit` deep.
void excerpt(const Json& v, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const Json& e : v) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      excerpt(e, out, limit);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      if (out.size() > limit) return;
      if (!first) out += ',';
      first = false;
      out += Json(utf8_prefix(k, limit)).dump() + ':';
      excerpt(e, out, limit);
    }
    out += '}';
  } else if (v.is_string()) {
    out += Json(utf8_prefix(v.get_ref<const std::string&>(), limit + 1)).dump();
  } else {
    out += v.dump();
  }
}

}  // namespace

std::string shown(const Json& v) {
  std::string s;
  excerpt(v, s, kShownChars);
  if (s.size() > kShownChars) s = utf8_prefix(s, kShownChars - 3) + "...";
  return s;
}

std::string line_column(const std::string& text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < std::min(byte, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

JsonObject::JsonObject(const Json& j, std::string path, const std::string& file)
    : j_(j), path_(std::move(path)), file_(file) {
  if (!j_.is_object()) {
    throw InputError(file_, path_.empty() ? "/" : path_, "found " + shown(j_), "a JSON object");
  }
}

void JsonObject::fail(const std::string& key, const std::string& problem, const std::string& expected) const {
  // A key may be megabytes long (an unknown key in a hostile file): the pointer quotes its start.
  const std::string k = key.size() > kShownChars ? utf8_prefix(key, kShownChars - 3) + "..." : key;
  throw InputError(file_, key.empty() ? path_ : child(k), problem, expected);
}

const Json& JsonObject::raw(const std::string& key) const {
  if (!j_.contains(key)) fail(key, "missing required key", "the key, as ctwin params documents it");
  return j_.at(key);
}

void JsonObject::only(std::initializer_list<const char*> allowed) const {
  only(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void JsonObject::only(const std::vector<std::string>& names) const {
  for (const auto& [k, v] : j_.items()) {
    if (!k.empty() && k[0] == '_') continue;
    if (std::find(names.begin(), names.end(), k) != names.end()) continue;
    const std::string guess = k.size() <= kShownChars ? closest(k, names) : std::string();
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    // With a near miss the suggestion is the answer; the whole list (dozens of keys in /serving)
    // would bury it.
    if (!guess.empty()) fail(k, "unknown key; did you mean \"" + guess + "\"?", "a key of this object (ctwin params)");
    fail(k, "unknown key", "one of " + known);
  }
}

const Json& JsonObject::at(const std::string& key, const char* what) const {
  if (!j_.contains(key)) fail(key, "missing required key", what);
  return j_.at(key);
}

std::string JsonObject::string(const std::string& key, const std::optional<std::string>& def) const {
  if (!j_.contains(key) && def) return *def;
  const Json& v = at(key, "a string");
  if (!v.is_string()) fail(key, "found " + shown(v), "a string");
  return v.get<std::string>();
}

std::string JsonObject::choice(const std::string& key, std::initializer_list<const char*> choices,
                               const std::optional<std::string>& def) const {
  return choice(key, std::vector<std::string>(choices.begin(), choices.end()), def);
}

std::string JsonObject::choice(const std::string& key, const std::vector<std::string>& choices,
                               const std::optional<std::string>& def) const {
  std::string list;
  for (const auto& c : choices) list += std::string(list.empty() ? "" : ", ") + "\"" + c + "\"";
  if (!j_.contains(key) && def) return *def;
  const Json& v = at(key, ("one of " + list).c_str());
  if (!v.is_string()) fail(key, "found " + shown(v), "one of " + list);
  const std::string s = v.get<std::string>();
  for (const auto& c : choices) {
    if (s == c) return s;
  }
  const std::string guess = closest(s, choices);
  fail(key, "found " + shown(v) + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"), "one of " + list);
}

double JsonObject::number(const std::string& key, const std::optional<double>& def, double min, double max,
                          bool min_exclusive) const {
  if (!j_.contains(key) && def) return *def;
  const Json& v = at(key, "a number");
  if (!v.is_number()) fail(key, "found " + shown(v), "a number");
  const double d = v.get<double>();
  const bool low = min_exclusive ? !(d > min) : d < min;
  if (low || d > max || !std::isfinite(d)) {
    std::string range = min_exclusive ? "a number > " + shown(Json(min)) : "a number >= " + shown(Json(min));
    if (max < 1e300) range += " and <= " + shown(Json(max));
    fail(key, "found " + shown(v) + ", out of range", range);
  }
  return d;
}

long long JsonObject::integer(const std::string& key, const std::optional<long long>& def, long long min,
                              long long max) const {
  if (!j_.contains(key) && def) return *def;
  const Json& v = at(key, "an integer");
  const bool integral =
      v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!integral) fail(key, "found " + shown(v), "an integer");
  const double d = v.get<double>();
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    std::string range = "an integer >= " + std::to_string(min);
    if (max < (1ll << 53)) range += " and <= " + std::to_string(max);
    fail(key, "found " + shown(v) + ", out of range", range);
  }
  return static_cast<long long>(d);
}

bool JsonObject::boolean(const std::string& key, const std::optional<bool>& def) const {
  if (!j_.contains(key) && def) return *def;
  const Json& v = at(key, "true or false");
  if (!v.is_boolean()) fail(key, "found " + shown(v), "true or false");
  return v.get<bool>();
}

JsonObject JsonObject::object(const std::string& key) const {
  const Json& v = at(key, "a JSON object");
  if (!v.is_object()) fail(key, "found " + shown(v), "a JSON object");
  return JsonObject(v, child(key), file_);
}

namespace {

std::string file_kind(const std::filesystem::file_status& st) {
  namespace fs = std::filesystem;
  switch (st.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a FIFO (named pipe)";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

}  // namespace

std::string read_input_file(const std::string& path, const std::string& err_file, const std::string& err_pointer,
                            const std::string& expected) {
  namespace fs = std::filesystem;
  const std::string quoted = "\"" + path + "\"";
  auto fail = [&](const std::string& problem) { throw InputError(err_file, err_pointer, problem, expected); };
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail("cannot open " + quoted + (ec ? ": " + ec.message() : ": no such file"));
  // Checked before opening: reading /dev/zero never ends, and opening a FIFO blocks.
  if (!fs::is_regular_file(st)) fail(quoted + " is " + file_kind(st) + ", not a regular file");
  const std::uintmax_t size = fs::file_size(path, ec);
  const std::string too_big = " bytes, over the limit of 64 MiB on an input file";
  if (!ec && size > kMaxInputBytes) fail(quoted + " is " + std::to_string(size) + too_big);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open " + quoted);
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    // The file may have grown since it was measured.
    if (text.size() > kMaxInputBytes) fail(quoted + " is over " + std::to_string(kMaxInputBytes) + too_big);
  }
  if (in.bad()) fail("cannot read " + quoted);
  return text;
}

void check_json_text(const std::string& text, const std::string& file, const std::string& pointer_prefix) {
  struct Frame {
    bool object;
    bool expect_key;
    std::size_t index;
    std::string key;
  };
  std::vector<Frame> stack;
  // The pointer of the value being read; a deep one is cut short (the message stays one line).
  auto pointer = [&] {
    std::string p = pointer_prefix;
    std::size_t n = 0;
    for (const Frame& f : stack) {
      if (++n > 12) {
        p += "/...";
        break;
      }
      p += "/";
      p += f.object ? f.key : std::to_string(f.index);
    }
    return p.empty() ? std::string("/") : p;
  };
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '"') {
      std::size_t end = i + 1;
      while (end < n && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        std::string key = text.substr(i + 1, std::min<std::size_t>(std::min(end, n) - i - 1, 40));
        // A JSON pointer's escapes.
        std::string escaped;
        for (char k : key) escaped += k == '~' ? std::string("~0") : k == '/' ? std::string("~1") : std::string(1, k);
        stack.back().key = std::move(escaped);
      }
      i = end;
    } else if (c == '{' || c == '[') {
      if (stack.size() >= kMaxJsonDepth) {
        throw InputError(
            file, pointer(),
            "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep (at " + line_column(text, i) + ")",
            "at most " + std::to_string(kMaxJsonDepth) + " levels of nested arrays and objects");
      }
      stack.push_back(Frame{c == '{', c == '{', 0, {}});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().object) {
          stack.back().expect_key = true;
        } else {
          ++stack.back().index;
        }
      }
    } else if (c == ':') {
      if (!stack.empty()) stack.back().expect_key = false;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t end = i + 1;
      while (end < n && (std::isdigit(static_cast<unsigned char>(text[end])) != 0 || text[end] == '.' ||
                         text[end] == 'e' || text[end] == 'E' || text[end] == '+' || text[end] == '-')) {
        ++end;
      }
      const std::string token = text.substr(i, end - i);
      const double v = std::strtod(token.c_str(), nullptr);
      if (std::isinf(v)) {
        const std::string written = token.size() > 40 ? token.substr(0, 37) + "..." : token;
        throw InputError(file, pointer(), "found " + written + ", beyond the range of a double",
                         "a finite number of magnitude below 1.8e308 (and within the key's bounds)");
      }
      i = end - 1;
    }
  }
}

Json parse_json(const std::string& text, const std::string& file) {
  check_json_text(text, file);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // nlohmann's message starts with its own "[json.exception.parse_error.101] parse error at
    // line 3, column 7: "; keep the part after the location, and give ours.
    std::string what = e.what();
    auto colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    const std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    throw InputError(file, "", "malformed JSON at " + line_column(text, byte) + ": " + detail, "valid JSON");
  } catch (const Json::exception& e) {
    // out_of_range and the like: check_json_text catches the known ones first.
    throw InputError(file, "", std::string("unreadable JSON: ") + e.what(), "valid JSON");
  }
}

std::string list_of(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + std::string("\"") + n + "\"";
  return s;
}

CatalogEntries merged_catalog(const Json& builtin, const std::string& builtin_file, const Json* scenario_part,
                              const std::string& scenario_file, const std::string& kind) {
  CatalogEntries out;
  for (const auto& [name, v] : builtin.items()) {
    if (!name.empty() && name[0] == '_') continue;
    out[name] = CatalogEntry{v, builtin_file, "/" + name};
  }
  if (scenario_part) {
    if (!scenario_part->is_object()) {
      throw InputError(scenario_file, "/catalog/" + kind, "found " + shown(*scenario_part), "a JSON object of entries");
    }
    for (const auto& [name, v] : scenario_part->items()) {
      const std::string path = "/catalog/" + kind + "/" + name;
      if (!v.is_object()) throw InputError(scenario_file, path, "found " + shown(v), "a JSON object");
      auto it = out.find(name);
      if (it == out.end()) {
        out[name] = CatalogEntry{v, scenario_file, path};
      } else {
        it->second.value.merge_patch(v);  // fields given in the scenario override the builtin ones
        it->second.file = scenario_file;
        it->second.path = path;
      }
    }
  }
  return out;
}

}  // namespace ctwin
