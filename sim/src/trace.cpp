#include "sim/trace.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/output_file.hpp"

namespace ctwin {

static_assert(std::endian::native == std::endian::little, "the binary trace format is little-endian");
static_assert(sizeof(TraceEvent) == 48, "TraceEvent is written as a packed 48-byte record");

std::uint32_t Trace::intern(std::string_view s) {
  if (index_.size() != strings.size()) rebuild_index();
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  auto id = static_cast<std::uint32_t>(strings.size());
  strings.emplace_back(s);
  index_.emplace(strings.back(), id);
  return id;
}

void Trace::rebuild_index() {
  index_.clear();
  for (std::uint32_t i = 0; i < strings.size(); ++i) index_.emplace(strings[i], i);
}

std::uint32_t Trace::add_lane(std::string_view process, std::string_view thread, std::string_view group,
                              std::uint32_t pid, std::uint32_t tid) {
  lanes.push_back(TraceLane{intern(process), intern(thread), intern(group), pid, tid});
  return static_cast<std::uint32_t>(lanes.size() - 1);
}

void canonicalize(Trace& t) {
  std::stable_sort(t.events.begin(), t.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.lane, a.start_ps, a.dur_ps, a.name) < std::tie(b.lane, b.start_ps, b.dur_ps, b.name);
  });
  std::stable_sort(t.arrows.begin(), t.arrows.end(), [](const TraceArrow& a, const TraceArrow& b) {
    return std::tie(a.from_ps, a.from_lane, a.to_lane) < std::tie(b.from_ps, b.from_lane, b.to_lane);
  });
}

// ---------------------------------------------------------------- binary
namespace {

constexpr char kMagic[8] = {'C', 'T', 'W', 'T', 'R', 'A', 'C', 'E'};
constexpr std::uint32_t kVersion = 1;

template <class T>
void put(std::ostream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::ostream& out, const std::string& s) {
  put(out, static_cast<std::uint32_t>(s.size()));
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Trace times (start, duration, counter and arrow times) lie in [0, 2^63) ps, and the durations of
// all events add up within that range: the viewer adds and subtracts them freely.
constexpr std::int64_t kMaxTracePs = INT64_MAX;

// Reads the binary form, knowing how many bytes remain: every count is checked against them
// before anything is allocated, so a 100-byte file cannot ask for gigabytes.
struct Reader {
  std::istream& in;
  const std::string& what;
  std::uint64_t left = UINT64_MAX;  // bytes not yet read (UINT64_MAX: a stream of unknown size)

  Reader(std::istream& in_, const std::string& what_) : in(in_), what(what_) {
    const auto here = in.tellg();
    if (here < 0) return;
    in.seekg(0, std::ios::end);
    const auto end = in.tellg();
    in.seekg(here);
    if (end >= here && in) left = static_cast<std::uint64_t>(end - here);
    in.clear();
  }
  [[noreturn]] void fail(const std::string& where, const std::string& problem) const {
    throw InputError(what, where, problem, "a .ctt file written by ctwin");
  }
  template <class T>
  T get() {
    T v{};
    read_raw(&v, sizeof(T));
    return v;
  }
  void read_raw(void* p, std::size_t n) {
    if (n > left) fail("", "the trace file is truncated");
    in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in.gcount()) != n) fail("", "the trace file is truncated");
    if (left != UINT64_MAX) left -= n;
  }
  // A count of records of at least `min_bytes` each: more than the remaining bytes can hold is
  // a bad file, found before the records are allocated.
  std::uint64_t count(std::uint64_t limit, std::uint64_t min_bytes, const char* of) {
    auto n = get<std::uint64_t>();
    if (n > limit) fail("", "implausible number of " + std::string(of) + " (" + std::to_string(n) + ") in the trace");
    if (left != UINT64_MAX && n > left / min_bytes) {
      fail("", "the trace declares " + std::to_string(n) + " " + of + " but only " + std::to_string(left) +
                   " bytes remain");
    }
    return n;
  }
  std::string str() {
    auto n = get<std::uint32_t>();
    if (n > (1u << 24)) fail("", "implausible string length " + std::to_string(n) + " in the trace file");
    if (n > left) fail("", "the trace file is truncated");
    std::string s(n, '\0');
    read_raw(s.data(), n);
    return s;
  }
  std::int64_t time(const std::string& where) {
    auto ps = get<std::int64_t>();
    if (ps < 0) fail(where, "negative time " + std::to_string(ps) + " ps");
    return ps;
  }
};

}  // namespace

