#include "workloads/profile.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace ctwin {

std::string_view embedded_profile(std::string_view name);  // generated: catalog/profiles/*.json

namespace {

using Json = nlohmann::json;

constexpr const char* kTuning = "NCCL src/graph/tuning.cc (2.23 and later)";

}  // namespace

const std::vector<ProfileKey>& profile_keys() {
  // clang-format off
  static const std::vector<ProfileKey> keys{
      {"/compute/gemm_efficiency", 1, 0.01, 1, "fraction",
       "Fraction of the dense tensor peak a large GEMM of the step sustains",
       "fitted per GPU generation to published end-to-end runs (docs/validation.md)",
       [](Profile& p) { return &p.compute.gemm_efficiency; }},
      {"/compute/fp8_gemm_efficiency", 1, 0.01, 1, "fraction",
       "Fraction of the dense FP8 peak a large FP8 GEMM with fast accumulation sustains",
       "serving FP8 validation on H100/H200 (docs/fidelity-fp8.md): the BF16 share",
       [](Profile& p) { return &p.compute.fp8_gemm_efficiency; }},
      {"/compute/fp8_split_accumulator_efficiency", 1, 0.01, 1, "fraction",
       "An FP8 GEMM with split (FP32-promoted) accumulation over one with fast accumulation: Transformer "
       "Engine's dgrad and wgrad GEMMs on Hopper",
       "fitted to published H100 FP8 training runs (docs/fidelity-fp8.md)",
       [](Profile& p) { return &p.compute.fp8_split_accumulator_efficiency; }},
      {"/compute/attention_ratio", 1, 0.01, 2, "fraction",
       "Flash attention's efficiency over the GEMM efficiency",
       "FlashAttention-2 (Dao 2023): 50-73% of A100 peak forward against ~80% for cuBLAS GEMMs",
       [](Profile& p) { return &p.compute.attention_ratio; }},
      {"/compute/attention_ratio_flash2", 1, 0.01, 2, "fraction",
       "FlashAttention-2's efficiency (forward and backward) over the GEMM efficiency: /training/attention \"flash2\"",
       "FlashAttention-2 (Dao 2023): the A100 reference of attention_ratio; up to 335 TFLOP/s on H100",
       [](Profile& p) { return &p.compute.attention_ratio_flash2; }},
      {"/compute/attention_ratio_triton", 1, 0.01, 2, "fraction",
       "Triton flash attention's efficiency (MPT's attn_impl triton) over the GEMM efficiency: /training/attention "
       "\"triton\"",
       "fitted to LLM Foundry's long-sequence rows (docs/validation.md)",
       [](Profile& p) { return &p.compute.attention_ratio_triton; }},
      {"/compute/hbm_efficiency", 1, 0.01, 1, "fraction",
       "Fraction of HBM bandwidth a streaming kernel sustains", "assumed (STREAM-like kernels on HBM)",
       [](Profile& p) { return &p.compute.hbm_efficiency; }},
      {"/compute/kernel_launch_us", 1, 0, 1000, "us", "Fixed cost per kernel (launch and tail)", "assumed",
       [](Profile& p) { return &p.compute.kernel_launch_us; }},
      {"/compute/gemm_knee", 1, 0, 1e6, "elements",
       "A GEMM dimension d scales efficiency by d / (d + knee): small shapes fill fewer SMs", "assumed",
       [](Profile& p) { return &p.compute.gemm_knee; }},
      {"/compute/overlap_slowdown", 1, 0, 10, "fraction",
       "A kernel that starts while a collective runs on its GPU takes (1 + this) as long; the default of "
       "/training/overlap_slowdown",
       "0 (no interference) until ctwin calibrate fits it from realrun's overlap measurements",
       [](Profile& p) { return &p.compute.overlap_slowdown; }},
      {"/compute/grouped_gemm_efficiency", 1, 0.01, 1, "fraction",
       "A grouped (MoE expert) GEMM over one GEMM of the same per-group shape",
       "fitted across the two MoE validation cases (docs/validation.md)",
       [](Profile& p) { return &p.compute.grouped_gemm_efficiency; }},
      {"/links/nvlink_efficiency", 1, 0.01, 1, "fraction", "NCCL's effective NVLink rate over line rate; 0: no NVLink",
       "NCCL src/graph/topo.h: 20.0 GB/s per link for SM80, 20.6 for SM90, 40.1 for SM100 against 25, 25, 50",
       [](Profile& p) { return &p.links.nvlink_efficiency; }, true},
      {"/links/nvls_efficiency", 1, 0.01, 2, "fraction", "NVLS all-reduce algbw over the NVLink line rate on 8 GPUs (n GPUs: times 1.125 / (1 + 1/n)); 0: no NVLS",
       "NCCL's maintainer, nccl-tests #212: ~275 GB/s algbw of 450 on 8 H100",
       [](Profile& p) { return &p.links.nvls_efficiency; }, true},
      {"/links/pcie_efficiency", 1, 0.01, 1, "fraction", "NCCL's PCIe rate over line rate",
       "NCCL src/graph/topo.h PCI_BW: 12 of 16 GB/s for Gen3 x16", [](Profile& p) { return &p.links.pcie_efficiency; }},
      {"/links/nic_efficiency", 1, 0.01, 1, "fraction", "NCCL's network transport over NIC line rate",
       "NVIDIA's NCCL team, nccl-tests #290: 46-48 of 50 GB/s on NDR; nccl #1048: 24 of 25 on HDR",
       [](Profile& p) { return &p.links.nic_efficiency; }},
      {"/links/nvlink_latency_us", 1, 0, 1e6, "us", "LL hop latency over NVLink", "NCCL tuning.cc hwLat",
       [](Profile& p) { return &p.links.nvlink_latency_us; }},
      {"/links/pcie_latency_us", 1, 0, 1e6, "us", "LL hop latency over PCIe", "NCCL tuning.cc hwLat",
       [](Profile& p) { return &p.links.pcie_latency_us; }},
      {"/links/net_latency_us", 1, 0, 1e6, "us", "LL hop latency over the network", "NCCL tuning.cc hwLat",
       [](Profile& p) { return &p.links.net_latency_us; }},
      {"/nccl/base_ring_us", 3, 0, 1e6, "us", "Ring base latency per call [LL, LL128, Simple]", kTuning,
       [](Profile& p) { return p.nccl.base_ring_us.data(); }},
      {"/nccl/base_tree_us", 3, 0, 1e6, "us", "Tree base latency per call [LL, LL128, Simple]", kTuning,
       [](Profile& p) { return p.nccl.base_tree_us.data(); }},
      {"/nccl/ring_nvlink_extra_us", 3, 0, 1e6, "us", "Ring NVLink hop latency over its LL figure", kTuning,
       [](Profile& p) { return p.nccl.ring_nvlink_extra_us.data(); }},
      {"/nccl/ring_pcie_extra_us", 3, 0, 1e6, "us", "Ring PCIe hop latency over its LL figure", kTuning,
       [](Profile& p) { return p.nccl.ring_pcie_extra_us.data(); }},
      {"/nccl/ring_net_extra_us", 3, 0, 1e6, "us", "Ring network hop latency over its LL figure", kTuning,
       [](Profile& p) { return p.nccl.ring_net_extra_us.data(); }},
      {"/nccl/tree_nvlink_extra_us", 3, 0, 1e6, "us", "Tree NVLink hop latency over its LL figure", kTuning,
       [](Profile& p) { return p.nccl.tree_nvlink_extra_us.data(); }},
      {"/nccl/tree_net_extra_us", 3, 0, 1e6, "us", "Tree network hop latency over the link's LL figure", kTuning,
       [](Profile& p) { return p.nccl.tree_net_extra_us.data(); }},
      {"/nccl/nvls_latency_us", 1, 0, 1e6, "us", "NVLS latency (hwLat NVLS, Simple)", kTuning,
       [](Profile& p) { return &p.nccl.nvls_latency_us; }},
      {"/nccl/nvls_tree_latency_us", 1, 0, 1e6, "us", "NVLSTree latency inside the node (hwLat NVLINK NVLSTree, Simple)",
       kTuning, [](Profile& p) { return &p.nccl.nvls_tree_latency_us; }},
      {"/nccl/nvls_tree_net_extra_us", 1, 0, 1e6, "us",
       "NVLSTree network hop over the link's LL hop (hwLat NET NVLSTree, Simple, 20.9 us, less 2.7)", kTuning,
       [](Profile& p) { return &p.nccl.nvls_tree_net_extra_us; }},
      {"/nccl/collnet_latency_us", 1, 0, 1e6, "us", "CollNet Direct latency: NVLink + network hop", kTuning,
       [](Profile& p) { return &p.nccl.collnet_latency_us; }},
      {"/nccl/simple_net_overhead_factor", 1, 0, 100, "factor",
       "Multi-node ring hop floor: this many times the host's net overhead with Simple", kTuning,
       [](Profile& p) { return &p.nccl.simple_net_overhead_factor; }},
      {"/nccl/ring_ll_efficiency", 1, 0.01, 1, "fraction", "Ring LL bandwidth share on reductions and across nodes",
       kTuning, [](Profile& p) { return &p.nccl.ring_ll_efficiency; }},
      {"/nccl/ring_ll_copy_efficiency", 1, 0.01, 1, "fraction", "Ring LL bandwidth share on single-node copies",
       kTuning, [](Profile& p) { return &p.nccl.ring_ll_copy_efficiency; }},
      {"/nccl/ring_ll128_efficiency", 1, 0.01, 1, "fraction", "Ring LL128 bandwidth share", kTuning,
       [](Profile& p) { return &p.nccl.ring_ll128_efficiency; }},
      {"/nccl/tree_efficiency", 1, 0.01, 1, "fraction", "Tree bandwidth derating (every protocol)", kTuning,
       [](Profile& p) { return &p.nccl.tree_efficiency; }},
      {"/nccl/tree_ll_efficiency", 1, 0.01, 1, "fraction", "Tree LL bandwidth share", kTuning,
       [](Profile& p) { return &p.nccl.tree_ll_efficiency; }},
      {"/nccl/tree_ll128_efficiency", 1, 0.01, 1, "fraction", "Tree LL128 bandwidth share across nodes", kTuning,
       [](Profile& p) { return &p.nccl.tree_ll128_efficiency; }},
      {"/nccl/tree_ll128_intra_efficiency", 1, 0.01, 1, "fraction", "Tree LL128 bandwidth share inside one node",
       kTuning, [](Profile& p) { return &p.nccl.tree_ll128_intra_efficiency; }},
      {"/serving/iteration_overhead_eager_us", 1, 0, 1e6, "us",
       "Host time per serving iteration with kernels launched one by one (enforce_eager)",
       "assumed: vLLM v1 scheduler, input preparation and launch of ~10 kernels a layer from Python",
       [](Profile& p) { return &p.serving.iteration_overhead_eager_us; }},
      {"/serving/iteration_overhead_graph_us", 1, 0, 1e6, "us",
       "Host time per serving iteration replayed as a captured CUDA graph",
       "assumed: vLLM v1 scheduler and input preparation, one graph launch",
       [](Profile& p) { return &p.serving.iteration_overhead_graph_us; }},
      {"/serving/per_sequence_overhead_us", 1, 0, 1e6, "us",
       "Host time per sequence in a serving iteration (inputs, sampling, detokenisation)",
       "fit across the serving validation cases (docs/validation.md)",
       [](Profile& p) { return &p.serving.per_sequence_overhead_us; }},
      {"/serving/request_overhead_us", 1, 0, 1e6, "us",
       "Host time per request before the scheduler sees it (API server, tokenization, request setup); in TTFT and end-to-end latency",
       "fit on the 128-token batch-1 points of TRT-LLM v0.5's low-latency table (docs/validation.md)",
       [](Profile& p) { return &p.serving.request_overhead_us; }},
      {"/serving/weight_read_efficiency", 1, 0.05, 1, "fraction",
       "Share of the streaming HBM rate a serving GEMM reaches reading its weights (small-batch decode)",
       "fit across the serving validation cases (docs/validation.md)",
       [](Profile& p) { return &p.serving.weight_read_efficiency; }},
      {"/serving/ngram_lookup_us", 1, 0, 1e6, "us", "N-gram proposer's lookup per decode sequence per step",
       "assumed (vLLM's NgramProposer runs on the CPU)", [](Profile& p) { return &p.serving.ngram_lookup_us; }},
      {"/serving/non_torch_gib", 1, 0, 1e4, "GiB", "GPU memory outside torch's allocator (CUDA context)",
       "vLLM issue #10517 log: non_torch_memory=0.35GiB (Llama-3.1-8B, one GPU)",
       [](Profile& p) { return &p.serving.non_torch_gib; }},
      {"/serving/nccl_gib", 1, 0, 1e4, "GiB", "Extra non-torch memory with TP or PP (NCCL buffers and streams)",
       "assumed", [](Profile& p) { return &p.serving.nccl_gib; }},
  };
  // clang-format on
  return keys;
}

