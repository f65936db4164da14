// The trace format: what a run did, lane by lane. Written by the engine's users (simulated
// runs) and, later, by realrun (measured runs), read by the viewer. Names are interned once
// and referenced by index; events are small packed records.
//
// Files: ".ctt" is the native binary form (fast to load, 10M+ events); ".json" is Chrome
// trace JSON for Perfetto and chrome://tracing. Both can be written and read back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ctwin {

inline constexpr std::uint32_t kNoIndex = UINT32_MAX;

// One horizontal lane: a stream of one device (GPU compute stream, comm stream, a serving
// replica, a request). `process` groups lanes (one process per GPU in Chrome terms);
// `group` groups processes (a node, a pipeline stage) for collapsing in the viewer.
struct TraceLane {
  std::uint32_t process = 0;  // interned string: e.g. "gpu 3"
  std::uint32_t thread = 0;   // interned string: e.g. "compute"
  std::uint32_t group = 0;    // interned string: e.g. "node 0 / stage 1"
  std::uint32_t pid = 0;      // numeric process id for Chrome export
  std::uint32_t tid = 0;      // numeric thread id for Chrome export
};

struct TraceEvent {
  std::int64_t start_ps = 0;
  std::int64_t dur_ps = 0;
  double flops = 0;                // floating-point operations of this op (0 for comm)
  double bytes = 0;                // HBM bytes for compute ops, payload bytes for comm
  std::uint32_t lane = 0;          // index into Trace::lanes
  std::uint32_t name = 0;          // interned string
  std::uint32_t kind = 0;          // interned string: "gemm", "attention", "all_reduce", ...
  std::uint32_t group = kNoIndex;  // collective instance id (same for all members), or none
};

// A counter track (memory in use on one GPU, queue length) sampled at change points.
struct TraceCounterTrack {
  std::uint32_t process = 0;  // interned string of the owning process
  std::uint32_t name = 0;     // interned string: e.g. "memory_bytes"
  std::uint32_t pid = 0;
  std::vector<std::pair<std::int64_t, double>> samples;  // (time ps, value), sorted by time
};

// A dependency drawn as an arrow: send -> recv, collective member -> member.
struct TraceArrow {
  std::uint32_t from_lane = 0;
  std::uint32_t to_lane = 0;
  std::int64_t from_ps = 0;
  std::int64_t to_ps = 0;
  std::uint32_t name = 0;  // interned string
};

struct Trace {
  std::vector<std::string> strings{""};  // index 0 is the empty string
  std::vector<TraceLane> lanes;
  std::vector<TraceEvent> events;
  std::vector<TraceCounterTrack> counters;
  std::vector<TraceArrow> arrows;
  // Run-level figures shown in the viewer's summary panel, in order: ("step_time_s", 1.2).
  std::vector<std::pair<std::string, double>> summary;

  std::uint32_t intern(std::string_view s);
  const std::string& str(std::uint32_t i) const { return strings.at(i); }
  std::uint32_t add_lane(std::string_view process, std::string_view thread, std::string_view group, std::uint32_t pid,
                         std::uint32_t tid);

 private:
  // Looked up by string_view without building a std::string (a step program interns a name per op).
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> index_;
  void rebuild_index();
  friend Trace read_trace_binary(std::istream& in, const std::string& what);
  friend Trace read_chrome_trace(std::istream& in, const std::string& what);
};

// Sorts events by (lane, start, name) and arrows by time, so output is canonical.
void canonicalize(Trace& t);

// Native binary format. Throws InputError with the file name on a bad or truncated file.
void write_trace_binary(const Trace& t, std::ostream& out);
Trace read_trace_binary(std::istream& in, const std::string& what);

// Chrome trace JSON ("X" complete events, "C" counters, "s"/"f" flow arrows, metadata).
// Times are written in microseconds with picosecond precision.
void write_chrome_trace(const Trace& t, std::ostream& out);
Trace read_chrome_trace(std::istream& in, const std::string& what);

// Chooses the format by extension (.ctt binary, .json Chrome). Written atomically
// (sim/output_file.hpp): an existing file is replaced only with `replace`, and only once the new
// one is complete.
void write_trace_file(const Trace& t, const std::filesystem::path& path, bool replace = false);
Trace read_trace_file(const std::filesystem::path& path);

}  // namespace ctwin
