#include "cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "sim/error.hpp"
#include "sim/output_file.hpp"

namespace ctwin {

std::optional<std::string> ParsedArgs::get(const std::string& flag) const {
  auto it = values.find(flag);
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::all(const std::string& flag) const {
  auto it = values.find(flag);
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

double ParsedArgs::number(const std::string& flag, double fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(d)) {
    throw InputError("", flag, "'" + *v + "' is not a number", "a number");
  }
  return d;
}

double parse_bytes(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double d = std::strtod(text.c_str(), &end);
  double mult = 1;
  std::string suffix = end ? std::string(end) : std::string();
  if (suffix == "" || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KiB")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "MB" || suffix == "MiB")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GB" || suffix == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TB" || suffix == "TiB")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    d = NAN;
  if (text.empty() || end == text.c_str() || !std::isfinite(d) || d < 0) {
    throw InputError("", what, "'" + text + "' is not a size", "a byte count such as 8, 64K, 1M or 8G");
  }
  return d * mult;
}

double ParsedArgs::bytes(const std::string& flag, double fallback) const {
  auto v = get(flag);
  return v ? parse_bytes(*v, flag) : fallback;
}

std::optional<ParsedArgs> parse_args(const Args& args, const std::string& usage, const std::vector<FlagSpec>& flags) {
  auto print_help = [&] {
    std::printf("%s\n", usage.c_str());
    if (!flags.empty()) std::printf("options:\n");
    for (const auto& f : flags) {
      std::string left = f.name + (f.value.empty() ? "" : " " + f.value);
      std::printf("  %-26s %s%s\n", left.c_str(), f.help.c_str(), f.repeatable ? " (repeatable)" : "");
    }
    std::printf("  %-26s %s\n", "--help", "show this help");
  };
  ParsedArgs p;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      print_help();
      return std::nullopt;
    }
    // A one-letter flag (-o) counts only where the command declares it.
    const bool short_flag = a.size() == 2 && a[0] == '-' &&
                            std::any_of(flags.begin(), flags.end(), [&](const FlagSpec& f) { return f.name == a; });
    if ((a.rfind("--", 0) != 0 || a == "--") && !short_flag) {
      p.positional.push_back(a);
      continue;
    }
    std::string name = a, inline_value;
    bool has_inline = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    const FlagSpec* spec = nullptr;
    for (const auto& f : flags) {
      if (f.name == name) spec = &f;
    }
    if (!spec) {
      std::string known;
      for (const auto& f : flags) known += (known.empty() ? "" : ", ") + f.name;
      throw InputError("", name, "unknown option", "one of " + known);
    }
    if (spec->value.empty()) {
      if (has_inline) throw InputError("", name, "takes no value");
      p.values[name].push_back("");
      continue;
    }
    std::string value;
    if (has_inline) {
      value = inline_value;
    } else {
      if (i + 1 >= args.size()) throw InputError("", name, "missing value", spec->value);
      value = args[++i];
    }
    if (!spec->repeatable && p.values.count(name)) throw InputError("", name, "given twice");
    p.values[name].push_back(value);
  }
  return p;
}

ProgressLine::ProgressLine(std::string label)
    : ProgressLine(std::move(label), stderr, isatty(STDERR_FILENO) != 0, &std::chrono::steady_clock::now) {}

ProgressLine::ProgressLine(std::string label, std::FILE* out, bool tty, Clock clock)
    : label_(std::move(label)), out_(out), tty_(tty), clock_(std::move(clock)), start_(clock_()) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::clear() {
  if (shown_) std::fprintf(out_, "\r%*s\r", static_cast<int>(std::max(label_.size() + 8, last_width_)), "");
  shown_ = false;
}

bool ProgressLine::held_back() const {
  // Runs shorter than a second finish before a line would be readable: show none.
  return !tty_ || clock_() - start_ < std::chrono::seconds(1);
}

void ProgressLine::update(double fraction) {
  if (held_back()) return;
  shown_ = true;
  std::fprintf(out_, "\r%s %5.1f%%", label_.c_str(), 100 * fraction);
}

void ProgressLine::update(double fraction, const std::string& detail) {
  if (held_back()) return;
  shown_ = true;
  const double elapsed = std::chrono::duration<double>(clock_() - start_).count();
  std::string eta;
  if (fraction > 0.01 && fraction < 1) {
    char buf[48];
    std::snprintf(buf, sizeof buf, ", %.0f s left", elapsed * (1 - fraction) / fraction);
    eta = buf;
  }
  const std::string text = label_ + " " + detail + eta;
  // Clear what a longer previous line left behind.
  const int width = static_cast<int>(std::max(text.size() + 8, last_width_));
  std::fprintf(out_, "\r%-*s", width,
               (text + std::string(" ") + std::to_string(static_cast<int>(100 * fraction)) + "%").c_str());
  last_width_ = static_cast<std::size_t>(width);
}

void write_output_file(const std::string& path, const std::string& text, bool force) {
  write_file_atomically(path, force, "--write", [&](std::ostream& out) { out << text; });
}

}  // namespace ctwin
