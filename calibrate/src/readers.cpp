#include "calibrate/readers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace ctwin::calibrate {

namespace {

struct PerfBinary {
  const char* name;
  CollectiveOp op;
};
// Longest names first: "reduce_perf" is inside "all_reduce_perf".
constexpr PerfBinary kBinaries[] = {
    {"reduce_scatter", CollectiveOp::reduce_scatter}, {"all_reduce", CollectiveOp::all_reduce},
    {"all_gather", CollectiveOp::all_gather},         {"alltoall", CollectiveOp::all_to_all},
    {"all_to_all", CollectiveOp::all_to_all},         {"sendrecv", CollectiveOp::send_recv},
    {"broadcast", CollectiveOp::broadcast},           {"reduce", CollectiveOp::reduce},
};

std::optional<CollectiveOp> op_in(const std::string& text, const char* suffix) {
  for (const PerfBinary& b : kBinaries) {
    if (text.find(std::string(b.name) + suffix) != std::string::npos) return b.op;
  }
  return std::nullopt;
}

bool number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out);
}

Stats single(double s, int repeats) {
  Stats st;
  st.median_s = st.min_s = st.max_s = st.p10_s = st.p90_s = s;
  st.repeats = std::max(1, repeats);
  return st;
}

}  // namespace

Measurements parse_nccl_tests(const std::string& text, const std::string& file) {
  Measurements m;
  m.backend = "cuda";
  m.created_by = "nccl-tests";
  m.scenario_file = file;
  std::optional<CollectiveOp> op = op_in(text, "_perf");
  if (!op) {
    const std::string base = std::filesystem::path(file).filename().string();
    op = op_in(base, "");
  }
  if (!op) {
    throw InputError(file, "", "cannot tell which collective this nccl-tests output measured",
                     "the binary's name in the text (e.g. all_reduce_perf) or in the file's name (all_reduce.txt)");
  }
  std::istringstream in(text);
  std::string line;
  std::set<std::string> hosts;
  int rank_lines = 0, ngpus = 0, iters = 1, lineno = 0;
  std::vector<std::pair<double, double>> rows;  // (bytes, seconds) out-of-place then in-place
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    if (tok[0] == "#" || tok[0][0] == '#') {
      // "#  Rank  0 Group  0 Pid 1234 on node01 device  0 [0x18] NVIDIA H100 80GB HBM3"
      const auto on = std::find(tok.begin(), tok.end(), "on");
      if (tok.size() > 2 && tok[1] == "Rank" && on != tok.end() && on + 1 != tok.end()) {
        ++rank_lines;
        hosts.insert(*(on + 1));
        const auto bracket = std::find_if(on, tok.end(), [](const std::string& t) { return t.front() == '['; });
        if (bracket != tok.end() && m.host.gpus.size() < 1024) {
          std::string name;
          for (auto it = bracket + 1; it != tok.end(); ++it) name += (name.empty() ? "" : " ") + *it;
          m.host.gpus.push_back({{"name", name}, {"uuid", ""}, {"driver", ""}});
        }
      }
      for (std::size_t i = 0; i + 1 < tok.size(); ++i) {
        double v = 0;
        // Counts beyond these are no real run's (and would not fit an int).
        const auto count = [&](double lo, double hi) {
          if (v < lo || v > hi || v != std::floor(v)) {
            throw InputError(file, "line " + std::to_string(lineno), "found " + tok[i] + " " + tok[i + 1],
                             "an integer from " + std::to_string(static_cast<long long>(lo)) + " to " +
                                 std::to_string(static_cast<long long>(hi)));
          }
          return static_cast<int>(v);
        };
        if (tok[i] == "nGpus" && number(tok[i + 1], v)) ngpus = count(0, 1 << 20);
        // "warmup iters: 5 iters: 20 agg iters: 1": the timed iterations.
        const bool timed = i == 0 || (tok[i - 1] != "warmup" && tok[i - 1] != "agg");
        if (tok[i] == "iters:" && timed && number(tok[i + 1], v)) iters = count(1, 1e9);
      }
      continue;
    }
    double size = 0;
    if (!number(tok[0], size) || tok.size() < 10) continue;
    // The row ends with out-of-place (time algbw busbw #wrong) and in-place (the same).
    const std::size_t n = tok.size();
    double oop = 0, ip = 0;
    if (!number(tok[n - 8], oop) || !(oop > 0)) {
      throw InputError(file, "line " + std::to_string(lineno), "found \"" + line + "\"",
                       "a table row: size count type [redop root] then time algbw busbw #wrong, out-of-place and "
                       "in-place");
    }
    rows.emplace_back(size, oop * 1e-6);
    if (number(tok[n - 4], ip) && ip > 0) rows.emplace_back(size, ip * 1e-6);
  }
  if (rows.empty()) {
    throw InputError(file, "", "no nccl-tests table rows",
                     "lines \"size count type redop root time algbw busbw #wrong time algbw busbw #wrong\"");
  }
  const int ranks = rank_lines > 0 ? rank_lines : std::max(ngpus, 1);
  m.host.ranks = ranks;
  m.host.nodes = std::max<int>(1, static_cast<int>(hosts.size()));
  if (!hosts.empty()) m.host.hostname = *hosts.begin();
  m.repeats = iters;
  for (const auto& [bytes, s] : rows) {
    CollectiveMeasurement c;
    c.op = *op;
    c.group = "world";
    for (int r = 0; r < ranks; ++r) c.ranks.push_back(r);
    c.bytes = bytes;
    c.stats = single(s, iters);
    c.algbw_gbyte_per_s = bytes / s / 1e9;
    c.busbw_gbyte_per_s = c.algbw_gbyte_per_s * bus_factor(*op, ranks);
    m.collectives.push_back(c);
  }
  return m;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has(const std::string& s, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return s.find(w) != std::string::npos; });
}

