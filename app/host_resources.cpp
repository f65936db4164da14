#include "host_resources.hpp"

#include <sys/statvfs.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace ctwin {

std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    char unit[8] = {};
    if (std::sscanf(line.c_str(), "MemAvailable: %llu %7s", &kib, unit) >= 1) {
      return static_cast<std::uint64_t>(kib) * 1024;  // the kernel's "kB" are KiB
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> host_available_memory() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_mem_available(ss.str());
}

std::optional<std::uint64_t> free_space_for(const std::filesystem::path& file) {
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, bytes < 10 ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  }
  return buf;
}

}  // namespace ctwin