void write_trace_binary(const Trace& t, std::ostream& out) {
  out.write(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<std::uint64_t>(t.strings.size()));
  for (const auto& s : t.strings) put_str(out, s);
  put(out, static_cast<std::uint64_t>(t.lanes.size()));
  for (const auto& l : t.lanes) {
    put(out, l.process);
    put(out, l.thread);
    put(out, l.group);
    put(out, l.pid);
    put(out, l.tid);
  }
  put(out, static_cast<std::uint64_t>(t.events.size()));
  out.write(reinterpret_cast<const char*>(t.events.data()),
            static_cast<std::streamsize>(t.events.size() * sizeof(TraceEvent)));
  put(out, static_cast<std::uint64_t>(t.counters.size()));
  for (const auto& c : t.counters) {
    put(out, c.process);
    put(out, c.name);
    put(out, c.pid);
    put(out, static_cast<std::uint64_t>(c.samples.size()));
    for (const auto& [ts, v] : c.samples) {
      put(out, ts);
      put(out, v);
    }
  }
  put(out, static_cast<std::uint64_t>(t.arrows.size()));
  for (const auto& a : t.arrows) {
    put(out, a.from_lane);
    put(out, a.to_lane);
    put(out, a.from_ps);
    put(out, a.to_ps);
    put(out, a.name);
  }
  put(out, static_cast<std::uint64_t>(t.summary.size()));
  for (const auto& [k, v] : t.summary) {
    put_str(out, k);
    put(out, v);
  }
}

Trace read_trace_binary(std::istream& in, const std::string& what) {
  Reader r(in, what);
  char magic[8];
  r.read_raw(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    throw InputError(what, "", "not a ClusterTwin binary trace (bad magic)", "a .ctt file written by ctwin");
  }
  auto version = r.get<std::uint32_t>();
  if (version != kVersion) {
    throw InputError(what, "", "trace format version " + std::to_string(version),
                     "version " + std::to_string(kVersion));
  }
  constexpr std::uint64_t kMax = 1ull << 32;
  Trace t;
  t.strings.clear();
  auto ns = r.count(kMax, 4, "strings");
  // Reserved a little at a time: a stream of unknown size (the viewer's) can still lie.
  constexpr std::uint64_t kChunk = 1 << 16;
  t.strings.reserve(std::min(ns, kChunk));
  for (std::uint64_t i = 0; i < ns; ++i) t.strings.push_back(r.str());
  auto check = [&](std::uint32_t idx, const char* where) {
    if (idx >= t.strings.size()) {
      r.fail(where, "string index " + std::to_string(idx) + " out of range (" + std::to_string(ns) + " strings)");
    }
    return idx;
  };
  auto nl = r.count(kMax, 20, "lanes");
  t.lanes.reserve(std::min(nl, kChunk));
  for (std::uint64_t i = 0; i < nl; ++i) {
    auto& l = t.lanes.emplace_back();
    l.process = check(r.get<std::uint32_t>(), "/lanes/process");
    l.thread = check(r.get<std::uint32_t>(), "/lanes/thread");
    l.group = check(r.get<std::uint32_t>(), "/lanes/group");
    l.pid = r.get<std::uint32_t>();
    l.tid = r.get<std::uint32_t>();
  }
  auto ne = r.count(kMax, sizeof(TraceEvent), "events");
  for (std::uint64_t done = 0; done < ne;) {
    const std::uint64_t n = std::min(ne - done, kChunk);
    t.events.resize(done + n);
    r.read_raw(t.events.data() + done, n * sizeof(TraceEvent));
    done += n;
  }
  std::int64_t total_dur = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    // The pointer is composed only for the error: traces hold millions of events.
    const auto bad = [&](const char* what) { r.fail("/events/" + std::to_string(i), what); };
    if (e.lane >= nl || e.name >= ns || e.kind >= ns) bad("event refers to a lane or string out of range");
    if (e.start_ps < 0 || e.dur_ps < 0) bad("negative start or duration");
    if (e.dur_ps > kMaxTracePs - e.start_ps || e.dur_ps > kMaxTracePs - total_dur) {
      bad("event times beyond the clock's range (2^63 ps)");
    }
    total_dur += e.dur_ps;
  }
  auto nc = r.count(kMax, 20, "counters");
  t.counters.reserve(std::min(nc, kChunk));
  for (std::uint64_t i = 0; i < nc; ++i) {
    auto& c = t.counters.emplace_back();
    c.process = check(r.get<std::uint32_t>(), "/counters/process");
    c.name = check(r.get<std::uint32_t>(), "/counters/name");
    c.pid = r.get<std::uint32_t>();
    auto n = r.count(kMax, 16, "counter samples");
    c.samples.reserve(std::min(n, kChunk));
    for (std::uint64_t k = 0; k < n; ++k) {
      const auto ts = r.time("/counters/samples");
      c.samples.emplace_back(ts, r.get<double>());
    }
  }
  auto na = r.count(kMax, 28, "arrows");
  t.arrows.reserve(std::min(na, kChunk));
  for (std::uint64_t i = 0; i < na; ++i) {
    auto& a = t.arrows.emplace_back();
    a.from_lane = r.get<std::uint32_t>();
    a.to_lane = r.get<std::uint32_t>();
    a.from_ps = r.time("/arrows/from_ps");
    a.to_ps = r.time("/arrows/to_ps");
    a.name = check(r.get<std::uint32_t>(), "/arrows/name");
    if (a.from_lane >= nl || a.to_lane >= nl) r.fail("/arrows", "arrow refers to a lane out of range");
  }
  auto nsum = r.count(1u << 20, 12, "summary entries");
  t.summary.reserve(std::min<std::uint64_t>(nsum, kChunk));
  for (std::uint64_t i = 0; i < nsum; ++i) {
    auto k = r.str();
    t.summary.emplace_back(std::move(k), r.get<double>());
  }
  t.rebuild_index();
  return t;
}