namespace {

std::string found(const Json& j) { return std::string(j.type_name()) + " " + shown(j); }

double number_at(const Json& j, const std::string& file, const std::string& path, const ProfileKey& k) {
  if (!j.is_number()) throw InputError(file, path, "found " + found(j), "a number");
  const double v = j.get<double>();
  if (!(v >= k.min && v <= k.max) && !(k.zero_is_none && v == 0)) {
    std::ostringstream e;
    e << (k.zero_is_none ? "0 (none) or a number from " : "a number from ") << k.min << " to " << k.max << " ("
      << k.unit << ")";
    throw InputError(file, path, "found " + found(j), e.str());
  }
  return v;
}

constexpr OpKind kTableOpKinds[] = {OpKind::gemm, OpKind::grouped_gemm, OpKind::attention, OpKind::elementwise,
                                    OpKind::norm, OpKind::embedding,    OpKind::loss,      OpKind::optimizer};
constexpr CollectiveOp kTableCollectiveOps[] = {
    CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
    CollectiveOp::reduce,     CollectiveOp::all_to_all, CollectiveOp::send_recv};

template <class E, std::size_t N>
E table_enum(const JsonObject& o, const std::string& key, const E (&values)[N]) {
  std::vector<std::string> names;
  for (E v : values) names.emplace_back(to_string(v));
  const std::string s = o.choice(key, names);
  for (E v : values) {
    if (s == to_string(v)) return v;
  }
  return values[0];  // unreachable: choice() accepted s
}

}  // namespace

