// The loader of a serving scenario's /traffic object through its ParamDecl tables.
#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "sim/error.hpp"
#include "workloads/serving_traffic_params.hpp"

namespace ctwin {

std::vector<ParamTable> traffic_param_tables() {
  return {
      {"/traffic", "serving traffic: arrivals, lengths, prefixes, sessions, classes", traffic_params},
      {"/traffic/arrival", "how requests arrive", traffic_arrival_params},
      {"/traffic/input_tokens", "a length distribution (also /traffic/output_tokens)", traffic_length_params},
      {"/traffic/prefix", "shared system prompts", traffic_prefix_params},
      {"/traffic/sessions", "multi-turn sessions", traffic_session_params},
      {"/traffic/lora", "LoRA adapters the requests carry", traffic_lora_params},
      {"/traffic/classes/N", "a request class", traffic_class_params},
  };
}

namespace {

// A data file's defect is reported at the scenario key that names the file, the data file's own
// place (row, line) in the message: the user sees both what to fix and where it was referenced.
template <class Parse>
auto parse_data_file(const JsonObject& o, const char* key, Parse parse) {
  try {
    return parse();
  } catch (const InputError& e) {
    throw InputError(o.file(), o.child(key), e.file + (e.path.empty() ? "" : ", " + e.path) + ": " + e.problem,
                     e.expected);
  }
}

std::string resolve(const std::string& name, const std::filesystem::path& base_dir) {
  const std::filesystem::path p(name);
  return (p.is_relative() ? base_dir / p : p).string();
}

// The keys of /traffic/arrival that `process` reads (others given are an error, not ignored).
std::vector<std::string> arrival_keys(ArrivalProcess p) {
  switch (p) {
    case ArrivalProcess::poisson:
    case ArrivalProcess::constant:
      return {"process", "rate_per_s"};
    case ArrivalProcess::gamma:
      return {"process", "rate_per_s", "cv"};
    case ArrivalProcess::steps:
      return {"process", "steps"};
    case ArrivalProcess::diurnal:
      return {"process", "period_s", "min_rate_per_s", "max_rate_per_s"};
    case ArrivalProcess::burst:
      return {"process", "rate_per_s", "burst_start_s", "burst_duration_s", "burst_rate_per_s"};
    case ArrivalProcess::offline:
      return {"process"};
    case ArrivalProcess::closed_loop:
      return {"process", "users", "think_time_s"};
    case ArrivalProcess::trace:
      return {"process", "file", "time_scale", "rate_per_s", "format", "block_tokens"};
  }
  return {};
}

std::vector<RateStep> read_steps(const JsonObject& o) {
  const std::string expected = "[[t_s, rate_per_s], ...]: t_s from 0 ascending (at most 1e6 s), rates 0 to 1e7/s";
  if (!o.has("steps")) o.fail("steps", "missing required key", expected);
  const Json& v = o.raw("steps");
  if (!v.is_array() || v.empty() || v.size() > 100000) o.fail("steps", "found " + shown(v), expected);
  std::vector<RateStep> steps;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    const std::string at = "steps/" + std::to_string(i);
    if (!e.is_array() || e.size() != 2 || !e[0].is_number() || !e[1].is_number()) {
      o.fail(at, "found " + shown(e), expected);
    }
    const RateStep s{e[0].get<double>(), e[1].get<double>()};
    const bool first_ok = i > 0 || s.t_s == 0;
    const bool order_ok = i == 0 || s.t_s > steps.back().t_s;
    if (!first_ok || !order_ok || !(s.t_s >= 0 && s.t_s <= kMaxTrafficSeconds))
      o.fail(at + "/0", "found " + shown(e[0]), expected);
    if (!(s.rate_per_s == 0 || (s.rate_per_s >= kMinRatePerS && s.rate_per_s <= kMaxRatePerS))) {
      o.fail(at + "/1", "found " + shown(e[1]), "0 or a rate from 1e-6 to 1e7 requests/s");
    }
    steps.push_back(s);
  }
  return steps;
}

ArrivalSpec read_arrival(const JsonObject& o, const std::filesystem::path& base_dir, const std::string& trace_file) {
  const ParamReader r(o, traffic_arrival_params);
  ArrivalSpec a;
  a.process = r.choice("process", arrival_process_names, ArrivalProcess::poisson);
  o.only(arrival_keys(a.process));
  switch (a.process) {
    case ArrivalProcess::poisson:
    case ArrivalProcess::constant:
      a.rate_per_s = r.number("rate_per_s");
      break;
    case ArrivalProcess::gamma:
      a.rate_per_s = r.number("rate_per_s");
      a.cv = r.number("cv");
      break;
    case ArrivalProcess::steps:
      a.steps = read_steps(o);
      break;
    case ArrivalProcess::diurnal:
      a.period_s = r.number("period_s");
      a.min_rate_per_s = r.number("min_rate_per_s");
      a.max_rate_per_s = r.number("max_rate_per_s");
      if (a.min_rate_per_s > a.max_rate_per_s) {
        o.fail("min_rate_per_s", "found " + shown(o.raw("min_rate_per_s")) + ", above max_rate_per_s",
               "at most max_rate_per_s");
      }
      break;
    case ArrivalProcess::burst:
      a.rate_per_s = r.number("rate_per_s");
      a.burst_start_s = r.number("burst_start_s");
      a.burst_duration_s = r.number("burst_duration_s");
      a.burst_rate_per_s = r.number("burst_rate_per_s");
      break;
    case ArrivalProcess::offline:
      break;
    case ArrivalProcess::closed_loop:
      a.users = static_cast<std::int32_t>(r.integer("users"));
      a.think_time_s = r.number("think_time_s");
      break;
    case ArrivalProcess::trace: {
      const auto format = r.choice("format", trace_format_names, TraceFormat::azure_csv);
      const std::string path = resolve(r.string("file"), base_dir);
      if (format == TraceFormat::azure_csv) {
        if (r.has("block_tokens")) o.fail("block_tokens", "given with format azure_csv", "none (mooncake_jsonl only)");
        const std::string text = read_input_file(path, trace_file, o.child("file"),
                                                 "a CSV with the header TIMESTAMP,ContextTokens,GeneratedTokens");
        a.trace = std::make_shared<const std::vector<TraceRow>>(
            parse_data_file(o, "file", [&] { return parse_request_trace(text, path); }));
      } else {
        const auto block_tokens = static_cast<std::int32_t>(r.integer("block_tokens"));
        const std::string text = read_input_file(path, trace_file, o.child("file"),
                                                 "a JSON-lines trace in the Mooncake layout (format mooncake_jsonl)");
        auto t = parse_data_file(o, "file", [&] { return parse_mooncake_trace(text, path, block_tokens); });
        a.trace = std::make_shared<const std::vector<TraceRow>>(std::move(t.rows));
        a.trace_blocks = std::make_shared<const PrefixBlockPool>(std::move(t.blocks));
      }
      if (r.has("rate_per_s") && r.has("time_scale")) {
        o.fail("rate_per_s", "found both rate_per_s and time_scale", "one of them");
      }
      a.time_scale = r.number("time_scale");
      if (r.has("rate_per_s")) {
        const double span_s = a.trace->back().arrival.seconds();
        if (a.trace->size() < 2 || span_s <= 0) {
          o.fail("rate_per_s", "the trace's rows all arrive at once", "time_scale, or a trace spanning some time");
        }
        // (rows - 1) gaps over the span: the mean rate; scaled to the one asked.
        a.time_scale = static_cast<double>(a.trace->size() - 1) / (span_s * r.number("rate_per_s"));
        if (a.time_scale * span_s > 9e6) o.fail("rate_per_s", "the replay would last beyond 9e6 s", "a higher rate");
      }
      break;
    }
  }
  return a;
}

std::vector<std::int32_t> read_values(const JsonObject& o) {
  const Json& v = o.raw("values");
  const std::string expected = "an array of 1 to 16777216 lengths, integers from 1 to 16777216";
  if (!v.is_array() || v.empty() || v.size() > (1u << 24)) o.fail("values", "found " + shown(v), expected);
  std::vector<std::int32_t> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    if (!e.is_number_integer() || e.get<long long>() < 1 || e.get<long long>() > kMaxTrafficTokens) {
      o.fail("values/" + std::to_string(i), "found " + shown(e), "an integer from 1 to 16777216 (tokens)");
    }
    out.push_back(static_cast<std::int32_t>(e.get<long long>()));
  }
  return out;
}