// ---------------------------------------------------------------- Chrome JSON
namespace {

void put_json_string(std::ostream& out, const std::string& s) {
  out << '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out << "\\\"";
        break;
      case '\\':
        out << "\\\\";
        break;
      case '\n':
        out << "\\n";
        break;
      case '\t':
        out << "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

// Picoseconds as microseconds, exactly: integer part, '.', six digits.
void put_us(std::ostream& out, std::int64_t ps) {
  if (ps < 0) {
    out << '-';
    ps = -ps;
  }
  char frac[8];
  std::snprintf(frac, sizeof frac, "%06lld", static_cast<long long>(ps % 1000000));
  out << ps / 1000000 << '.' << frac;
}

void put_double(std::ostream& out, double v) {
  if (!std::isfinite(v)) {
    out << "null";
    return;
  }
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.write(buf, res.ptr - buf);
}

}  // namespace

void write_chrome_trace(const Trace& t, std::ostream& out) {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ",\n";
    first = false;
  };
  // Process and thread names, once each, in lane order.
  std::vector<std::uint32_t> named_pids;
  for (const auto& l : t.lanes) {
    if (std::find(named_pids.begin(), named_pids.end(), l.pid) == named_pids.end()) {
      named_pids.push_back(l.pid);
      sep();
      out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << l.pid << ",\"tid\":0,\"args\":{\"name\":";
      put_json_string(out, t.str(l.process));
      out << "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" << l.pid
          << ",\"tid\":0,\"args\":{\"sort_index\":" << l.pid << "}}";
    }
    sep();
    out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << l.pid << ",\"tid\":" << l.tid << ",\"args\":{\"name\":";
    put_json_string(out, t.str(l.thread));
    out << "}}";
  }
  for (const auto& e : t.events) {
    const auto& l = t.lanes[e.lane];
    sep();
    out << "{\"ph\":\"X\",\"pid\":" << l.pid << ",\"tid\":" << l.tid << ",\"name\":";
    put_json_string(out, t.str(e.name));
    out << ",\"cat\":";
    put_json_string(out, t.str(e.kind));
    out << ",\"ts\":";
    put_us(out, e.start_ps);
    out << ",\"dur\":";
    put_us(out, e.dur_ps);
    out << ",\"args\":{\"flops\":";
    put_double(out, e.flops);
    out << ",\"bytes\":";
    put_double(out, e.bytes);
    if (e.group != kNoIndex) out << ",\"group\":" << e.group;
    out << "}}";
  }
  for (const auto& c : t.counters) {
    for (const auto& [ts, v] : c.samples) {
      sep();
      out << "{\"ph\":\"C\",\"pid\":" << c.pid << ",\"tid\":0,\"name\":";
      put_json_string(out, t.str(c.name));
      out << ",\"ts\":";
      put_us(out, ts);
      out << ",\"args\":{\"value\":";
      put_double(out, v);
      out << "}}";
    }
  }
  std::uint64_t flow_id = 1;
  for (const auto& a : t.arrows) {
    const auto& from = t.lanes[a.from_lane];
    const auto& to = t.lanes[a.to_lane];
    sep();
    out << "{\"ph\":\"s\",\"id\":" << flow_id << ",\"pid\":" << from.pid << ",\"tid\":" << from.tid
        << ",\"cat\":\"flow\",\"name\":";
    put_json_string(out, t.str(a.name));
    out << ",\"ts\":";
    put_us(out, a.from_ps);
    out << "},\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":" << flow_id << ",\"pid\":" << to.pid << ",\"tid\":" << to.tid
        << ",\"cat\":\"flow\",\"name\":";
    put_json_string(out, t.str(a.name));
    out << ",\"ts\":";
    put_us(out, a.to_ps);
    out << "}";
    ++flow_id;
  }
  out << "\n],\n\"ctwin\":{\"lanes\":[";
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    if (i) out << ',';
    out << '[' << t.lanes[i].pid << ',' << t.lanes[i].tid << ',';
    put_json_string(out, t.str(t.lanes[i].group));
    out << ']';
  }
  out << "],\"summary\":[";
  for (std::size_t i = 0; i < t.summary.size(); ++i) {
    if (i) out << ',';
    out << '[';
    put_json_string(out, t.summary[i].first);
    out << ',';
    put_double(out, t.summary[i].second);
    out << ']';
  }
  out << "]}}\n";
}

