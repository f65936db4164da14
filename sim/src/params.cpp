#include "sim/params.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "sim/error.hpp"

namespace ctwin {
namespace {

long long int_min(const ParamDecl& d) { return param_int_min(d); }
long long int_max(const ParamDecl& d) { return param_int_max(d); }

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

long long param_int_min(const ParamDecl& d) { return d.min <= -1e300 ? 0 : static_cast<long long>(d.min); }
long long param_int_max(const ParamDecl& d) { return d.max >= 1e300 ? (1ll << 53) : static_cast<long long>(d.max); }

const ParamDecl& param_decl(std::span<const ParamDecl> table, std::string_view key) {
  for (const auto& d : table) {
    if (d.key == key) return d;
  }
  throw std::logic_error("no parameter " + std::string(key));
}

ParamReader::ParamReader(const JsonObject& o, std::span<const ParamDecl> table, bool check_keys)
    : o_(o), table_(table) {
  if (check_keys) o_.only(param_keys(table_));
}

const ParamDecl& ParamReader::decl(std::string_view key) const {
  for (const auto& d : table_) {
    if (d.key == key) return d;
  }
  throw std::logic_error("no parameter " + std::string(key) + " under " + o_.path());
}

long long ParamReader::integer(std::string_view key, std::optional<long long> def, std::optional<long long> max) const {
  const ParamDecl& d = decl(key);
  if (!def && !d.required && !std::isnan(d.def)) def = static_cast<long long>(d.def);
  return o_.integer(std::string(key), def, int_min(d), max ? *max : int_max(d));
}

std::optional<double> parse_bandwidth(std::string_view text) {
  const std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string_view unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty()) return std::nullopt;
  double prefix = 0;
  switch (unit.front()) {
    case 'k':
      prefix = 1e3;
      break;
    case 'M':
      prefix = 1e6;
      break;
    case 'G':
      prefix = 1e9;
      break;
    case 'T':
      prefix = 1e12;
      break;
    default:
      return std::nullopt;
  }
  unit.remove_prefix(1);
  if (unit == "b/s" || unit == "bit/s") return v * prefix / 8;
  if (unit == "B/s" || unit == "Byte/s" || unit == "byte/s") return v * prefix;
  return std::nullopt;
}

namespace {
// Bytes per second in one unit of a bandwidth key; 0 for other units.
double bandwidth_scale(std::string_view unit) {
  if (unit == "GB/s") return 1e9;
  if (unit == "Gb/s") return 1e9 / 8;
  return 0;
}
}  // namespace

double ParamReader::number(std::string_view key, std::optional<double> def) const {
  const ParamDecl& d = decl(key);
  if (!def && !d.required && !std::isnan(d.def)) def = d.def;
  const double scale = bandwidth_scale(d.unit);
  if (scale > 0 && o_.has(std::string(key)) && o_.raw(std::string(key)).is_string()) {
    const std::string text = o_.raw(std::string(key)).get<std::string>();
    const std::optional<double> bytes_per_s = parse_bandwidth(text);
    const std::string expected =
        std::string(d.unit) + " as a number, or a bandwidth with its unit such as \"400 Gb/s\" or \"50 GB/s\"";
    if (!bytes_per_s) o_.fail(std::string(key), "found \"" + text + "\"", expected);
    const double v = *bytes_per_s / scale;
    if (v < d.min || v > d.max || (d.min_exclusive && v == d.min) ||
        (d.min_nonzero > 0 && v != 0 && v < d.min_nonzero)) {
      o_.fail(std::string(key), "\"" + text + "\" is " + number_text(v) + " " + std::string(d.unit) + ", out of range",
              std::string(d.min_exclusive ? "above " : "at least ") + number_text(d.min) + " and at most " +
                  number_text(d.max) + " " + std::string(d.unit));
    }
    return v;
  }
  const double v = o_.number(std::string(key), def, d.min, d.max, d.min_exclusive);
  if (d.min_nonzero > 0 && v != 0 && std::fabs(v) < d.min_nonzero) {
    o_.fail(std::string(key), "found " + number_text(v) + ", out of range",
            "0 (none) or at least " + number_text(d.min_nonzero) + (d.unit.empty() ? "" : " " + std::string(d.unit)));
  }
  return v;
}

double ParamReader::bandwidth(std::string_view key, std::optional<double> def_gbyte_per_s,
                              std::vector<std::string>* warnings) const {
  const ParamDecl* given = nullptr;
  for (const auto& d : table_) {
    if ((d.key != key && d.same_as != key) || !has(d.key)) continue;
    if (given) {
      o_.fail(std::string(d.key), "found both \"" + std::string(given->key) + "\" and \"" + std::string(d.key) + "\"",
              "one of them (the same bandwidth in different units)");
    }
    given = &d;
  }
  const ParamDecl& main = decl(key);
  if (!given) {
    if (def_gbyte_per_s) return *def_gbyte_per_s;
    return number(key) * bandwidth_scale(main.unit) / 1e9;
  }
  const double gbyte_per_s = number(given->key) * bandwidth_scale(given->unit) / 1e9;
  if (given->deprecated && warnings) {
    const ParamDecl& to = decl(given->same_as);
    warnings->push_back(o_.path() + "/" + std::string(given->key) +
                        " is deprecated (GB/s, easily mistaken for Gb/s): " + number_text(gbyte_per_s) +
                        " GB/s = " + number_text(8 * gbyte_per_s) + " Gb/s; write \"" + std::string(to.key) +
                        "\": " + number_text(gbyte_per_s * 1e9 / bandwidth_scale(to.unit)));
  }
  return gbyte_per_s;
}

bool ParamReader::boolean(std::string_view key, std::optional<bool> def) const {
  const ParamDecl& d = decl(key);
  if (!def && !d.required && !std::isnan(d.def)) def = d.def != 0;
  return o_.boolean(std::string(key), def);
}

std::string ParamReader::string(std::string_view key, std::optional<std::string> def) const {
  const ParamDecl& d = decl(key);
  if (!def && !d.required && !d.def_name.empty()) def = std::string(d.def_name);
  return o_.string(std::string(key), def);
}

std::string ParamReader::choice(std::string_view key, std::optional<std::string> def) const {
  const ParamDecl& d = decl(key);
  if (!def && !d.required && !d.def_name.empty()) def = std::string(d.def_name);
  return o_.choice(std::string(key), std::vector<std::string>(d.choices.begin(), d.choices.end()), def);
}

void drop_other_spellings(Json& base, const Json& patch, std::span<const ParamDecl> table) {
  if (!base.is_object() || !patch.is_object()) return;
  for (const auto& given : table) {
    if (!patch.contains(std::string(given.key))) continue;
    const std::string_view group = given.same_as.empty() ? given.key : given.same_as;
    for (const auto& d : table) {
      if ((d.key == group || d.same_as == group) && !patch.contains(std::string(d.key))) base.erase(std::string(d.key));
    }
  }
}

std::vector<std::string> param_keys(std::span<const ParamDecl> table) {
  std::vector<std::string> keys;
  for (const auto& d : table) keys.emplace_back(d.key);
  return keys;
}

std::string param_type_text(const ParamDecl& d) {
  switch (d.type) {
    case ParamType::integer: {
      std::string s = "integer >= " + std::to_string(int_min(d));
      if (d.max < 1e300) s += " and <= " + std::to_string(int_max(d));
      return s;
    }
    case ParamType::number: {
      std::string s = std::string("number ") + (d.min_exclusive ? "> " : ">= ") + number_text(d.min);
      if (d.min <= -1e300) s = "number";
      if (d.max < 1e300) s += (d.min <= -1e300 ? " <= " : " and <= ") + number_text(d.max);
      if (d.min_nonzero > 0) s += ", 0 or >= " + number_text(d.min_nonzero);
      if (bandwidth_scale(d.unit) > 0) s += ", or a string with its unit";
      return s;
    }
    case ParamType::boolean:
      return "bool";
    case ParamType::string:
      return "string";
    case ParamType::choice: {
      std::string s;
      for (const auto& c : d.choices) {
        if (!s.empty()) s += ", ";
        s += '"';
        s += c;
        s += '"';
      }
      return s;
    }
    case ParamType::object:
      return "object";
    case ParamType::any:
      return "string or object";
  }
  return "?";
}

std::string param_default_text(const ParamDecl& d) {
  if (d.required) return d.computed.empty() ? "required" : "required (" + std::string(d.computed) + ")";
  if (!d.computed.empty()) return std::string(d.computed);
  if (d.type == ParamType::choice || d.type == ParamType::string) {
    if (d.def_name.empty()) return "none";
    std::string quoted = "\"";
    quoted += d.def_name;
    quoted += '"';
    return quoted;
  }
  if (std::isnan(d.def)) return "none";
  if (d.type == ParamType::boolean) return d.def != 0 ? "true" : "false";
  return number_text(d.def);
}

std::string params_markdown(std::span<const ParamTable> tables) {
  std::string out;
  for (const auto& t : tables) {
    out += "### `" + std::string(t.path) + "`\n\n" + std::string(t.title) + "\n\n";
    out += "| key | type | default | unit | meaning | source |\n|---|---|---|---|---|---|\n";
    for (const auto& d : t.params) {
      std::string type = param_type_text(d);
      std::replace(type.begin(), type.end(), '|', '/');
      out += "| `" + std::string(d.key) + "` | " + type + " | " + param_default_text(d) + " | " + std::string(d.unit) +
             " | " + std::string(d.doc) + " | " + std::string(d.source) + " |\n";
    }
    out += "\n";
  }
  return out;
}

std::string params_text(std::span<const ParamTable> tables) {
  std::string out;
  for (const auto& t : tables) {
    out += std::string(t.path) + "  (" + std::string(t.title) + ")\n";
    std::size_t w = 0;
    for (const auto& d : t.params) w = std::max(w, d.key.size());
    for (const auto& d : t.params) {
      const std::string def = param_default_text(d);
      std::string line = "  " + std::string(d.key) + std::string(w + 2 - d.key.size(), ' ') + param_type_text(d) +
                         (def.rfind("required", 0) == 0 ? "; " : "; default ") + def;
      if (!d.unit.empty()) line += "; " + std::string(d.unit);
      out += line + "\n" + std::string(w + 4, ' ') + std::string(d.doc) + "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace ctwin
