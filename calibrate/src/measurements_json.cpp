#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "calibrate/measurements.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "sim/output_file.hpp"
#include "workloads/profile.hpp"

namespace ctwin::calibrate {

namespace {

constexpr CollectiveOp kCollectiveOps[] = {
    CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
    CollectiveOp::reduce,     CollectiveOp::all_to_all, CollectiveOp::send_recv};

template <class E, std::size_t N>
std::vector<std::string> names_of(const E (&values)[N]) {
  std::vector<std::string> out;
  for (E v : values) out.emplace_back(to_string(v));
  return out;
}

template <class E, std::size_t N>
E parse_enum(const JsonObject& o, const std::string& key, const E (&values)[N]) {
  const std::string s = o.choice(key, names_of(values));
  for (E v : values) {
    if (s == to_string(v)) return v;
  }
  return values[0];  // unreachable: choice() accepted s
}

Stats parse_stats(const JsonObject& o) {
  o.only({"median_s", "min_s", "max_s", "p10_s", "p90_s", "repeats"});
  Stats s;
  s.min_s = o.number("min_s", std::nullopt, 0);
  s.median_s = o.number("median_s", std::nullopt, s.min_s);
  s.max_s = o.number("max_s", std::nullopt, s.median_s);
  s.p10_s = o.number("p10_s", std::nullopt, s.min_s, s.median_s);
  s.p90_s = o.number("p90_s", std::nullopt, s.median_s, s.max_s);
  s.repeats = static_cast<int>(o.integer("repeats", std::nullopt, 1, 1'000'000'000));
  return s;
}

// Text from nccl-tests output or a trace may hold bytes that are not UTF-8 (a host name, a
// kernel name): written as U+FFFD rather than failing the whole file.
constexpr auto kReplaceInvalid = nlohmann::json::error_handler_t::replace;

nlohmann::ordered_json as_ordered(const nlohmann::json& j) {
  return nlohmann::ordered_json::parse(j.dump(-1, ' ', false, kReplaceInvalid));
}

// An OpCost's keys as read_op_cost reads them.
nlohmann::ordered_json op_json(const OpCost& op) {
  nlohmann::ordered_json e;
  e["kind"] = to_string(op.kind);
  e["dtype"] = to_string(op.dtype.value_or(Dtype::bf16));
  e["m"] = op.m;
  e["n"] = op.n;
  e["k"] = op.k;
  e["groups"] = op.groups;
  e["split_accumulator"] = op.split_accumulator;
  e["flops"] = op.flops;
  e["bytes"] = op.bytes;
  e["query_tokens"] = op.query_tokens;
  e["attended_pairs"] = op.attended_pairs;
  e["kv_tokens"] = op.kv_tokens;
  return e;
}

nlohmann::ordered_json stats_json(const Stats& s) {
  return {{"median_s", s.median_s}, {"min_s", s.min_s}, {"max_s", s.max_s},
          {"p10_s", s.p10_s},       {"p90_s", s.p90_s}, {"repeats", s.repeats}};
}

// An array at key (each element handed to `each` with its own JSON pointer).
template <class F>
void each_element(const JsonObject& o, const std::string& key, const std::string& file, F each) {
  const Json& a = o.raw(key);
  if (!a.is_array()) o.fail(key, "found " + shown(a), "an array");
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string path = o.child(key) + "/" + std::to_string(i);
    if (!a[i].is_object()) throw InputError(file, path, "found " + shown(a[i]), "an object");
    each(JsonObject(a[i], path, file));
  }
}

OpMeasurement parse_op(const JsonObject& o) {
  o.only({"kind", "dtype", "m", "n", "k", "groups", "split_accumulator", "flops", "bytes", "query_tokens",
          "attended_pairs", "kv_tokens", "origin", "name", "phase", "rank", "stats"});
  OpMeasurement m;
  m.op = read_op_cost(o, std::nullopt);
  m.origin = o.choice("origin", {"step", "sweep"}, std::string("sweep"));
  m.name = o.string("name", std::string());
  m.phase = o.string("phase", std::string());
  m.rank = static_cast<int>(o.integer("rank", 0, 0, 1 << 24));
  m.stats = parse_stats(o.object("stats"));
  return m;
}

CollectiveMeasurement parse_collective(const JsonObject& o, const std::string& file) {
  o.only({"op", "group", "ranks", "algorithm", "protocol", "bytes", "stats", "algbw_gbyte_per_s", "busbw_gbyte_per_s"});
  CollectiveMeasurement c;
  c.op = parse_enum(o, "op", kCollectiveOps);
  c.group = o.string("group", std::string("world"));
  const Json& r = o.raw("ranks");
  if (!r.is_array() || r.empty()) o.fail("ranks", "found " + shown(r), "a non-empty array of ranks");
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (!r[i].is_number_integer() || r[i].get<long long>() < 0 || r[i].get<long long>() >= (1 << 24)) {
      throw InputError(file, o.child("ranks") + "/" + std::to_string(i), "found " + shown(r[i]),
                       "a rank, an integer in [0, 16777216)");
    }
    c.ranks.push_back(r[i].get<int>());
  }
  c.algorithm = o.string("algorithm", std::string());
  c.protocol = o.string("protocol", std::string());
  c.bytes = o.number("bytes", std::nullopt, 0);
  c.stats = parse_stats(o.object("stats"));
  c.algbw_gbyte_per_s = o.number("algbw_gbyte_per_s", 0.0, 0);
  c.busbw_gbyte_per_s = o.number("busbw_gbyte_per_s", 0.0, 0);
  return c;
}

OverlapMeasurement parse_overlap(const JsonObject& o) {
  o.only({"op", "collective", "group", "bytes", "calls", "alone", "overlapped"});
  OverlapMeasurement v;
  const JsonObject op = o.object("op");
  op.only({"kind", "dtype", "m", "n", "k", "groups", "split_accumulator", "flops", "bytes", "query_tokens",
           "attended_pairs", "kv_tokens"});
  v.op = read_op_cost(op, std::nullopt);
  v.collective = parse_enum(o, "collective", kCollectiveOps);
  v.group = o.string("group", std::string());
  v.bytes = o.number("bytes", std::nullopt, 0);
  v.calls = static_cast<int>(o.integer("calls", 1, 1, 1'000'000));
  v.alone = parse_stats(o.object("alone"));
  v.overlapped = parse_stats(o.object("overlapped"));
  return v;
}

StepMeasurement parse_step(const JsonObject& o, const std::string& file) {
  o.only({"kind", "layout", "prefill", "decode", "stats", "per_rank_median_s"});
  StepMeasurement s;
  s.kind = o.choice("kind", {"training_step", "prefill", "decode", "mixed"});
  s.layout = o.has("layout") ? o.raw("layout") : Json::object();
  if (!s.layout.is_object()) o.fail("layout", "found " + shown(s.layout), "an object");
  if (o.has("prefill") || o.has("decode")) {
    if (s.kind == "training_step") {
      o.fail(o.has("prefill") ? "prefill" : "decode", "found in a training step", "no serving shape here");
    }
    s.shape = read_iteration_shape(o);
    if (s.shape->kind() != s.kind) {
      o.fail("kind", "found \"" + s.kind + "\" for a " + iteration_label(*s.shape),
             "\"" + std::string(s.shape->kind()) + "\", the kind of its prefill and decode parts");
    }
  }
  s.stats = parse_stats(o.object("stats"));
  if (o.has("per_rank_median_s")) {
    const Json& a = o.raw("per_rank_median_s");
    if (!a.is_array()) o.fail("per_rank_median_s", "found " + shown(a), "an array of seconds");
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number() || a[i].get<double>() < 0) {
        throw InputError(file, o.child("per_rank_median_s") + "/" + std::to_string(i), "found " + shown(a[i]),
                         "seconds, a number >= 0");
      }
      s.per_rank_median_s.push_back(a[i].get<double>());
    }
  }
  return s;
}

}  // namespace

