#include "report_format.hpp"

#include <cmath>
#include <cstdio>

namespace ctwin {

std::string with_commas(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string format_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

std::string format_ms(double seconds, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f ms", decimals, seconds * 1e3);
  return buf;
}

std::string human_number(double v) {
  char buf[64];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e7 || a < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  } else if (a >= 1000 || v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

namespace {
void rows(std::string& out, const nlohmann::ordered_json& j, int indent) {
  for (const auto& [k, v] : j.items()) {
    std::string key(static_cast<std::size_t>(indent) * 2, ' ');
    key += k;
    char line[256];
    if (v.is_object()) {
      std::snprintf(line, sizeof line, "  %s\n", key.c_str());
      out += line;
      rows(out, v, indent + 1);
      continue;
    }
    std::string val = v.is_number() ? human_number(v.get<double>()) : v.is_string() ? v.get<std::string>() : v.dump();
    std::snprintf(line, sizeof line, "  %-34s %s\n", key.c_str(), val.c_str());
    out += line;
  }
}
}  // namespace

std::string format_figures_table(const std::string& title, const nlohmann::ordered_json& j) {
  std::string out = title + "\n";
  rows(out, j, 0);
  return out;
}

}  // namespace ctwin