// Element size and dtype from a PyTorch type name ("c10::BFloat16", "float", "Float", "bf16").
std::pair<double, Dtype> torch_type(const std::string& t) {
  const std::string s = lower(t);
  if (has(s, {"bfloat16", "bf16"})) return {2, Dtype::bf16};
  if (has(s, {"half", "fp16", "float16"})) return {2, Dtype::fp16};
  if (has(s, {"float8", "fp8", "e4m3", "e5m2"})) return {1, Dtype::fp8};
  return {4, Dtype::fp32};
}

std::optional<CollectiveOp> nccl_op(const std::string& name) {
  const std::string s = lower(name);
  if (has(s, {"reducescatter", "reduce_scatter"})) return CollectiveOp::reduce_scatter;
  if (has(s, {"allreduce", "all_reduce"})) return CollectiveOp::all_reduce;
  if (has(s, {"allgather", "all_gather", "_allgather"})) return CollectiveOp::all_gather;
  if (has(s, {"alltoall", "all_to_all"})) return CollectiveOp::all_to_all;
  if (has(s, {"sendrecv", "send", "recv"})) return CollectiveOp::send_recv;
  if (has(s, {"broadcast"})) return CollectiveOp::broadcast;
  if (has(s, {"reduce"})) return CollectiveOp::reduce;
  return std::nullopt;
}

const Json* arg(const Json& e, const char* key) {
  if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains(key)) return nullptr;
  return &e["args"][key];
}

double num_arg(const Json& e, const char* key) {
  const Json* a = arg(e, key);
  if (a == nullptr) return 0;
  if (a->is_number()) return a->get<double>();
  double v = 0;
  if (a->is_string() && number(a->get<std::string>(), v)) return v;
  return 0;
}

std::vector<double> dims(const Json& d) {
  std::vector<double> v;
  if (!d.is_array()) return v;
  for (const Json& x : d) {
    if (!x.is_number()) return {};
    v.push_back(x.get<double>());
  }
  return v;
}