OpCost read_op_cost(const JsonObject& o, std::optional<double> sizes_default) {
  OpCost c;
  c.kind = table_enum(o, "kind", kTableOpKinds);
  const std::string dt =
      o.choice("dtype", std::vector<std::string>(dtype_names.names.begin(), dtype_names.names.end()));
  c.dtype = *dtype_names.parse(dt);
  c.m = o.number("m", 0.0, 0);
  c.n = o.number("n", 0.0, 0);
  c.k = o.number("k", 0.0, 0);
  c.groups = o.number("groups", 1.0, 1);
  c.split_accumulator = o.boolean("split_accumulator", false);
  c.flops = o.number("flops", sizes_default, 0);
  c.bytes = o.number("bytes", sizes_default, 0);
  c.query_tokens = o.number("query_tokens", 0.0, 0);
  c.attended_pairs = o.number("attended_pairs", 0.0, 0);
  c.kv_tokens = o.number("kv_tokens", 0.0, 0);
  return c;
}

namespace {

// /tables (docs/profiles.md, "Measured tables").
MeasuredTables parse_tables(const Json& j, const std::string& file) {
  if (!j.is_object()) throw InputError(file, "/tables", "found " + found(j), "an object with collectives, kernels");
  const JsonObject t(j, "/tables", file);
  t.only({"collectives", "kernels"});
  MeasuredTables out;
  auto each = [&](const char* key, auto fn) {
    if (!t.has(key)) return;
    const Json& a = t.raw(key);
    if (!a.is_array()) t.fail(key, "found " + shown(a), "an array");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string path = t.child(key) + "/" + std::to_string(i);
      if (!a[i].is_object()) throw InputError(file, path, "found " + shown(a[i]), "an object");
      fn(JsonObject(a[i], path, file));
    }
  };
  each("collectives", [&](const JsonObject& o) {
    o.only({"op", "ranks", "scope", "points"});
    MeasuredCollective c;
    c.op = table_enum(o, "op", kTableCollectiveOps);
    c.ranks = static_cast<int>(o.integer("ranks", std::nullopt, 1, 1 << 24));
    c.inter_node = o.choice("scope", {"intra", "inter"}) == "inter";
    const Json& pts = o.raw("points");
    if (!pts.is_array() || pts.empty())
      o.fail("points", "found " + shown(pts), "a non-empty array of [bytes, seconds]");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const std::string path = o.child("points") + "/" + std::to_string(i);
      const Json& q = pts[i];
      if (!q.is_array() || q.size() != 2 || !q[0].is_number() || !q[1].is_number() || !(q[0].get<double>() > 0) ||
          !(q[1].get<double>() > 0)) {
        throw InputError(file, path, "found " + shown(q), "[bytes, seconds], both positive numbers");
      }
      if (!c.points.empty() && !(q[0].get<double>() > c.points.back().first))
        throw InputError(file, path, "found " + shown(q), "sizes in increasing order");
      c.points.emplace_back(q[0].get<double>(), q[1].get<double>());
    }
    out.collectives.push_back(std::move(c));
  });
  each("kernels", [&](const JsonObject& o) {
    o.only({"kind", "dtype", "m", "n", "k", "groups", "split_accumulator", "flops", "bytes", "query_tokens",
            "attended_pairs", "kv_tokens", "seconds"});
    MeasuredKernel k;
    k.op = read_op_cost(o, 0.0);
    k.seconds = o.number("seconds", std::nullopt, 0, 1e9, true);
    out.kernels.push_back(k);
  });
  return out;
}