LengthSpec read_length(const JsonObject& o, const std::string& file, const std::filesystem::path& base_dir) {
  const ParamReader r(o, traffic_length_params);
  LengthSpec l;
  l.dist = r.choice("dist", length_dist_names, LengthDist::fixed);
  switch (l.dist) {
    case LengthDist::fixed:
      o.only({"dist", "value"});
      l.value = static_cast<std::int32_t>(r.integer("value"));
      l.min = l.max = l.value;
      break;
    case LengthDist::uniform:
      o.only({"dist", "min", "max"});
      l.min = static_cast<std::int32_t>(r.integer("min"));
      l.max = static_cast<std::int32_t>(r.integer("max", std::nullopt));
      if (l.max < l.min) o.fail("max", "found " + shown(o.raw("max")) + ", below min", "at least min");
      break;
    case LengthDist::lognormal: {
      o.only({"dist", "median", "mean", "sigma", "min", "max"});
      l.sigma = r.number("sigma");
      if (r.has("median") == r.has("mean")) {
        o.fail(r.has("mean") ? "mean" : "median", r.has("mean") ? "found both median and mean" : "missing",
               "one of median and mean (tokens)");
      }
      l.mu = r.has("median") ? std::log(r.number("median")) : std::log(r.number("mean")) - l.sigma * l.sigma / 2;
      l.min = static_cast<std::int32_t>(r.integer("min"));
      l.max = static_cast<std::int32_t>(r.integer("max", kMaxTrafficTokens));
      if (l.max < l.min) o.fail("max", "found " + shown(o.raw("max")) + ", below min", "at least min");
      break;
    }
    case LengthDist::empirical: {
      o.only({"dist", "values", "file"});
      if (r.has("values") == r.has("file")) {
        o.fail(r.has("file") ? "file" : "values", r.has("file") ? "found both values and file" : "missing",
               "one of values (an array) and file");
      }
      if (r.has("values")) {
        l.samples = std::make_shared<const std::vector<std::int32_t>>(read_values(o));
      } else {
        const std::string path = resolve(r.string("file"), base_dir);
        const std::string text = read_input_file(path, file, o.child("file"), "a text file of token lengths");
        l.samples = std::make_shared<const std::vector<std::int32_t>>(
            parse_data_file(o, "file", [&] { return parse_length_samples(text, path); }));
      }
      break;
    }
  }
  return l;
}

