// Scenario keys as data: each key of a JSON object is declared once, with its type, default,
// bounds, unit, meaning and source, in a table beside the struct it fills. Loaders read through
// the table (ParamReader: unknown keys, types, bounds and defaults all come from it), and
// `ctwin params` prints the tables (docs/scenarios.md holds that output).
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "sim/json_reader.hpp"
#include "sim/names.hpp"

namespace ctwin {

enum class ParamType { integer, number, boolean, string, choice, object, any };

inline constexpr double kNoDefault = std::numeric_limits<double>::quiet_NaN();

struct ParamDecl {
  std::string_view key;
  ParamType type = ParamType::number;
  // integer, number, boolean (1/0): the default; kNoDefault when there is none, or when it
  // depends on other values (`computed` then describes it and the loader passes it).
  double def = kNoDefault;
  std::string_view def_name = {};  // string and choice keys: the default value, if any
  double min = -1e300;             // integer keys: bounds are integers; the JsonObject defaults apply
  double max = 1e300;
  std::string_view unit = {};
  std::string_view doc = {};
  std::string_view source = {};  // where the default or the meaning comes from
  // A default that depends on other values ("heads", "the preset's"), shown instead of def;
  // the loader computes and passes it.
  std::string_view computed = {};
  bool required = false;
  bool min_exclusive = false;
  std::span<const std::string_view> choices = {};
  // Another spelling of the key `same_as` (a bandwidth in other units, or its deprecated name):
  // ParamReader::bandwidth reads whichever of them is given, and two at once is an error.
  std::string_view same_as = {};
  bool deprecated = false;  // still read, with a warning naming `same_as`
  // number keys where 0 means "none" (no FP8, no NVLink): a nonzero value must be at least this
  // (a bandwidth or rate of 1e-300 would overflow the simulated clock).
  double min_nonzero = 0;
};

// One JSON object's keys: /training/parallelism, /cluster, ...
struct ParamTable {
  std::string_view path;   // "/training/parallelism"; "/" for the top level
  std::string_view title;  // one line
  std::span<const ParamDecl> params;
};

// A JsonObject read through its table. Construction rejects keys the table does not declare
// (with the same "did you mean" errors as JsonObject::only) unless check_keys is false (an
// object read through two tables checks the keys of both itself).
// A bandwidth with its unit, as datasheets and nccl-tests write it: "400 Gb/s" or "400 Gbit/s"
// (bits), "50 GB/s" or "50 GByte/s" (bytes); decimal prefixes k, M, G, T (400 Gb/s = 50 GB/s =
// 50e9 bytes/s). Returns bytes per second, or nullopt when the text is not such a bandwidth.
std::optional<double> parse_bandwidth(std::string_view text);

class ParamReader {
 public:
  ParamReader(const JsonObject& o, std::span<const ParamDecl> table, bool check_keys = true);

  const JsonObject& object() const { return o_; }
  bool has(std::string_view key) const { return o_.has(std::string(key)); }
  const ParamDecl& decl(std::string_view key) const;

  // The declared default unless `def` is given (a computed one); a declared or given maximum.
  long long integer(std::string_view key, std::optional<long long> def = std::nullopt,
                    std::optional<long long> max = std::nullopt) const;
  double number(std::string_view key, std::optional<double> def = std::nullopt) const;
  // A bandwidth key ("GB/s" or "Gb/s" unit) and its other spellings (decls whose same_as is
  // `key`), in GB/s: a number in the key's unit or a string with its unit ("400 Gb/s"). Two
  // spellings at once are an error; a deprecated one appends a warning to `warnings`.
  double bandwidth(std::string_view key, std::optional<double> def_gbyte_per_s = std::nullopt,
                   std::vector<std::string>* warnings = nullptr) const;
  bool boolean(std::string_view key, std::optional<bool> def = std::nullopt) const;
  std::string string(std::string_view key, std::optional<std::string> def = std::nullopt) const;
  // A choice key's name, checked against its declared choices.
  std::string choice(std::string_view key, std::optional<std::string> def = std::nullopt) const;
  template <class E, std::size_t N>
  E choice(std::string_view key, const NameTable<E, N>& names,
           std::type_identity_t<std::optional<E>> def = std::nullopt) const {
    std::optional<std::string> d;
    if (def) d = names.name(*def);
    return *names.parse(choice(key, d));
  }

 private:
  JsonObject o_;  // a copy: a view of the JSON, cheap, and safe to build from a temporary
  std::span<const ParamDecl> table_;
};

// Before base.merge_patch(patch) (overrides onto a cluster file, a scenario's GPU onto the
// catalog's): removes from base the other spellings (same_as) of each key patch sets, so that
// "nic_gbps" given over a file's "nic_gbit_per_s" replaces it rather than conflicting.
void drop_other_spellings(Json& base, const Json& patch, std::span<const ParamDecl> table);

// The declaration of `key` in `table` (std::logic_error when there is none: a programming error).
const ParamDecl& param_decl(std::span<const ParamDecl> table, std::string_view key);
// An integer key's bounds as integers (the JsonObject defaults where the table gives none).
long long param_int_min(const ParamDecl& d);
long long param_int_max(const ParamDecl& d);

// The keys of a table, in order (for JsonObject::only-style messages).
std::vector<std::string> param_keys(std::span<const ParamDecl> table);
// "integer >= 1 and <= 1048576", "\"ring\", \"all_gather\"", "bool", ...
std::string param_type_text(const ParamDecl& d);
std::string param_default_text(const ParamDecl& d);
// The tables as Markdown (one section per table) or as plain aligned text.
std::string params_markdown(std::span<const ParamTable> tables);
std::string params_text(std::span<const ParamTable> tables);

}  // namespace ctwin