Json tables_json(const MeasuredTables& t) {
  Json out = Json::object();
  Json cs = Json::array();
  for (const MeasuredCollective& c : t.collectives) {
    Json pts = Json::array();
    for (const auto& [b, s] : c.points) pts.push_back({b, s});
    cs.push_back(
        {{"op", to_string(c.op)}, {"ranks", c.ranks}, {"scope", c.inter_node ? "inter" : "intra"}, {"points", pts}});
  }
  Json ks = Json::array();
  for (const MeasuredKernel& k : t.kernels) {
    ks.push_back({{"kind", to_string(k.op.kind)},
                  {"dtype", to_string(k.op.dtype.value_or(Dtype::bf16))},
                  {"m", k.op.m},
                  {"n", k.op.n},
                  {"k", k.op.k},
                  {"groups", k.op.groups},
                  {"split_accumulator", k.op.split_accumulator},
                  {"flops", k.op.flops},
                  {"bytes", k.op.bytes},
                  {"query_tokens", k.op.query_tokens},
                  {"attended_pairs", k.op.attended_pairs},
                  {"kv_tokens", k.op.kv_tokens},
                  {"seconds", k.seconds}});
  }
  if (!cs.empty()) out["collectives"] = cs;
  if (!ks.empty()) out["kernels"] = ks;
  return out;
}

}  // namespace