RequestClass read_class(const JsonObject& o) {
  const ParamReader r(o, traffic_class_params);
  RequestClass c;
  c.name = r.string("name", std::string("default"));
  c.share = r.number("share");
  c.priority = static_cast<int>(r.integer("priority"));
  c.ttft_slo_s = r.number("ttft_slo_s");
  c.tpot_slo_s = r.number("tpot_slo_s");
  c.e2e_slo_s = r.number("e2e_slo_s");
  return c;
}

}  // namespace

void check_trace_block_tokens(const TrafficSpec& t, const JsonObject& traffic, int block_size,
                              const std::string& block_size_key) {
  const auto& pool = t.arrival.trace_blocks;
  if (!pool || block_size < 1 || pool->block_tokens % block_size == 0) return;
  const std::string bs = std::to_string(block_size);
  traffic.object("arrival").fail(
      "block_tokens",
      "found " + std::to_string(pool->block_tokens) + ", not a multiple of " + block_size_key + " = " + bs,
      "a multiple of " + block_size_key + " (" + bs + " tokens; a KV page must lie inside one hash block), or a " +
          "block_size dividing it");
}

std::vector<std::int32_t> parse_length_samples(const std::string& text, const std::string& file) {
  std::vector<std::int32_t> out;
  std::size_t line = 1;
  std::size_t i = 0;
  const std::string expected = "lengths: integers from 1 to 16777216 separated by spaces, commas or newlines";
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == ',') {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      const std::size_t start = i;
      std::int64_t v = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= kMaxTrafficTokens)
        v = v * 10 + (text[i++] - '0');
      const bool sep = i == text.size() || text[i] == '\n' || text[i] == ' ' || text[i] == '\t' || text[i] == '\r' ||
                       text[i] == ',' || text[i] == '#';
      if (i == start || !sep || v < 1 || v > kMaxTrafficTokens) {
        // The offending field only (up to its separator, at most 20 characters): one line of error.
        std::size_t end = start;
        while (end < text.size() && end - start < 20 &&
               std::string_view(" \t\r\n,#").find(text[end]) == std::string_view::npos)
          ++end;
        throw InputError(file, "line " + std::to_string(line), "found \"" + text.substr(start, end - start) + "\"",
                         expected);
      }
      out.push_back(static_cast<std::int32_t>(v));
    }
  }
  if (out.empty()) throw InputError(file, "", "no lengths", expected);
  return out;
}