namespace {

// Reading Chrome JSON: every number is range-checked before it is converted (a pid of 1e20 is
// an InputError naming it, never an out-of-range cast), every shape checked before it is used.
struct ChromeReader {
  const std::string& what;

  [[noreturn]] void fail(const std::string& where, const nlohmann::json* v, const std::string& expected) const {
    // shown(): a bounded excerpt, never the whole (possibly huge or deeply nested) value.
    throw InputError(what, where, v ? "found " + shown(*v) : std::string("missing"), expected);
  }
  // An integer in [0, max] (a float with no fractional part is taken too).
  std::uint64_t unsigned_int(const nlohmann::json& v, const std::string& where, std::uint64_t max) const {
    const std::string expected = "an integer from 0 to " + std::to_string(max);
    if (v.is_number_unsigned()) {
      const auto n = v.get<std::uint64_t>();
      if (n > max) fail(where, &v, expected);
      return n;
    }
    if (v.is_number_integer()) {
      const auto n = v.get<std::int64_t>();
      if (n < 0 || static_cast<std::uint64_t>(n) > max) fail(where, &v, expected);
      return static_cast<std::uint64_t>(n);
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // 2^64 is exact in a double; anything below it and integral converts exactly.
      if (!(d >= 0 && d < 18446744073709551616.0) || d != std::floor(d)) fail(where, &v, expected);
      const auto n = static_cast<std::uint64_t>(d);
      if (n > max) fail(where, &v, expected);
      return n;
    }
    fail(where, &v, expected);
  }
  std::uint32_t u32(const nlohmann::json& v, const std::string& where) const {
    return static_cast<std::uint32_t>(unsigned_int(v, where, UINT32_MAX));
  }
  const nlohmann::json& at(const nlohmann::json& o, const char* key, const std::string& where) const {
    if (!o.is_object() || !o.contains(key)) fail(where + "/" + key, nullptr, "a value");
    return o[key];
  }
  std::uint32_t u32_at(const nlohmann::json& o, const char* key, const std::string& where) const {
    return u32(at(o, key, where), where + "/" + key);
  }
  std::string string_or(const nlohmann::json& o, const char* key, const std::string& where,
                        const std::string& def) const {
    if (!o.contains(key)) return def;
    if (!o[key].is_string()) fail(where + "/" + key, &o[key], "a string");
    return o[key].get<std::string>();
  }
  // Microseconds to picoseconds, rounded: in [0, 2^63) ps or an InputError.
  std::int64_t ps(const nlohmann::json& v, const std::string& where) const {
    if (!v.is_number()) fail(where, &v, "a time in microseconds");
    const double p = std::round(v.get<double>() * 1e6);
    if (!(p >= 0 && p < 9223372036854775808.0)) {
      fail(where, &v, "a time from 0 to 9223372036854 microseconds (the clock's range)");
    }
    return static_cast<std::int64_t>(p);
  }
  std::int64_t ps_at(const nlohmann::json& o, const char* key, const std::string& where) const {
    return ps(at(o, key, where), where + "/" + key);
  }
};

}  // namespace