Profile parse_profile(const std::string& text, const std::string& file) {
  Json root;
  check_json_text(text, file);
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw InputError(file, "", std::string("not valid JSON: ") + e.what(), "a JSON object");
  }
  if (!root.is_object()) throw InputError(file, "", "found " + found(root), "a JSON object");
  Profile p;
  // Unknown keys are errors: a misspelt coefficient would otherwise silently keep its default.
  static const std::vector<std::string> top{"name", "gpus",    "source", "compute", "links",
                                            "nccl", "serving", "tables", "_comment"};
  for (const auto& [key, v] : root.items()) {
    if (std::find(top.begin(), top.end(), key) == top.end())
      throw InputError(file, "/" + key, "unknown key",
                       "one of name, gpus, source, compute, links, nccl, serving, tables");
    if (key == "compute" || key == "links" || key == "nccl" || key == "serving") {
      if (!v.is_object()) throw InputError(file, "/" + key, "found " + found(v), "an object");
      for (const auto& [sub, unused] : v.items()) {
        const std::string ptr = "/" + key + "/" + sub;
        const auto& ks = profile_keys();
        if (std::none_of(ks.begin(), ks.end(), [&](const ProfileKey& k) { return ptr == k.pointer; }))
          throw InputError(file, ptr, "unknown key", "a key listed in docs/profiles.md");
      }
    }
  }
  auto str = [&](const char* key, std::string& out) {
    if (!root.contains(key)) return;
    if (!root[key].is_string()) throw InputError(file, std::string("/") + key, "found " + found(root[key]), "a string");
    out = root[key].get<std::string>();
  };
  str("name", p.name);
  str("source", p.source);
  if (root.contains("gpus")) {
    const Json& g = root["gpus"];
    if (!g.is_array()) throw InputError(file, "/gpus", "found " + found(g), "an array of GPU names");
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (!g[i].is_string()) throw InputError(file, "/gpus/" + std::to_string(i), "found " + found(g[i]), "a string");
      p.gpus.push_back(g[i].get<std::string>());
    }
  }
  if (root.contains("tables")) p.tables = parse_tables(root["tables"], file);
  for (const ProfileKey& k : profile_keys()) {
    const Json::json_pointer ptr(k.pointer);
    if (!root.contains(ptr)) continue;
    const Json* v = &root.at(ptr);
    std::string path = k.pointer;
    if (v->is_object()) {
      // {"value": x, "source": "..."}
      for (const auto& [sub, unused] : v->items()) {
        if (sub != "value" && sub != "source") throw InputError(file, path + "/" + sub, "unknown key", "value, source");
      }
      if (v->contains("source")) {
        if (!(*v)["source"].is_string())
          throw InputError(file, path + "/source", "found " + found((*v)["source"]), "a string");
        p.sources[k.pointer] = (*v)["source"].get<std::string>();
      }
      if (!v->contains("value")) throw InputError(file, path, "no \"value\"", "{\"value\": number, \"source\": text}");
      v = &(*v)["value"];
      path += "/value";
    }
    double* out = k.ref(p);
    if (k.count == 1) {
      *out = number_at(*v, file, path, k);
    } else {
      if (!v->is_array() || v->size() != static_cast<std::size_t>(k.count))
        throw InputError(file, path, "found " + found(*v), "an array of 3 numbers [LL, LL128, Simple]");
      for (int i = 0; i < k.count; ++i)
        out[i] = number_at((*v)[static_cast<std::size_t>(i)], file, path + "/" + std::to_string(i), k);
    }
  }
  return p;
}