// A GEMM's shape from the CPU op that launched it.
bool gemm_shape(const Json& cpu, OpCost& op) {
  const Json* in = arg(cpu, "Input Dims");
  if (in == nullptr || !in->is_array()) return false;
  const std::string name = cpu.value("name", "");
  std::vector<std::vector<double>> d;
  for (const Json& x : *in) d.push_back(dims(x));
  auto prod_lead = [](const std::vector<double>& v) {
    double p = 1;
    for (std::size_t i = 0; i + 1 < v.size(); ++i) p *= v[i];
    return p;
  };
  double m = 0, n = 0, k = 0;
  if ((name == "aten::mm" || name == "aten::matmul") && d.size() >= 2 && d[0].size() == 2 && d[1].size() == 2) {
    m = d[0][0], k = d[0][1], n = d[1][1];
  } else if (name == "aten::addmm" && d.size() >= 3 && d[1].size() == 2 && d[2].size() == 2) {
    m = d[1][0], k = d[1][1], n = d[2][1];
  } else if (name == "aten::bmm" && d.size() >= 2 && d[0].size() == 3 && d[1].size() == 3) {
    m = d[0][0] * d[0][1], k = d[0][2], n = d[1][2];
  } else if (name == "aten::linear" && d.size() >= 2 && d[0].size() >= 2 && d[1].size() == 2) {
    m = prod_lead(d[0]), k = d[0].back(), n = d[1][0];
  } else {
    return false;
  }
  double elt = 2;
  Dtype dt = Dtype::bf16;
  if (const Json* types = arg(cpu, "Input type");
      types != nullptr && types->is_array() && !types->empty() && (*types)[0].is_string()) {
    std::tie(elt, dt) = torch_type((*types)[0].get<std::string>());
  }
  op.m = m, op.n = n, op.k = k;
  op.flops = 2 * m * n * k;
  op.bytes = (m * k + k * n + m * n) * elt;
  op.dtype = dt;
  return true;
}

}  // namespace

