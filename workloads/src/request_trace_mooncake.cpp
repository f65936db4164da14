// The Mooncake trace layout (github.com/kvcache-ai/Mooncake, FAST25-release/traces/*.jsonl,
// Apache-2.0): one JSON object a line, {"timestamp": ms, "input_length": tokens,
// "output_length": tokens, "hash_ids": [remapped prefix block hashes, one per block]}.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "workloads/serving_traffic.hpp"

namespace ctwin {
namespace {

constexpr std::string_view kLayout =
    R"({"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [ids]})";
// The largest hash id: JSON numbers are exact integers below 2^53.
constexpr std::uint64_t kMaxHashId = (std::uint64_t{1} << 53) - 1;
// Timestamps: up to 9e9 ms (the 9e6 s the Azure reader allows too).
constexpr double kMaxTimestampMs = 9e9;

struct Line {
  const std::string& file;
  std::int64_t n;
  [[noreturn]] void fail(std::string_view field, const std::string& problem, const std::string& expected) const {
    throw InputError(file, "line " + std::to_string(n) + (field.empty() ? "" : ", field " + std::string(field)),
                     problem, expected);
  }
};

std::string quoted(std::string_view s) {
  constexpr std::size_t kShown = 60;
  std::string q = "\"";
  for (const char ch : s.substr(0, kShown)) q.push_back(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f ? '?' : ch);
  q.append(s.size() > kShown ? "...\"" : "\"");
  return q;
}

const Json& field(const Json& o, const char* name, const Line& l) {
  const auto it = o.find(name);
  if (it == o.end()) l.fail(name, "missing", std::string("the field, as in ") + std::string(kLayout));
  return *it;
}

std::int32_t tokens(const Json& o, const char* name, std::int32_t min, const Line& l) {
  const Json& v = field(o, name, l);
  const std::string expected =
      "an integer from " + std::to_string(min) + " to " + std::to_string(kMaxTrafficTokens) + " (tokens)";
  if (!v.is_number_integer()) l.fail(name, "found " + shown(v), expected);
  const bool neg = v.is_number_unsigned() ? false : v.get<std::int64_t>() < 0;
  if (neg || v.get<std::uint64_t>() < static_cast<std::uint64_t>(min) ||
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxTrafficTokens)) {
    l.fail(name, "found " + shown(v), expected);
  }
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

}  // namespace

MooncakeTrace parse_mooncake_trace(const std::string& text, const std::string& file, std::int32_t block_tokens) {
  if (block_tokens < 1) throw std::invalid_argument("mooncake trace: block_tokens must be >= 1");
  MooncakeTrace out;
  out.blocks.block_tokens = block_tokens;
  out.blocks.offsets.assign(1, 0);
  std::string_view rest(text);
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);  // a UTF-8 byte-order mark
  Line l{file, 0};
  std::int64_t first_ps = 0, last_ps = 0;
  std::vector<std::uint64_t> sorted;
  while (!rest.empty()) {
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    ++l.n;
    if (line.empty() && rest.empty()) break;  // the final newline
    const Json o = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (o.is_discarded() || !o.is_object()) {
      l.fail("", "found " + quoted(line), "one JSON object a line: " + std::string(kLayout));
    }
    const Json& ts = field(o, "timestamp", l);
    const std::string ts_expected = "a number of milliseconds from 0 to 9e9, not below the line above's";
    if (!ts.is_number() || !(ts.get<double>() >= 0 && ts.get<double>() <= kMaxTimestampMs))
      l.fail("timestamp", "found " + shown(ts), ts_expected);
    const auto ps = static_cast<std::int64_t>(std::llround(ts.get<double>() * 1e9));
    if (out.rows.empty()) first_ps = last_ps = ps;
    if (ps < last_ps) l.fail("timestamp", "found " + shown(ts) + ", before the line above", ts_expected);
    last_ps = ps;

    TraceRow r;
    r.arrival = Time{ps - first_ps};
    r.context_tokens = tokens(o, "input_length", 1, l);
    r.generated_tokens = tokens(o, "output_length", 0, l);

    const Json& ids = field(o, "hash_ids", l);
    const std::int64_t max_blocks = (static_cast<std::int64_t>(r.context_tokens) + block_tokens - 1) / block_tokens;
    const std::string ids_expected = "an array of at most ceil(input_length / " + std::to_string(block_tokens) +
                                     ") = " + std::to_string(max_blocks) +
                                     " distinct integers from 0 to 2^53 - 1 (one per block of the prompt)";
    if (!ids.is_array() || static_cast<std::int64_t>(ids.size()) > max_blocks)
      l.fail("hash_ids", "found " + shown(ids), ids_expected);
    sorted.clear();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const Json& e = ids[i];
      if (!e.is_number_unsigned() || e.get<std::uint64_t>() > kMaxHashId) {
        l.fail("hash_ids", "found " + shown(e) + " at index " + std::to_string(i), ids_expected);
      }
      out.blocks.ids.push_back(e.get<std::uint64_t>());
      sorted.push_back(e.get<std::uint64_t>());
    }
    std::sort(sorted.begin(), sorted.end());
    if (const auto d = std::adjacent_find(sorted.begin(), sorted.end()); d != sorted.end()) {
      l.fail("hash_ids", "found the id " + std::to_string(*d) + " twice", ids_expected);
    }
    out.blocks.offsets.push_back(static_cast<std::int64_t>(out.blocks.ids.size()));
    out.rows.push_back(r);
  }
  if (out.rows.empty()) throw InputError(file, "line 1", "no requests", "at least one line " + std::string(kLayout));
  return out;
}

}  // namespace ctwin
