// The Azure LLM inference trace layout (github.com/Azure/AzurePublicDataset, AzureLLMInferenceTrace
// 2023): TIMESTAMP,ContextTokens,GeneratedTokens with timestamps like 2023-11-16 18:15:46.6805900.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/error.hpp"
#include "workloads/serving_traffic.hpp"

namespace ctwin {
namespace {

constexpr std::string_view kHeader = "TIMESTAMP,ContextTokens,GeneratedTokens";

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Cursor {
  const std::string& file;
  std::int64_t row;
  [[noreturn]] void fail(std::string_view column, const std::string& problem, const std::string& expected) const {
    throw InputError(file, "row " + std::to_string(row) + ", column " + std::string(column), problem, expected);
  }
};

std::string quoted(std::string_view s) {
  constexpr std::size_t kShown = 40;
  std::string q = "\"";
  // Control bytes (a binary file, a stray \r) shown as '?': the error stays one printable line.
  for (const char ch : s.substr(0, kShown)) q.push_back(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f ? '?' : ch);
  q.append(s.size() > kShown ? "...\"" : "\"");
  return q;
}

// Exactly `n` digits at s[pos..] as a number.
bool digits(std::string_view s, std::size_t pos, std::size_t n, unsigned& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + static_cast<unsigned>(s[i] - '0');
  }
  return true;
}

// A time as whole seconds since 1970 and picoseconds after them (in one int64 a year-9999 date
// would overflow).
struct Stamp {
  std::int64_t s = 0;
  std::int64_t ps = 0;
  auto operator<=>(const Stamp&) const = default;
};

// "YYYY-MM-DD HH:MM:SS[.fffffff]".
Stamp timestamp(std::string_view s, const Cursor& c) {
  const std::string expected = "a time such as 2023-11-16 18:15:46.6805900";
  unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  const bool ok = s.size() >= 19 && digits(s, 0, 4, y) && s[4] == '-' && digits(s, 5, 2, mo) && s[7] == '-' &&
                  digits(s, 8, 2, d) && (s[10] == ' ' || s[10] == 'T') && digits(s, 11, 2, h) && s[13] == ':' &&
                  digits(s, 14, 2, mi) && s[16] == ':' && digits(s, 17, 2, sec);
  if (!ok || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) {
    c.fail("TIMESTAMP", "found " + quoted(s), expected);
  }
  std::int64_t frac_ps = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20 || s.size() > 32) c.fail("TIMESTAMP", "found " + quoted(s), expected);
    std::int64_t scale = 100000000000;  // the first fractional digit is 0.1 s
    for (std::size_t i = 20; i < s.size(); ++i, scale /= 10) {
      if (s[i] < '0' || s[i] > '9') c.fail("TIMESTAMP", "found " + quoted(s), expected);
      frac_ps += (s[i] - '0') * scale;
    }
  }
  return {days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec, frac_ps};
}

std::int32_t tokens(std::string_view s, std::string_view column, std::int32_t min, const Cursor& c) {
  const std::string expected =
      "an integer from " + std::to_string(min) + " to " + std::to_string(kMaxTrafficTokens) + " (tokens)";
  if (s.empty() || s.size() > 9) c.fail(column, "found " + quoted(s), expected);
  std::int64_t v = 0;
  for (const char ch : s) {
    if (ch < '0' || ch > '9') c.fail(column, "found " + quoted(s), expected);
    v = v * 10 + (ch - '0');
  }
  if (v < min || v > kMaxTrafficTokens) c.fail(column, "found " + quoted(s), expected);
  return static_cast<std::int32_t>(v);
}

}  // namespace

std::vector<TraceRow> parse_request_trace(const std::string& text, const std::string& file) {
  std::string_view rest(text);
  if (rest.starts_with("\xEF\xBB\xBF")) rest.remove_prefix(3);  // a UTF-8 byte-order mark
  auto next_line = [&]() {
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    return line;
  };
  const std::string_view header = next_line();
  if (header != kHeader) {
    throw InputError(file, "row 0 (the header)", "found " + quoted(header), "the header " + std::string(kHeader));
  }
  std::vector<TraceRow> rows;
  Stamp first;
  Stamp last;
  Cursor c{file, 0};
  while (!rest.empty()) {
    const std::string_view line = next_line();
    ++c.row;
    if (line.empty() && rest.empty()) break;  // the final newline
    const std::size_t a = line.find(',');
    const std::size_t b = a == std::string_view::npos ? a : line.find(',', a + 1);
    if (b == std::string_view::npos || line.find(',', b + 1) != std::string_view::npos) {
      c.fail("TIMESTAMP", "found " + quoted(line),
             "three comma-separated fields: TIMESTAMP,ContextTokens,GeneratedTokens");
    }
    const Stamp t = timestamp(line.substr(0, a), c);
    TraceRow r;
    r.context_tokens = tokens(line.substr(a + 1, b - a - 1), "ContextTokens", 1, c);
    r.generated_tokens = tokens(line.substr(b + 1), "GeneratedTokens", 0, c);
    if (rows.empty()) first = last = t;
    if (t < last) {
      c.fail("TIMESTAMP", "found " + quoted(line.substr(0, a)) + ", before the row above",
             "timestamps in non-decreasing order (sort the trace)");
    }
    if (t.s - first.s > 9000000) {
      c.fail("TIMESTAMP", "found " + quoted(line.substr(0, a)) + ", more than 9e6 s after the first row",
             "a trace spanning at most about 100 days");
    }
    last = t;
    r.arrival = Time{(t.s - first.s) * 1000000000000 + (t.ps - first.ps)};
    rows.push_back(r);
  }
  if (rows.empty()) throw InputError(file, "row 1", "no rows after the header", "at least one request");
  return rows;
}

}  // namespace ctwin