Measurements parse_kineto_trace(const std::string& text, const std::string& file) {
  check_json_text(text, file);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw InputError(file, "", std::string("not valid JSON: ") + e.what(), "a Chrome trace from the PyTorch profiler");
  }
  if (!root.is_object() || !root.contains("traceEvents") || !root["traceEvents"].is_array()) {
    throw InputError(file, "/traceEvents", "missing or not an array", "a Chrome trace with a traceEvents array");
  }
  Measurements m;
  m.backend = "cuda";
  m.created_by = "PyTorch profiler (Kineto)";
  m.scenario_file = file;
  int rank = 0;
  if (root.contains("distributedInfo") && root["distributedInfo"].is_object()) {
    const Json& d = root["distributedInfo"];
    if (d.contains("rank") && d["rank"].is_number_integer()) rank = d["rank"].get<int>();
    if (d.contains("world_size") && d["world_size"].is_number_integer()) m.host.ranks = d["world_size"].get<int>();
  }
  const Json& events = root["traceEvents"];
  // CPU ops by External id, for the shapes of the kernels they launch.
  std::map<long long, const Json*> cpu_ops;
  for (const Json& e : events) {
    if (!e.is_object() || e.value("cat", "") != "cpu_op") continue;
    const Json* id = arg(e, "External id");
    if (id != nullptr && id->is_number_integer()) cpu_ops[id->get<long long>()] = &e;
  }
  struct Group {
    OpMeasurement op;
    std::vector<double> samples;
  };
  std::map<std::tuple<std::string, double, double, double>, Group> kernels;
  std::map<std::tuple<int, int, double>, std::pair<CollectiveMeasurement, std::vector<double>>> colls;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& e = events[i];
    if (!e.is_object() || e.value("cat", "") != "kernel" || e.value("ph", "") != "X") continue;
    const std::string path = "/traceEvents/" + std::to_string(i);
    if (!e.contains("name") || !e["name"].is_string() || !e.contains("dur") || !e["dur"].is_number()) {
      throw InputError(file, path, "a kernel event without a string name and a numeric dur",
                       "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": ..., \"dur\": microseconds}");
    }
    const std::string name = e["name"].get<std::string>();
    const double dur_s = e["dur"].get<double>() * 1e-6;
    if (!(dur_s > 0)) continue;
    const std::string s = lower(name);
    const Json* cpu = nullptr;
    if (const Json* id = arg(e, "External id"); id != nullptr && id->is_number_integer()) {
      const auto it = cpu_ops.find(id->get<long long>());
      if (it != cpu_ops.end()) cpu = it->second;
    }
    if (s.find("nccl") != std::string::npos) {
      const auto op = nccl_op(name);
      // The collective's size: on the kernel, else on the CPU op (record_param_comms).
      const Json& src = arg(e, "In msg nelems") != nullptr || cpu == nullptr ? e : *cpu;
      const double in = num_arg(src, "In msg nelems"), out = num_arg(src, "Out msg nelems");
      const Json* dt = arg(src, "dtype");
      const double elt = dt != nullptr && dt->is_string() ? torch_type(dt->get<std::string>()).first : 4;
      const double group_size = num_arg(src, "Group size");
      // No size or group (or a group no job has: past 2^20 ranks): not a measurable collective.
      if (!op || !(in > 0) || !(group_size >= 1 && group_size <= (1 << 20))) continue;
      const int group = static_cast<int>(group_size);
      const double bytes = (*op == CollectiveOp::all_gather ? std::max(out, in * group) : in) * elt;
      auto& c = colls[{static_cast<int>(*op), group, bytes}];
      c.first.op = *op;
      c.first.group = "world";
      c.first.ranks.clear();
      for (int r = 0; r < group; ++r) c.first.ranks.push_back(r);
      c.first.bytes = bytes;
      c.second.push_back(dur_s);
      continue;
    }
    OpCost op;
    if (has(s, {"gemm", "cutlass", "sm90_xmma"})) {
      op.kind = OpKind::gemm;
      if (cpu == nullptr || !gemm_shape(*cpu, op)) op.dtype = Dtype::bf16;
    } else if (has(s, {"flash", "fmha"})) {
      op.kind = OpKind::attention;
      op.dtype = Dtype::bf16;
    } else {
      op.kind = OpKind::elementwise;
      op.dtype = Dtype::bf16;
    }
    auto& g = kernels[{name, op.m, op.n, op.k}];
    g.op.op = op;
    g.op.name = name;
    g.op.origin = "step";
    g.op.rank = rank;
    g.samples.push_back(dur_s);
  }
  for (auto& [key, g] : kernels) {
    g.op.stats = stats_of(g.samples);
    m.ops.push_back(g.op);
  }
  for (auto& [key, c] : colls) {
    c.first.stats = stats_of(c.second);
    c.first.algbw_gbyte_per_s = c.first.bytes / c.first.stats.median_s / 1e9;
    c.first.busbw_gbyte_per_s =
        c.first.algbw_gbyte_per_s * bus_factor(c.first.op, static_cast<int>(c.first.ranks.size()));
    m.collectives.push_back(c.first);
  }
  if (m.host.ranks == 0) m.host.ranks = 1;
  return m;
}

Measurements load_any_measurements(const std::string& path) {
  const std::string text = read_input_file(path, path, "", "a measurements file, nccl-tests output or a Kineto trace");
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    if (text.find("\"traceEvents\"") != std::string::npos && text.find("\"schema\"") == std::string::npos)
      return parse_kineto_trace(text, path);
    return parse_measurements(text, path);
  }
  return parse_nccl_tests(text, path);
}

}  // namespace ctwin::calibrate
