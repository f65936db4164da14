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
#include "sim/output_file.hpp"

namespace ctwin {

static_assert(std::endian::native == std::endian::little, "the binary trace format is little-endian");
static_assert(sizeof(TraceEvent) == 48, "TraceEvent is written as a packed 48-byte record");

std::uint32_t Trace::intern(std::string_view s) {
  if (index_.size() != strings.size()) rebuild_index();
  auto it = index_.find(std::string(s));
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

struct Reader {
  std::istream& in;
  const std::string& what;
  template <class T>
  T get() {
    T v{};
    read_raw(&v, sizeof(T));
    return v;
  }
  void read_raw(void* p, std::size_t n) {
    in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in.gcount()) != n) throw InputError(what, "", "the trace file is truncated");
  }
  std::uint64_t count(std::uint64_t limit, const char* of) {
    auto n = get<std::uint64_t>();
    if (n > limit) throw InputError(what, "", std::string("implausible number of ") + of + " in the trace header");
    return n;
  }
  std::string str() {
    auto n = get<std::uint32_t>();
    if (n > (1u << 24)) throw InputError(what, "", "implausible string length in the trace file");
    std::string s(n, '\0');
    read_raw(s.data(), n);
    return s;
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
  Reader r{in, what};
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
  auto ns = r.count(kMax, "strings");
  t.strings.reserve(ns);
  for (std::uint64_t i = 0; i < ns; ++i) t.strings.push_back(r.str());
  auto check = [&](std::uint32_t idx) {
    if (idx >= t.strings.size()) throw InputError(what, "", "string index out of range in the trace file");
    return idx;
  };
  auto nl = r.count(kMax, "lanes");
  t.lanes.resize(nl);
  for (auto& l : t.lanes) {
    l.process = check(r.get<std::uint32_t>());
    l.thread = check(r.get<std::uint32_t>());
    l.group = check(r.get<std::uint32_t>());
    l.pid = r.get<std::uint32_t>();
    l.tid = r.get<std::uint32_t>();
  }
  auto ne = r.count(kMax, "events");
  t.events.resize(ne);
  r.read_raw(t.events.data(), ne * sizeof(TraceEvent));
  for (const auto& e : t.events) {
    if (e.lane >= nl || e.name >= ns || e.kind >= ns) {
      throw InputError(what, "", "event refers to a lane or string out of range");
    }
  }
  auto nc = r.count(kMax, "counters");
  t.counters.resize(nc);
  for (auto& c : t.counters) {
    c.process = check(r.get<std::uint32_t>());
    c.name = check(r.get<std::uint32_t>());
    c.pid = r.get<std::uint32_t>();
    auto n = r.count(kMax, "counter samples");
    c.samples.resize(n);
    for (auto& [ts, v] : c.samples) {
      ts = r.get<std::int64_t>();
      v = r.get<double>();
    }
  }
  auto na = r.count(kMax, "arrows");
  t.arrows.resize(na);
  for (auto& a : t.arrows) {
    a.from_lane = r.get<std::uint32_t>();
    a.to_lane = r.get<std::uint32_t>();
    a.from_ps = r.get<std::int64_t>();
    a.to_ps = r.get<std::int64_t>();
    a.name = check(r.get<std::uint32_t>());
    if (a.from_lane >= nl || a.to_lane >= nl) throw InputError(what, "", "arrow refers to a lane out of range");
  }
  auto nsum = r.count(1u << 20, "summary entries");
  t.summary.resize(nsum);
  for (auto& [k, v] : t.summary) {
    k = r.str();
    v = r.get<double>();
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

Trace read_chrome_trace(std::istream& in, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(what, "", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    throw InputError(what, "/traceEvents", "missing", "a Chrome trace JSON object with a traceEvents array");
  }
  auto to_ps = [](const nlohmann::json& v) { return static_cast<std::int64_t>(std::llround(v.get<double>() * 1e6)); };
  Trace t;
  std::unordered_map<std::uint32_t, std::string> process_names;
  std::vector<std::tuple<std::uint32_t, std::uint32_t, std::string>> thread_names;
  std::unordered_map<std::uint64_t, std::uint32_t> lane_of;  // (pid << 32 | tid) -> lane
  std::unordered_map<std::uint64_t, std::string> lane_group;
  if (j.contains("ctwin") && j["ctwin"].contains("lanes")) {
    for (const auto& l : j["ctwin"]["lanes"]) {
      lane_group[(l.at(0).get<std::uint64_t>() << 32) | l.at(1).get<std::uint32_t>()] = l.at(2).get<std::string>();
    }
  }
  const auto& evs = j["traceEvents"];
  try {
    for (const auto& e : evs) {
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
        process_names[e.at("pid").get<std::uint32_t>()] = e.at("args").at("name").get<std::string>();
      } else if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
        thread_names.emplace_back(e.at("pid").get<std::uint32_t>(), e.at("tid").get<std::uint32_t>(),
                                  e.at("args").at("name").get<std::string>());
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
    for (const auto& e : evs) {
      const std::string ph = e.value("ph", "");
      if (ph == "X") {
        TraceEvent ev;
        ev.lane = lane_for(e.at("pid").get<std::uint32_t>(), e.at("tid").get<std::uint32_t>());
        ev.name = t.intern(e.value("name", ""));
        ev.kind = t.intern(e.value("cat", ""));
        ev.start_ps = to_ps(e.at("ts"));
        ev.dur_ps = to_ps(e.value("dur", nlohmann::json(0.0)));
        if (e.contains("args")) {
          const auto& a = e["args"];
          if (a.contains("flops") && a["flops"].is_number()) ev.flops = a["flops"].get<double>();
          if (a.contains("bytes") && a["bytes"].is_number()) ev.bytes = a["bytes"].get<double>();
          if (a.contains("group") && a["group"].is_number()) ev.group = a["group"].get<std::uint32_t>();
        }
        t.events.push_back(ev);
      } else if (ph == "C") {
        auto pid = e.at("pid").get<std::uint32_t>();
        auto name = t.intern(e.value("name", ""));
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
        t.counters[it->second].samples.emplace_back(to_ps(e.at("ts")), v);
      } else if (ph == "s") {
        flow_start[e.at("id").get<std::uint64_t>()] = {
            lane_for(e.at("pid").get<std::uint32_t>(), e.at("tid").get<std::uint32_t>()), to_ps(e.at("ts"))};
      } else if (ph == "f") {
        auto it = flow_start.find(e.at("id").get<std::uint64_t>());
        if (it != flow_start.end()) {
          t.arrows.push_back(TraceArrow{it->second.first,
                                        lane_for(e.at("pid").get<std::uint32_t>(), e.at("tid").get<std::uint32_t>()),
                                        it->second.second, to_ps(e.at("ts")), t.intern(e.value("name", ""))});
        }
      }
    }
    if (j.contains("ctwin") && j["ctwin"].contains("summary")) {
      for (const auto& kv : j["ctwin"]["summary"]) {
        t.summary.emplace_back(kv.at(0).get<std::string>(), kv.at(1).is_number() ? kv.at(1).get<double>() : NAN);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(what, "/traceEvents", std::string("unexpected trace event: ") + e.what());
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