TrafficSpec traffic_from_json(const JsonObject& o, const std::string& file, const std::filesystem::path& base_dir) {
  const ParamReader r(o, traffic_params);
  TrafficSpec s;
  s.seed = static_cast<std::uint64_t>(r.integer("seed"));
  s.arrival = read_arrival(o.object("arrival"), base_dir, file);
  const ArrivalProcess p = s.arrival.process;
  const bool trace = p == ArrivalProcess::trace;
  if (r.has("requests")) s.requests = r.integer("requests");
  if (r.has("duration_s")) s.duration_s = r.number("duration_s");
  if (p == ArrivalProcess::offline && s.requests < 0) {
    o.fail("requests", "missing", "a request count (offline sends them all at t = 0)");
  }
  if (!trace && s.requests < 0 && s.duration_s < 0) {
    o.fail("requests", "missing (and no duration_s)", "requests or duration_s, or both (whichever comes first)");
  }
  for (const char* key : {"input_tokens", "output_tokens"}) {
    if (trace && r.has(key)) o.fail(key, "given with a trace", "none: the trace gives the lengths");
    if (!trace && !r.has(key))
      o.fail(key, "missing", "a length distribution such as {\"dist\": \"fixed\", \"value\": 512}");
  }
  if (!trace) {
    s.input = read_length(o.object("input_tokens"), file, base_dir);
    s.output = read_length(o.object("output_tokens"), file, base_dir);
  }
  if (r.has("prefix")) {
    if (s.arrival.trace_blocks) {
      o.fail("prefix", "given with a mooncake_jsonl trace",
             "none: the trace's hash_ids say which prompt blocks requests share");
    }
    const JsonObject po = o.object("prefix");
    const ParamReader pr(po, traffic_prefix_params);
    s.prefix.shared_tokens = static_cast<std::int32_t>(pr.integer("shared_tokens"));
    s.prefix.share_ratio = pr.number("share_ratio");
    s.prefix.groups = static_cast<std::int32_t>(pr.integer("groups"));
  }
  if (r.has("sessions")) {
    const JsonObject so = o.object("sessions");
    const ParamReader sr(so, traffic_session_params);
    s.sessions.turns = static_cast<std::int32_t>(sr.integer("turns"));
    s.sessions.active = static_cast<std::int32_t>(sr.integer("active"));
    if (trace && s.sessions.turns > 1) {
      so.fail("turns", "sessions with a trace", "1 (a trace's rows are independent requests)");
    }
  }
  if (r.has("lora")) {
    const JsonObject lo = o.object("lora");
    const ParamReader lr(lo, traffic_lora_params);
    s.lora.adapters = static_cast<std::int32_t>(lr.integer("adapters"));
    s.lora.popularity = lr.choice("popularity", lora_popularity_names);
    s.lora.zipf_s = lr.number("zipf_s");
    s.lora.base_fraction = lr.number("base_fraction");
    s.lora.rank = static_cast<std::int32_t>(lr.integer("rank"));
  }
  if (r.has("classes")) {
    const Json& v = o.raw("classes");
    if (!v.is_array() || v.empty() || v.size() > 1024) {
      o.fail("classes", "found " + shown(v), "an array of 1 to 1024 class objects");
    }
    s.classes.clear();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string key = std::to_string(i);
      if (!v[i].is_object()) o.fail("classes/" + key, "found " + shown(v[i]), "a class object");
      s.classes.push_back(read_class(JsonObject(v[i], o.child("classes") + "/" + key, o.file())));
    }
  }
  return s;
}

}  // namespace ctwin