Profile load_profile(const std::string& path) {
  return parse_profile(read_input_file(path, path, "", "a readable profile JSON file"), path);
}

std::string profile_to_json(const Profile& profile) {
  Profile p = profile;
  Json root = Json::object();
  root["name"] = p.name;
  root["gpus"] = p.gpus;
  root["source"] = p.source;
  for (const ProfileKey& k : profile_keys()) {
    const double* v = k.ref(p);
    Json value = k.count == 1 ? Json(v[0]) : Json(std::vector<double>(v, v + k.count));
    auto s = p.sources.find(k.pointer);
    if (s != p.sources.end()) value = Json{{"value", value}, {"source", s->second}};
    root[Json::json_pointer(k.pointer)] = value;
  }
  // Only a measured profile has tables; the shipped ones print as before.
  if (!p.tables.empty()) root["tables"] = tables_json(p.tables);
  return root.dump(2) + "\n";
}

std::vector<std::string> builtin_profile_names() { return {"A100", "B200", "H100", "H200", "L40S"}; }

Profile builtin_profile(const std::string& gpu_name) {
  static const std::vector<Profile> shipped = [] {
    std::vector<Profile> v;
    for (const std::string& n : builtin_profile_names()) {
      const std::string file = n + ".json";
      v.push_back(parse_profile(std::string(embedded_profile(file)), "workloads/catalog/profiles/" + file));
    }
    return v;
  }();
  for (const Profile& p : shipped) {
    if (p.name == gpu_name || std::find(p.gpus.begin(), p.gpus.end(), gpu_name) != p.gpus.end()) return p;
  }
  Profile d;
  d.name = "default";
  d.source = "built-in defaults (NCCL tuning.cc and the roofline's assumed coefficients)";
  return d;
}