Stats stats_of(std::vector<double> samples_s) {
  if (samples_s.empty()) throw std::invalid_argument("stats_of: no samples");
  std::sort(samples_s.begin(), samples_s.end());
  const auto n = samples_s.size();
  // Nearest rank: the smallest sample with at least q of them at or below it.
  auto rank = [&](double q) { return samples_s[static_cast<std::size_t>(std::ceil(q * n)) - (q > 0 ? 1 : 0)]; };
  Stats s;
  s.repeats = static_cast<int>(n);
  s.min_s = samples_s.front();
  s.max_s = samples_s.back();
  s.median_s = n % 2 == 1 ? samples_s[n / 2] : (samples_s[n / 2 - 1] + samples_s[n / 2]) / 2;
  s.p10_s = rank(0.10);
  s.p90_s = rank(0.90);
  return s;
}

Measurements parse_measurements(const std::string& text, const std::string& file) {
  check_json_text(text, file);
  const Json j = parse_json(text, file);
  if (!j.is_object()) throw InputError(file, "", "found " + shown(j), "a measurements object (docs/measurements.md)");
  const JsonObject o(j, "", file);
  o.only({"schema", "backend", "created_by", "scenario_file", "scenario", "host", "cluster", "warmup", "repeats", "ops",
          "collectives", "steps", "overlaps"});
  if (o.string("schema") != kMeasurementsSchema) {
    o.fail("schema", "found " + shown(o.raw("schema")), std::string("\"") + kMeasurementsSchema + "\"");
  }
  Measurements m;
  m.backend = o.choice("backend", {"cpu", "cuda"});
  m.created_by = o.string("created_by", std::string());
  m.scenario_file = o.string("scenario_file", std::string());
  m.scenario = o.raw("scenario");
  if (!m.scenario.is_object()) o.fail("scenario", "found " + shown(m.scenario), "the scenario object as run");
  {
    const JsonObject h = o.object("host");
    h.only({"hostname", "cpu", "cores", "ranks", "nodes", "processes", "gpus", "versions"});
    m.host.hostname = h.string("hostname", std::string());
    m.host.cpu = h.string("cpu", std::string());
    m.host.cores = static_cast<int>(h.integer("cores", 0, 0, 1 << 20));
    m.host.ranks = static_cast<int>(h.integer("ranks", std::nullopt, 1, 1 << 24));
    m.host.nodes = static_cast<int>(h.integer("nodes", 1, 1, 1 << 20));
    m.host.processes = static_cast<int>(h.integer("processes", 1, 1, 1 << 24));
    if (h.has("gpus")) m.host.gpus = h.raw("gpus");
    if (h.has("versions")) m.host.versions = h.raw("versions");
    if (!m.host.gpus.is_array()) h.fail("gpus", "found " + shown(m.host.gpus), "an array");
    if (!m.host.versions.is_object()) h.fail("versions", "found " + shown(m.host.versions), "an object");
  }
  m.cluster = o.has("cluster") ? o.raw("cluster") : Json::object();
  if (!m.cluster.is_object()) o.fail("cluster", "found " + shown(m.cluster), "a cluster object (/cluster/file form)");
  m.warmup = static_cast<int>(o.integer("warmup", 0, 0, 1'000'000));
  m.repeats = static_cast<int>(o.integer("repeats", std::nullopt, 1, 1'000'000'000));
  if (o.has("ops")) each_element(o, "ops", file, [&](const JsonObject& e) { m.ops.push_back(parse_op(e)); });
  if (o.has("collectives")) {
    each_element(o, "collectives", file,
                 [&](const JsonObject& e) { m.collectives.push_back(parse_collective(e, file)); });
  }
  if (o.has("steps"))
    each_element(o, "steps", file, [&](const JsonObject& e) { m.steps.push_back(parse_step(e, file)); });
  if (o.has("overlaps"))
    each_element(o, "overlaps", file, [&](const JsonObject& e) { m.overlaps.push_back(parse_overlap(e)); });
  return m;
}

Measurements load_measurements(const std::string& path) {
  return parse_measurements(read_input_file(path, path, "", "a measurements file written by ctwin realrun"), path);
}

std::string measurements_to_json(const Measurements& m) {
  using OJ = nlohmann::ordered_json;
  OJ j;
  j["schema"] = kMeasurementsSchema;
  j["backend"] = m.backend;
  j["created_by"] = m.created_by;
  j["scenario_file"] = m.scenario_file;
  j["scenario"] = as_ordered(m.scenario);
  j["host"] = {{"hostname", m.host.hostname},     {"cpu", m.host.cpu},
               {"cores", m.host.cores},           {"ranks", m.host.ranks},
               {"nodes", m.host.nodes},           {"processes", m.host.processes},
               {"gpus", as_ordered(m.host.gpus)}, {"versions", as_ordered(m.host.versions)}};
  j["cluster"] = as_ordered(m.cluster);
  j["warmup"] = m.warmup;
  j["repeats"] = m.repeats;
  OJ ops = OJ::array();
  for (const auto& o : m.ops) {
    OJ e = op_json(o.op);
    e["origin"] = o.origin;
    e["name"] = o.name;
    e["phase"] = o.phase;
    e["rank"] = o.rank;
    e["stats"] = stats_json(o.stats);
    ops.push_back(std::move(e));
  }
  j["ops"] = std::move(ops);
  OJ colls = OJ::array();
  for (const auto& c : m.collectives) {
    colls.push_back({{"op", to_string(c.op)},
                     {"group", c.group},
                     {"ranks", c.ranks},
                     {"algorithm", c.algorithm},
                     {"protocol", c.protocol},
                     {"bytes", c.bytes},
                     {"stats", stats_json(c.stats)},
                     {"algbw_gbyte_per_s", c.algbw_gbyte_per_s},
                     {"busbw_gbyte_per_s", c.busbw_gbyte_per_s}});
  }
  j["collectives"] = std::move(colls);
  OJ steps = OJ::array();
  for (const auto& s : m.steps) {
    OJ e;
    e["kind"] = s.kind;
    e["layout"] = as_ordered(s.layout);
    if (s.shape) write_iteration_shape(e, *s.shape);
    e["stats"] = stats_json(s.stats);
    e["per_rank_median_s"] = s.per_rank_median_s;
    steps.push_back(std::move(e));
  }
  j["steps"] = std::move(steps);
  if (!m.overlaps.empty()) {  // absent in files without them, so older files stay byte-identical
    OJ overlaps = OJ::array();
    for (const auto& v : m.overlaps) {
      overlaps.push_back({{"op", op_json(v.op)},
                          {"collective", to_string(v.collective)},
                          {"group", v.group},
                          {"bytes", v.bytes},
                          {"calls", v.calls},
                          {"alone", stats_json(v.alone)},
                          {"overlapped", stats_json(v.overlapped)}});
    }
    j["overlaps"] = std::move(overlaps);
  }
  return j.dump(1, ' ', false, kReplaceInvalid) + "\n";
}

void write_measurements(const Measurements& m, const std::string& path, bool replace, const std::string& flag) {
  const std::string text = measurements_to_json(m);
  write_file_atomically(path, replace, flag, [&](std::ostream& os) { os << text; });
}

}  // namespace ctwin::calibrate
