// The host's resources a run is checked against before it starts (docs/resource-limits.md): the
// memory the kernel says is available, a file system's free space, and the refusal messages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ctwin {

// MemAvailable from the text of /proc/meminfo, in bytes; nullopt when it has none.
std::optional<std::uint64_t> parse_mem_available(const std::string& meminfo);
// MemAvailable of this host; nullopt where /proc/meminfo is missing or has none.
std::optional<std::uint64_t> host_available_memory();
// Bytes an unprivileged user may still write on the file system that would hold `file` (its
// directory's, statvfs f_bavail * f_frsize); nullopt when that cannot be read.
std::optional<std::uint64_t> free_space_for(const std::filesystem::path& file);

// "5.3 GiB", "812 MiB", "12 KiB", "100 B": powers of 1024, as --max-memory reads them.
std::string human_bytes(double bytes);

}  // namespace ctwin