ComputeModel compute_model(const Profile& p, const GpuSpec& gpu, Dtype dtype) {
  ComputeModel cm;
  cm.dtype = dtype;
  cm.peak_flops = gpu.peak_flops(dtype);
  // FP8 training runs only the linear layers' GEMMs in FP8; the rest at the 16-bit peak.
  cm.bf16_peak_flops = gpu.peak_flops(dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16);
  cm.fp8_peak_flops = gpu.peak_flops(Dtype::fp8);
  cm.fp8_gemm_efficiency = p.compute.fp8_gemm_efficiency;
  cm.fp8_split_accumulator_efficiency = p.compute.fp8_split_accumulator_efficiency;
  cm.hbm_bytes_per_s = gpu.hbm_gbyte_per_s * 1e9;
  cm.gemm_efficiency = p.compute.gemm_efficiency;
  cm.attention_efficiency = p.compute.gemm_efficiency * p.compute.attention_ratio;
  cm.flash2_attention_efficiency = p.compute.gemm_efficiency * p.compute.attention_ratio_flash2;
  cm.triton_attention_efficiency = p.compute.gemm_efficiency * p.compute.attention_ratio_triton;
  cm.hbm_efficiency = p.compute.hbm_efficiency;
  cm.launch_s = p.compute.kernel_launch_us * 1e-6;
  cm.gemm_knee = p.compute.gemm_knee;
  cm.grouped_gemm_efficiency = p.compute.grouped_gemm_efficiency;
  return cm;
}

CostModelPtr profile_cost_model(const Profile& p, const GpuSpec& gpu, Dtype dtype) {
  auto roofline = std::make_shared<RooflineCostModel>(compute_model(p, gpu, dtype));
  if (p.tables.kernels.empty()) return roofline;
  return std::make_shared<TableCostModel>(roofline, p.tables.kernels, dtype);
}

void apply_profile(const Profile& p, ClusterSpec& s) {
  s.nccl = p.nccl;
  s.nic_efficiency = p.links.nic_efficiency;
  s.inter_latency_us = p.links.net_latency_us;
  if (s.intra == IntraNodeFabric::nvswitch) {
    s.intra_efficiency = p.links.nvlink_efficiency;
    s.intra_latency_us = p.links.nvlink_latency_us;
    s.nvls_efficiency = p.links.nvls_efficiency;
  } else {
    s.intra_efficiency = p.links.pcie_efficiency;
    s.intra_latency_us = p.links.pcie_latency_us;
    s.nvls_efficiency = 0;
    // NVLink bridges and meshes beside PCIe (0 where the profile's GPU has no NVLink: the
    // generation's figure).
    if (s.intra != IntraNodeFabric::pcie) s.nvlink_pair_efficiency = p.links.nvlink_efficiency;
  }
}

}  // namespace ctwin