Trace read_chrome_trace(std::istream& in, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e99999
    throw InputError(what, "", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    throw InputError(what, "/traceEvents", "missing", "a Chrome trace JSON object with a traceEvents array");
  }
  const ChromeReader r{what};
  Trace t;
  std::unordered_map<std::uint32_t, std::string> process_names;
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::string>> thread_names;
  std::unordered_map<std::uint64_t, std::uint32_t> lane_of;  // (pid << 32 | tid) -> lane
  std::unordered_map<std::uint64_t, std::string> lane_group;
  const nlohmann::json* ctwin = j.contains("ctwin") ? &j["ctwin"] : nullptr;
  if (ctwin && !ctwin->is_object()) r.fail("/ctwin", ctwin, "an object with lanes and summary");
  if (ctwin && ctwin->contains("lanes")) {
    const auto& lanes = (*ctwin)["lanes"];
    if (!lanes.is_array()) r.fail("/ctwin/lanes", &lanes, "an array of [pid, tid, group] arrays");
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      const auto& l = lanes[i];
      const std::string where = "/ctwin/lanes/" + std::to_string(i);
      if (!l.is_array() || l.size() != 3 || !l[2].is_string()) r.fail(where, &l, "[pid, tid, \"group\"]");
      const std::uint64_t key = (std::uint64_t{r.u32(l[0], where + "/0")} << 32) | r.u32(l[1], where + "/1");
      lane_group[key] = l[2].get<std::string>();
    }
  }
  const auto& evs = j["traceEvents"];
  auto where_of = [](std::size_t i) { return "/traceEvents/" + std::to_string(i); };
  for (std::size_t i = 0; i < evs.size(); ++i) {
    const auto& e = evs[i];
    const std::string where = where_of(i);
    if (!e.is_object()) r.fail(where, &e, "a trace event object");
    if (r.string_or(e, "ph", where, "") != "M") continue;
    const std::string name = r.string_or(e, "name", where, "");
    if (name != "process_name" && name != "thread_name") continue;
    const auto& args = r.at(e, "args", where);
    const std::string n = r.string_or(args, "name", where + "/args", "");
    if (!args.is_object() || !args.contains("name")) r.fail(where + "/args/name", nullptr, "a string");
    if (name == "process_name") {
      process_names[r.u32_at(e, "pid", where)] = n;
    } else {
      thread_names.emplace_back(r.u32_at(e, "pid", where), r.u32_at(e, "tid", where), n);
    }
  }
  auto lane_for = [&](std::uint32_t pid, std::uint32_t tid) {
    std::uint64_t key = (static_cast<std::uint64_t>(pid) << 32) | tid;
    auto it = lane_of.find(key);
    if (it != lane_of.end()) return it->second;
    std::string pname = process_names.count(pid) ? process_names[pid] : "pid " + std::to_string(pid);
    std::string tname = "tid " + std::to_string(tid);
    for (const auto& [p, th, n] : thread_names) {
      if (p == pid && th == tid) tname = n;
    }
    auto lane = t.add_lane(pname, tname, lane_group.count(key) ? lane_group[key] : std::string{}, pid, tid);
    lane_of.emplace(key, lane);
    return lane;
  };
  for (const auto& [p, th, n] : thread_names) lane_for(p, th);
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::int64_t>> flow_start;
  std::unordered_map<std::uint64_t, std::uint32_t> counter_of;
  std::int64_t total_dur = 0;
  for (std::size_t i = 0; i < evs.size(); ++i) {
    const auto& e = evs[i];
    const std::string where = where_of(i);
    const std::string ph = r.string_or(e, "ph", where, "");
    if (ph == "X") {
      TraceEvent ev;
      ev.lane = lane_for(r.u32_at(e, "pid", where), r.u32_at(e, "tid", where));
      ev.name = t.intern(r.string_or(e, "name", where, ""));
      ev.kind = t.intern(r.string_or(e, "cat", where, ""));
      ev.start_ps = r.ps_at(e, "ts", where);
      ev.dur_ps = e.contains("dur") ? r.ps_at(e, "dur", where) : 0;
      if (ev.dur_ps > INT64_MAX - ev.start_ps || ev.dur_ps > INT64_MAX - total_dur) {
        r.fail(where + "/dur", &e["dur"], "event times within the clock's range (2^63 ps in all)");
      }
      total_dur += ev.dur_ps;
      if (e.contains("args") && e["args"].is_object()) {
        const auto& a = e["args"];
        if (a.contains("flops") && a["flops"].is_number()) ev.flops = a["flops"].get<double>();
        if (a.contains("bytes") && a["bytes"].is_number()) ev.bytes = a["bytes"].get<double>();
        if (a.contains("group") && a["group"].is_number()) {
          ev.group = static_cast<std::uint32_t>(r.unsigned_int(a["group"], where + "/args/group", kNoIndex - 1));
        }
      }
      t.events.push_back(ev);
    } else if (ph == "C") {
      auto pid = r.u32_at(e, "pid", where);
      auto name = t.intern(r.string_or(e, "name", where, ""));
      std::uint64_t key = (static_cast<std::uint64_t>(pid) << 32) | name;
      auto it = counter_of.find(key);
      if (it == counter_of.end()) {
        std::string pname = process_names.count(pid) ? process_names[pid] : "pid " + std::to_string(pid);
        t.counters.push_back(TraceCounterTrack{t.intern(pname), name, pid, {}});
        it = counter_of.emplace(key, static_cast<std::uint32_t>(t.counters.size() - 1)).first;
      }
      double v = 0;
      if (e.contains("args") && e["args"].is_object() && !e["args"].empty()) {
        const auto& first = e["args"].begin().value();
        if (first.is_number()) v = first.get<double>();
      }
      t.counters[it->second].samples.emplace_back(r.ps_at(e, "ts", where), v);
    } else if (ph == "s") {
      const auto id = r.unsigned_int(r.at(e, "id", where), where + "/id", UINT64_MAX);
      flow_start[id] = {lane_for(r.u32_at(e, "pid", where), r.u32_at(e, "tid", where)), r.ps_at(e, "ts", where)};
    } else if (ph == "f") {
      auto it = flow_start.find(r.unsigned_int(r.at(e, "id", where), where + "/id", UINT64_MAX));
      if (it != flow_start.end()) {
        const auto to_lane = lane_for(r.u32_at(e, "pid", where), r.u32_at(e, "tid", where));
        const auto to_ps = r.ps_at(e, "ts", where);
        t.arrows.push_back(TraceArrow{it->second.first, to_lane, it->second.second, to_ps,
                                      t.intern(r.string_or(e, "name", where, ""))});
      }
    }
  }
  if (ctwin && ctwin->contains("summary")) {
    const auto& summary = (*ctwin)["summary"];
    if (!summary.is_array()) r.fail("/ctwin/summary", &summary, "an array of [\"name\", value] pairs");
    for (std::size_t i = 0; i < summary.size(); ++i) {
      const auto& kv = summary[i];
      if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string()) {
        r.fail("/ctwin/summary/" + std::to_string(i), &kv, "[\"name\", value]");
      }
      t.summary.emplace_back(kv[0].get<std::string>(), kv[1].is_number() ? kv[1].get<double>() : NAN);
    }
  }
  return t;
}

void write_trace_file(const Trace& t, const std::filesystem::path& path, bool replace) {
  write_file_atomically(path, replace, "--trace", [&](std::ostream& out) {
    if (path.extension() == ".json") {
      write_chrome_trace(t, out);
    } else {
      write_trace_binary(t, out);
    }
  });
}

Trace read_trace_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "cannot open the trace file", "a readable .ctt or .json trace");
  if (path.extension() == ".json") return read_chrome_trace(in, path.string());
  return read_trace_binary(in, path.string());
}

}  // namespace ctwin
