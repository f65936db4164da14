#include "scenario.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catalog_access.hpp"
#include "json_reader.hpp"
#include "sim/error.hpp"

namespace ctwin {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open the file", "a readable scenario JSON file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json parse_json(const std::string& text, const std::string& file) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // nlohmann's message starts with its own "[json.exception.parse_error.101] parse error at
    // line 3, column 7: "; keep the part after the location, and give ours.
    std::string what = e.what();
    auto colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    const std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    throw InputError(file, "", "malformed JSON at " + line_column(text, byte) + ": " + detail, "valid JSON");
  }
}

std::string list_of(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + std::string("\"") + n + "\"";
  return s;
}

// ------------------------------------------------------------------ catalogs

GpuSpec parse_gpu(const JsonObject& o, const std::string& name) {
  o.only({"bf16_tflops", "fp16_tflops", "fp8_tflops", "tf32_tflops", "hbm_bytes", "hbm_gbps", "nvlink_gen",
          "nvlink_gbps", "pcie_gen", "pcie_gbps", "gemm_efficiency", "hbm_efficiency", "kernel_launch_us", "source"});
  GpuSpec g;
  g.name = name;
  g.bf16_tflops = o.number("bf16_tflops", std::nullopt, 0, 1e6, true);
  g.fp16_tflops = o.number("fp16_tflops", g.bf16_tflops, 0, 1e6);
  g.fp8_tflops = o.number("fp8_tflops", 0.0, 0, 1e6);
  g.tf32_tflops = o.number("tf32_tflops", 0.0, 0, 1e6);
  g.hbm_bytes = o.number("hbm_bytes", std::nullopt, 0, 1e15, true);
  g.hbm_gbps = o.number("hbm_gbps", std::nullopt, 0, 1e6, true);
  g.nvlink_gen = static_cast<int>(o.integer("nvlink_gen", 0, 0, 9));
  g.nvlink_gbps = o.number("nvlink_gbps", 0.0, 0, 1e5);
  g.pcie_gen = static_cast<int>(o.integer("pcie_gen", 4, 1, 9));
  g.pcie_gbps = o.number("pcie_gbps", 32.0, 0, 1e4, true);
  g.gemm_efficiency = o.number("gemm_efficiency", 0.75, 0, 1, true);
  g.hbm_efficiency = o.number("hbm_efficiency", 0.85, 0, 1, true);
  g.kernel_launch_us = o.number("kernel_launch_us", 2.0, 0, 1e4);
  g.source = o.string("source", std::string());
  return g;
}

const Json& builtin_json(const char* name) {
  static const Json gpus = parse_json(std::string(embedded_file("gpus.json")), "gpus.json");
  static const Json models = parse_json(std::string(embedded_file("models.json")), "models.json");
  return std::string(name) == "gpus.json" ? gpus : models;
}

// Builtin catalog entries merged with the scenario's /catalog/<kind>/NAME objects; each entry
// is parsed where it came from, so errors name the right file and path.
struct CatalogEntry {
  Json value;
  std::string file;
  std::string path;
};

std::map<std::string, CatalogEntry> merged_catalog(const char* builtin, const Json* scenario_part,
                                                   const std::string& scenario_file, const std::string& kind) {
  std::map<std::string, CatalogEntry> out;
  for (const auto& [name, v] : builtin_json(builtin).items()) {
    if (!name.empty() && name[0] == '_') continue;
    out[name] = CatalogEntry{v, builtin, "/" + name};
  }
  if (scenario_part) {
    if (!scenario_part->is_object()) {
      throw InputError(scenario_file, "/catalog/" + kind, "found " + shown(*scenario_part), "a JSON object of entries");
    }
    for (const auto& [name, v] : scenario_part->items()) {
      const std::string path = "/catalog/" + kind + "/" + name;
      if (!v.is_object()) throw InputError(scenario_file, path, "found " + shown(v), "a JSON object");
      auto it = out.find(name);
      if (it == out.end()) {
        out[name] = CatalogEntry{v, scenario_file, path};
      } else {
        it->second.value.merge_patch(v);  // fields given in the scenario override the builtin ones
        it->second.file = scenario_file;
        it->second.path = path;
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------ models

void parse_model_fields(const JsonObject& o, ModelSpec& m, bool required) {
  auto req = [&](auto v) { return required ? std::nullopt : std::optional(v); };
  m.layers = static_cast<int>(o.integer("layers", req(static_cast<long long>(m.layers)), 1, 100000));
  m.hidden = o.integer("hidden", req(static_cast<long long>(m.hidden)), 1, 1 << 24);
  m.heads = static_cast<int>(o.integer("heads", req(static_cast<long long>(m.heads)), 1, 1 << 16));
  m.kv_heads = static_cast<int>(o.integer("kv_heads", m.kv_heads > 0 ? m.kv_heads : m.heads, 1, 1 << 16));
  m.head_dim = static_cast<int>(o.integer("head_dim", m.head_dim, 0, 1 << 16));
  m.ffn_hidden = o.integer("ffn_hidden", req(static_cast<long long>(m.ffn_hidden)), 1, 1ll << 30);
  m.activation = o.choice("activation", {"swiglu", "gelu"}, to_string(m.activation)) == "swiglu" ? Activation::swiglu
                                                                                                 : Activation::gelu;
  m.norm = o.choice("norm", {"rmsnorm", "layernorm"}, m.norm == Norm::rmsnorm ? "rmsnorm" : "layernorm") == "rmsnorm"
               ? Norm::rmsnorm
               : Norm::layernorm;
  m.vocab = o.integer("vocab", req(static_cast<long long>(m.vocab)), 1, 1ll << 30);
  m.max_seq = static_cast<int>(o.integer("max_seq", req(static_cast<long long>(m.max_seq)), 1, 1ll << 30));
  m.tied_embeddings = o.boolean("tied_embeddings", m.tied_embeddings);
  m.learned_positions =
      o.choice("position", {"rope", "learned"}, m.learned_positions ? "learned" : "rope") == "learned";
  m.source = o.string("source", m.source);
  if (o.has("moe")) {
    const JsonObject e = o.object("moe");
    e.only({"experts", "top_k", "shared_experts", "expert_ffn_hidden", "first_dense_layers", "capacity_factor"});
    m.moe.experts = static_cast<int>(
        e.integer("experts", m.moe.experts > 0 ? std::nullopt : std::optional<long long>(), 1, 1 << 16));
    if (m.moe.experts == 0) m.moe.experts = static_cast<int>(e.integer("experts", std::nullopt, 1, 1 << 16));
    m.moe.top_k = static_cast<int>(e.integer("top_k", m.moe.top_k > 0 ? m.moe.top_k : 2, 1, m.moe.experts));
    m.moe.shared_experts = static_cast<int>(e.integer("shared_experts", m.moe.shared_experts, 0, 1 << 10));
    m.moe.expert_ffn_hidden = e.integer(
        "expert_ffn_hidden", m.moe.expert_ffn_hidden > 0 ? m.moe.expert_ffn_hidden : m.ffn_hidden, 1, 1ll << 30);
    m.moe.first_dense_layers = static_cast<int>(e.integer("first_dense_layers", m.moe.first_dense_layers, 0, m.layers));
    m.moe.capacity_factor = e.number("capacity_factor", m.moe.capacity_factor, 0, 64, true);
  }
  if (o.has("mla")) {
    const JsonObject a = o.object("mla");
    a.only({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    m.mla.q_lora_rank = static_cast<int>(a.integer("q_lora_rank", m.mla.q_lora_rank, 0, 1 << 20));
    m.mla.kv_lora_rank = static_cast<int>(a.integer("kv_lora_rank", std::nullopt, 1, 1 << 20));
    m.mla.qk_nope_head_dim = static_cast<int>(a.integer("qk_nope_head_dim", std::nullopt, 1, 1 << 16));
    m.mla.qk_rope_head_dim = static_cast<int>(a.integer("qk_rope_head_dim", std::nullopt, 0, 1 << 16));
    m.mla.v_head_dim = static_cast<int>(a.integer("v_head_dim", std::nullopt, 1, 1 << 16));
  }
}

ModelSpec model_from_hf(const std::string& path, const std::string& scenario_file, const std::string& pointer) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_relative()) p = fs::path(scenario_file).parent_path() / p;
  std::ifstream in(p);
  if (!in) throw InputError(scenario_file, pointer, "cannot open \"" + p.string() + "\"", "a HuggingFace config.json");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string file = p.string();
  const Json j = parse_json(ss.str(), file);
  if (!j.is_object()) throw InputError(file, "", "found " + shown(j), "a JSON object");
  auto need = [&](const char* key) -> const Json& {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      throw InputError(file, std::string("/") + key, j.contains(key) ? "found " + shown(j[key]) : "missing",
                       "an integer (a HuggingFace config field ClusterTwin needs)");
    }
    return j[key];
  };
  auto opt_int = [&](const char* key, long long def) -> long long {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<long long>() : def;
  };
  ModelSpec m;
  m.name = j.value("_name_or_path", p.parent_path().filename().string());
  m.layers = need("num_hidden_layers").get<int>();
  m.hidden = need("hidden_size").get<long long>();
  m.heads = need("num_attention_heads").get<int>();
  m.kv_heads = static_cast<int>(opt_int("num_key_value_heads", m.heads));
  m.head_dim = static_cast<int>(opt_int("head_dim", 0));
  if (m.head_dim * m.heads == m.hidden) m.head_dim = 0;
  m.ffn_hidden = need("intermediate_size").get<long long>();
  m.vocab = need("vocab_size").get<long long>();
  m.max_seq = static_cast<int>(opt_int("max_position_embeddings", 4096));
  m.tied_embeddings = j.value("tie_word_embeddings", false);
  const std::string act =
      j.contains("hidden_act") && j["hidden_act"].is_string() ? j["hidden_act"].get<std::string>() : "silu";
  m.activation = act.rfind("gelu", 0) == 0 ? Activation::gelu : Activation::swiglu;
  const std::string type = j.value("model_type", "");
  m.norm = type == "gpt2" || type == "gpt_neox" ? Norm::layernorm : Norm::rmsnorm;
  // Mixtral: num_local_experts; DeepSeek: n_routed_experts; Qwen2-MoE: num_experts.
  const long long experts = opt_int("num_local_experts", opt_int("n_routed_experts", opt_int("num_experts", 0)));
  if (experts > 0) {
    m.moe.experts = static_cast<int>(experts);
    m.moe.top_k = static_cast<int>(opt_int("num_experts_per_tok", 2));
    m.moe.shared_experts = static_cast<int>(opt_int("n_shared_experts", 0));
    m.moe.expert_ffn_hidden = opt_int("moe_intermediate_size", m.ffn_hidden);
    m.moe.first_dense_layers = static_cast<int>(opt_int("first_k_dense_replace", 0));
    if (type == "qwen2_moe" && j.contains("shared_expert_intermediate_size")) {
      const long long shared = opt_int("shared_expert_intermediate_size", 0);
      m.moe.shared_experts = m.moe.expert_ffn_hidden > 0 ? static_cast<int>(shared / m.moe.expert_ffn_hidden) : 0;
    }
  }
  if (j.contains("kv_lora_rank") && j["kv_lora_rank"].is_number_integer()) {
    m.mla.q_lora_rank = static_cast<int>(opt_int("q_lora_rank", 0));
    m.mla.kv_lora_rank = static_cast<int>(opt_int("kv_lora_rank", 0));
    m.mla.qk_nope_head_dim = static_cast<int>(opt_int("qk_nope_head_dim", 0));
    m.mla.qk_rope_head_dim = static_cast<int>(opt_int("qk_rope_head_dim", 0));
    m.mla.v_head_dim = static_cast<int>(opt_int("v_head_dim", 0));
  }
  m.source = "HuggingFace config " + file;
  return m;
}

ModelSpec parse_model(const Json& root, const std::string& file, const std::map<std::string, CatalogEntry>& catalog) {
  if (!root.contains("model")) throw InputError(file, "/model", "missing required key", "a model name or object");
  const Json& mj = root["model"];
  if (!mj.is_object()) {
    throw InputError(file, "/model", "found " + shown(mj), "a catalog model name or a JSON object");
  }
  const JsonObject o(mj, "/model", file);
  o.only({"preset", "hf_config", "generic_layers", "name", "layers", "hidden", "heads", "kv_heads", "head_dim",
          "ffn_hidden", "activation", "norm", "vocab", "max_seq", "tied_embeddings", "position", "moe", "mla",
          "source"});
  ModelSpec m;
  if (o.has("preset")) {
    const std::string name = o.string("preset");
    auto it = catalog.find(name);
    if (it == catalog.end()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : catalog) names.push_back(k);
      const std::string guess = closest(name, names);
      o.fail("preset", "unknown model \"" + name + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "one of " + list_of(names));
    }
    const JsonObject c(it->second.value, it->second.path, it->second.file);
    c.only({"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "activation", "norm", "vocab", "max_seq",
            "tied_embeddings", "position", "moe", "mla", "source"});
    parse_model_fields(c, m, true);
    m.name = name;
    parse_model_fields(o, m, false);  // the scenario's own overrides
  } else if (o.has("hf_config")) {
    m = model_from_hf(o.string("hf_config"), file, "/model/hf_config");
    parse_model_fields(o, m, false);
  } else if (o.has("generic_layers")) {
    const Json& layers = o.raw("generic_layers");
    if (!layers.is_array() || layers.empty()) {
      o.fail("generic_layers", "found " + shown(layers), "a non-empty array of layer objects");
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const JsonObject l(layers[i], "/model/generic_layers/" + std::to_string(i), file);
      l.only({"name", "fwd_flops", "params", "activation_bytes", "hbm_bytes"});
      m.generic_layers.push_back(
          GenericLayer{l.string("name", "layer " + std::to_string(i)), l.number("fwd_flops", std::nullopt, 0, 1e20),
                       l.number("params", std::nullopt, 0, 1e15), l.number("activation_bytes", std::nullopt, 0, 1e15)});
    }
    m.layers = static_cast<int>(m.generic_layers.size());
    m.source = o.string("source", std::string());
  } else {
    parse_model_fields(o, m, true);
  }
  m.name = o.string("name", m.name.empty() ? std::string("custom") : m.name);
  if (!m.is_generic()) {
    if (m.hidden % m.heads != 0 && m.head_dim == 0) {
      o.fail("heads", "hidden " + std::to_string(m.hidden) + " is not divisible by heads " + std::to_string(m.heads),
             "heads dividing hidden, or an explicit head_dim");
    }
    if (m.heads % m.kv_heads != 0) {
      o.fail("kv_heads",
             "found " + std::to_string(m.kv_heads) + ", which does not divide heads " + std::to_string(m.heads),
             "a divisor of heads");
    }
  }
  return m;
}

// ------------------------------------------------------------------ cluster

ClusterSpec parse_cluster(const JsonObject& o, const std::map<std::string, CatalogEntry>& gpus_json) {
  o.only({"name",
          "preset",
          "nodes",
          "gpu",
          "gpus_per_node",
          "intra",
          "intra_gbps",
          "intra_latency_us",
          "intra_efficiency",
          "nvls_efficiency",
          "nic_gbps",
          "inter_latency_us",
          "net_overhead_us",
          "nodes_per_pod",
          "spines",
          "oversubscription",
          "fabric",
          "core_switches",
          "nics_per_node",
          "nic_efficiency",
          "sharp",
          "sockets",
          "gpus_per_pcie_switch",
          "pcie_uplink_gbps",
          "inter_socket_gbps",
          "nvlink_pair_gbps"});
  GpuCatalog gpus;
  auto gpu_named = [&](const std::string& name, const std::string& key) {
    auto it = gpus_json.find(name);
    if (it == gpus_json.end()) {
      std::vector<std::string> names;
      for (const auto& [k, v] : gpus_json) names.push_back(k);
      const std::string guess = closest(name, names);
      o.fail(key, "unknown GPU \"" + name + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "one of " + list_of(names) + ", or a new entry under /catalog/gpus");
    }
    return parse_gpu(JsonObject(it->second.value, it->second.path, it->second.file), name);
  };
  for (const auto& [name, e] : gpus_json) gpus.gpus[name] = gpu_named(name, "gpu");
  const int nodes = static_cast<int>(o.integer("nodes", 1, 1, 1 << 20));
  ClusterSpec c;
  if (o.has("preset")) {
    const std::string preset = o.string("preset");
    if (!preset_cluster(preset, nodes, gpus, c)) {
      const auto names = preset_cluster_names();
      const std::string guess = closest(preset, names);
      o.fail("preset",
             "unknown cluster preset \"" + preset + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
             "one of " + list_of(names));
    }
  } else {
    if (!o.has("gpu"))
      o.fail("gpu", "missing required key (no preset given)", "a GPU name from the catalog, or a preset");
    c.name = "custom";
    c.nodes = nodes;
    c.gpus_per_node = static_cast<int>(o.integer("gpus_per_node", std::nullopt, 1, 1024));
  }
  if (o.has("gpu")) {
    // A catalog name, or a whole GPU description (as `ctwin cluster --write` emits).
    if (o.raw("gpu").is_object()) {
      const JsonObject g = o.object("gpu");
      const std::string name = g.string("name");
      Json fields = o.raw("gpu");
      fields.erase("name");
      c.gpu = parse_gpu(JsonObject(fields, g.path(), o.file()), name);
    } else {
      c.gpu = gpu_named(o.string("gpu"), "gpu");
    }
    if (!o.has("preset")) {
      c.intra = c.gpu.nvlink_gbps > 0 ? IntraNodeFabric::nvswitch : IntraNodeFabric::pcie;
      c.intra_gbps = c.intra == IntraNodeFabric::nvswitch ? c.gpu.nvlink_gbps : c.gpu.pcie_gbps;
      c.intra_latency_us = c.intra == IntraNodeFabric::nvswitch ? 0.6 : 1.5;
      // NCCL's measured share of NVLink and NVLS, as the NVSwitch presets (topology/src/presets.cpp).
      c.intra_efficiency = c.intra == IntraNodeFabric::nvswitch ? 370.0 / 450.0 : 1.0;
      c.nvls_efficiency = c.intra == IntraNodeFabric::nvswitch && c.gpu.nvlink_gen >= 4 ? 275.0 / 450.0 : 0.0;
      c.nic_gbps = 50;
      c.inter_latency_us = 3.0;
    }
  }
  c.name = o.string("name", c.name);
  c.intra_efficiency = o.number("intra_efficiency", c.intra_efficiency, 0, 1, true);
  c.nvls_efficiency = o.number("nvls_efficiency", c.nvls_efficiency, 0, 2);
  c.gpus_per_node = static_cast<int>(o.integer("gpus_per_node", c.gpus_per_node, 1, 1024));
  if (o.has("intra")) {
    const std::string intra = o.choice("intra", {"nvswitch", "pcie", "nvlink_bridge", "nvlink_mesh"});
    c.intra = intra == "nvswitch"        ? IntraNodeFabric::nvswitch
              : intra == "pcie"          ? IntraNodeFabric::pcie
              : intra == "nvlink_bridge" ? IntraNodeFabric::nvlink_bridge
                                         : IntraNodeFabric::nvlink_mesh;
  }
  c.intra_gbps = o.number("intra_gbps", c.intra_gbps, 0, 1e6, true);
  c.intra_latency_us = o.number("intra_latency_us", c.intra_latency_us, 0, 1e6);
  c.nic_gbps = o.number("nic_gbps", c.nic_gbps, 0, 1e6, true);
  c.inter_latency_us = o.number("inter_latency_us", c.inter_latency_us, 0, 1e6);
  c.net_overhead_us = o.number("net_overhead_us", c.net_overhead_us, 0, 1e6);
  c.nodes_per_pod = static_cast<int>(o.integer("nodes_per_pod", c.nodes_per_pod, 1, 1 << 20));
  c.spines = static_cast<int>(o.integer("spines", c.spines, 1, 1 << 16));
  c.oversubscription = o.number("oversubscription", c.oversubscription, 1, 1000);
  if (o.has("fabric")) {
    const std::string f = o.choice("fabric", {"single_switch", "rail_optimized", "fat_tree", "fat_tree3"});
    c.fabric = f == "single_switch"    ? InterNodeFabric::single_switch
               : f == "rail_optimized" ? InterNodeFabric::rail_optimized
               : f == "fat_tree"       ? InterNodeFabric::fat_tree
                                       : InterNodeFabric::fat_tree3;
  }
  c.core_switches = static_cast<int>(o.integer("core_switches", c.core_switches, 1, 1 << 16));
  c.nics_per_node = static_cast<int>(o.integer("nics_per_node", c.nics_per_node, 0, 1024));
  c.nic_efficiency = o.number("nic_efficiency", c.nic_efficiency, 0, 1, true);
  c.sharp = o.boolean("sharp", c.sharp);
  c.sockets = static_cast<int>(o.integer("sockets", c.sockets, 1, 64));
  c.gpus_per_pcie_switch = static_cast<int>(o.integer("gpus_per_pcie_switch", c.gpus_per_pcie_switch, 1, 1024));
  c.pcie_uplink_gbps = o.number("pcie_uplink_gbps", c.pcie_uplink_gbps, 0, 1e6);
  c.inter_socket_gbps = o.number("inter_socket_gbps", c.inter_socket_gbps, 0, 1e6);
  c.nvlink_pair_gbps = o.number("nvlink_pair_gbps", c.nvlink_pair_gbps, 0, 1e6);
  if (c.nics_per_node > c.gpus_per_node) {
    o.fail("nics_per_node",
           "found " + std::to_string(c.nics_per_node) + ", more NICs than the node's " +
               std::to_string(c.gpus_per_node) + " GPUs",
           "0 (one per GPU) or at most gpus_per_node");
  }
  return c;
}

// ------------------------------------------------------------------ network

// /network/algo and /network/protocol: one name for every collective, or an object naming one
// per operation ({"all_reduce": "tree", "all_gather": "ring"}), as NCCL_ALGO and NCCL_PROTO.
// One of /network/algo or /network/protocol: a name for all operations into `all`, or an
// object of names per operation into `by_op`. `names` are the choices; `parse` maps one.
template <class T>
void read_nccl_choice(const JsonObject& n, const char* key, std::initializer_list<const char*> names, T& all,
                      std::array<T, kCollectiveOps>& by_op, bool (*parse)(std::string_view, T&)) {
  if (!n.has(key)) return;
  if (!n.raw(key).is_object()) {
    parse(n.choice(key, names), all);
    return;
  }
  const JsonObject per_op = n.object(key);
  per_op.only({"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"});
  for (std::size_t i = 0; i < by_op.size(); ++i) {
    const char* op = to_string(static_cast<CollectiveOp>(i));
    if (per_op.has(op)) parse(per_op.choice(op, names), by_op[i]);
  }
}

CollectiveOptions parse_collective_options(const JsonObject& n) {
  CollectiveOptions o;
  o.where_applicable = true;
  read_nccl_choice(n, "algo", {"auto", "ring", "tree", "nvls", "collnet"}, o.algo, o.algo_by_op, parse_collective_algo);
  read_nccl_choice(n, "protocol", {"auto", "ll", "ll128", "simple"}, o.protocol, o.protocol_by_op, parse_protocol);
  return o;
}

// ------------------------------------------------------------------ training

Dtype parse_dtype(const std::string& s) {
  if (s == "fp16") return Dtype::fp16;
  if (s == "fp8") return Dtype::fp8;
  return Dtype::bf16;
}

TrainingConfig parse_training(const JsonObject& o, const ModelSpec& m, const ClusterSpec& cl, const std::string& file) {
  o.only({"micro_batch", "global_batch", "seq_len", "parallelism", "precision", "recompute", "attention", "dropout",
          "grad_bucket_mb", "overlap_grad_reduce", "overlap_slowdown", "framework_overhead_gb", "comm_buffer_gb",
          "noise", "moe_load_imbalance"});
  TrainingConfig t;
  t.micro_batch = static_cast<int>(o.integer("micro_batch", 1, 1, 1 << 20));
  t.global_batch = static_cast<int>(o.integer("global_batch", std::nullopt, 1, 1ll << 30));
  t.seq_len =
      static_cast<int>(o.integer("seq_len", m.is_generic() ? std::optional<long long>(1) : std::nullopt, 1, 1ll << 30));
  const std::string rc = o.choice("recompute", {"none", "selective", "full"}, "none");
  t.recompute = rc == "none" ? Recompute::none : rc == "selective" ? Recompute::selective : Recompute::full;
  t.attention = o.choice("attention", {"flash", "standard"}, "flash") == "flash" ? AttentionKernel::flash
                                                                                 : AttentionKernel::standard;
  t.dropout = o.boolean("dropout", false);
  t.grad_bucket_bytes = o.number("grad_bucket_mb", 25.0, 0, 1e6, true) * 1024 * 1024;
  t.overlap_grad_reduce = o.boolean("overlap_grad_reduce", true);
  t.overlap_slowdown = o.number("overlap_slowdown", 0.0, 0, 10);
  t.moe_load_imbalance = o.number("moe_load_imbalance", 1.0, 1, 1000);
  t.framework_overhead_bytes = o.number("framework_overhead_gb", 1.0, 0, 1e4) * 1024 * 1024 * 1024;
  t.comm_buffer_bytes = o.number("comm_buffer_gb", 0.5, 0, 1e4) * 1024 * 1024 * 1024;
  if (o.has("precision")) {
    const JsonObject p = o.object("precision");
    p.only({"compute", "weight_bytes", "grad_bytes", "master_bytes", "optimizer_state_bytes"});
    t.precision.compute = parse_dtype(p.choice("compute", {"bf16", "fp16", "fp8"}, "bf16"));
    t.precision.weight_bytes = p.number("weight_bytes", 2.0, 0, 16, true);
    t.precision.grad_bytes = p.number("grad_bytes", 2.0, 0, 16, true);
    t.precision.master_bytes = p.number("master_bytes", 4.0, 0, 16);
    t.precision.optimizer_state_bytes = p.number("optimizer_state_bytes", 8.0, 0, 64);
    if (t.precision.compute == Dtype::fp8 && cl.gpu.fp8_tflops <= 0) {
      p.fail("compute", "found \"fp8\", but " + cl.gpu.name + " has no FP8 tensor cores", "\"bf16\" or \"fp16\"");
    }
  }
  if (o.has("noise")) {
    const JsonObject n = o.object("noise");
    n.only({"steps", "kernel_jitter", "straggler_probability", "straggler_slowdown"});
    t.noise.steps = static_cast<int>(n.integer("steps", 1, 1, 100000));
    t.noise.kernel_jitter = n.number("kernel_jitter", 0.0, 0, 2);
    t.noise.straggler_probability = n.number("straggler_probability", 0.0, 0, 1);
    t.noise.straggler_slowdown = n.number("straggler_slowdown", 1.5, 1, 100);
  }
  const int gpus = cl.nodes * cl.gpus_per_node;
  auto& par = t.parallel;
  std::string par_path = "/training/parallelism";
  if (o.has("parallelism")) {
    const JsonObject p = o.object("parallelism");
    p.only({"tp", "pp", "dp", "cp", "cp_comm", "ep", "sequence_parallel", "tp_comm_overlap", "zero_stage", "schedule",
            "virtual_stages", "order"});
    par.tp = static_cast<int>(p.integer("tp", 1, 1, 1 << 20));
    par.pp = static_cast<int>(p.integer("pp", 1, 1, 1 << 20));
    par.cp = static_cast<int>(p.integer("cp", 1, 1, 1 << 20));
    par.cp_comm = p.choice("cp_comm", {"ring", "all_gather"}, "ring") == "ring" ? Parallelism::CpComm::ring
                                                                                : Parallelism::CpComm::all_gather;
    par.ep = static_cast<int>(p.integer("ep", 1, 1, 1 << 20));
    const int rest = par.tp * par.pp * par.cp;
    par.dp = static_cast<int>(p.integer("dp", std::max(1, gpus / rest), 1, 1 << 24));
    par.sequence_parallel = p.boolean("sequence_parallel", false);
    par.tp_comm_overlap = p.boolean("tp_comm_overlap", false);
    par.zero_stage = static_cast<int>(p.integer("zero_stage", 0, 0, 3));
    const std::string sch = p.choice("schedule", {"1f1b", "gpipe", "interleaved", "zero_bubble"}, "1f1b");
    par.schedule = sch == "gpipe"         ? PipelineSchedule::gpipe
                   : sch == "interleaved" ? PipelineSchedule::interleaved
                   : sch == "zero_bubble" ? PipelineSchedule::zero_bubble
                                          : PipelineSchedule::one_f_one_b;
    par.virtual_stages = static_cast<int>(p.integer("virtual_stages", 1, 1, 1024));
    par.order = p.string("order", par.order);
    // The order must name each of tp, cp, ep, dp, pp once.
    std::vector<std::string> dims;
    std::stringstream ss(par.order);
    for (std::string tok; std::getline(ss, tok, '-');) dims.push_back(tok);
    std::vector<std::string> sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != std::vector<std::string>{"cp", "dp", "ep", "pp", "tp"}) {
      p.fail("order", "found " + shown(Json(par.order)),
             "the five of tp, cp, ep, dp, pp joined by '-', innermost first");
    }
    auto bad = [&](const std::string& key, const std::string& problem, const std::string& expected) {
      throw InputError(file, par_path + "/" + key, problem, expected);
    };
    const long long product = 1ll * par.tp * par.pp * par.dp * par.cp;
    if (product != gpus) {
      bad(p.has("dp") ? "dp" : "tp",
          "tp*pp*dp*cp = " + std::to_string(par.tp) + "*" + std::to_string(par.pp) + "*" + std::to_string(par.dp) +
              "*" + std::to_string(par.cp) + " = " + std::to_string(product) + ", but the cluster has " +
              std::to_string(gpus) + " GPUs",
          "tp*pp*dp*cp equal to nodes*gpus_per_node = " + std::to_string(gpus));
    }
    if (m.is_generic() && (par.tp > 1 || par.cp > 1 || par.ep > 1)) {
      bad(par.tp > 1   ? "tp"
          : par.cp > 1 ? "cp"
                       : "ep",
          "a generic layer-list model cannot be split by tp, cp or ep", "1 (use dp and pp)");
    }
    if (!m.is_generic()) {
      if (m.heads % par.tp != 0) {
        bad("tp",
            "found " + std::to_string(par.tp) + ", which does not divide the model's " + std::to_string(m.heads) +
                " attention heads",
            "a divisor of " + std::to_string(m.heads));
      }
      if (m.kv_heads % par.tp != 0 && par.tp % m.kv_heads != 0) {
        bad("tp",
            "found " + std::to_string(par.tp) + "; the model's " + std::to_string(m.kv_heads) +
                " KV heads can neither be split nor replicated evenly",
            "a divisor or a multiple of " + std::to_string(m.kv_heads));
      }
      if (par.cp > 1 && t.seq_len % (2 * par.cp) != 0) {
        bad("cp",
            "seq_len " + std::to_string(t.seq_len) + " does not split into 2*cp = " + std::to_string(2 * par.cp) +
                " load-balanced chunks",
            "seq_len divisible by 2*cp");
      }
    }
    const int layers = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
    const int vs = par.schedule == PipelineSchedule::interleaved ? par.virtual_stages : 1;
    if (par.virtual_stages > 1 && par.schedule != PipelineSchedule::interleaved) {
      bad("virtual_stages", "found " + std::to_string(par.virtual_stages) + " with schedule \"" + sch + "\"",
          "1, or schedule \"interleaved\"");
    }
    if (par.schedule == PipelineSchedule::interleaved && par.pp < 2) {
      bad("schedule", "\"interleaved\" needs pipeline parallelism (pp is 1)", "pp >= 2, or schedule \"1f1b\"");
    }
    if (layers % (par.pp * vs) != 0) {
      bad(vs > 1 ? "virtual_stages" : "pp",
          "the model's " + std::to_string(layers) +
              " layers do not split evenly into pp*virtual_stages = " + std::to_string(par.pp * vs) + " chunks",
          "pp*virtual_stages dividing " + std::to_string(layers));
    }
    if (par.ep > 1) {
      if (!m.moe.enabled()) bad("ep", "found " + std::to_string(par.ep) + " but the model has no experts", "1");
      if (m.moe.experts % par.ep != 0) {
        bad("ep",
            "found " + std::to_string(par.ep) + ", which does not divide the " + std::to_string(m.moe.experts) +
                " experts",
            "a divisor of " + std::to_string(m.moe.experts));
      }
      if (par.dp % par.ep != 0) {
        bad("ep", "found " + std::to_string(par.ep) + ", which does not divide dp " + std::to_string(par.dp),
            "a divisor of dp (expert-parallel groups are carved from data-parallel ranks)");
      }
    }
    if (par.sequence_parallel && par.tp == 1) {
      bad("sequence_parallel", "true with tp 1", "false, or tp > 1 (sequence parallelism splits along the TP group)");
    }
  } else {
    par.dp = gpus;
  }
  if (t.global_batch % (t.micro_batch * par.dp) != 0) {
    o.fail("global_batch",
           "found " + std::to_string(t.global_batch) +
               ", not a multiple of micro_batch*dp = " + std::to_string(t.micro_batch) + "*" + std::to_string(par.dp) +
               " = " + std::to_string(t.micro_batch * par.dp),
           "a multiple of " + std::to_string(t.micro_batch * par.dp));
  }
  if (!m.is_generic() && t.seq_len > m.max_seq) {
    o.fail("seq_len",
           "found " + std::to_string(t.seq_len) + ", longer than the model's max_seq " + std::to_string(m.max_seq),
           "at most " + std::to_string(m.max_seq) + " (or raise /model/max_seq)");
  }
  if (par.schedule == PipelineSchedule::interleaved && par.virtual_stages > 1 && (t.grad_accum() % par.pp) != 0) {
    o.fail("global_batch",
           "gives " + std::to_string(t.grad_accum()) + " micro-batches per replica, not a multiple of pp " +
               std::to_string(par.pp) + " as the interleaved schedule needs",
           "global_batch / (micro_batch*dp) divisible by pp");
  }
  return t;
}

void normalise_model(Json& root) {
  if (root.is_object() && root.contains("model") && root["model"].is_string()) {
    root["model"] = Json{{"preset", root["model"]}};
  }
}

}  // namespace

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || text.empty() || text[0] != '/') {
    throw InputError("", "--set", "'" + text + "' is not /json/pointer=value", "--set /training/parallelism/tp=2");
  }
  return Override{text.substr(0, eq), text.substr(eq + 1)};
}

GpuCatalog builtin_gpus() {
  GpuCatalog c;
  for (const auto& [name, v] : builtin_json("gpus.json").items()) {
    if (!name.empty() && name[0] == '_') continue;
    c.gpus[name] = parse_gpu(JsonObject(v, "/" + name, "gpus.json"), name);
  }
  return c;
}

ModelCatalog builtin_models() {
  ModelCatalog c;
  const std::map<std::string, CatalogEntry> entries = merged_catalog("models.json", nullptr, "", "models");
  for (const auto& [name, e] : entries) {
    Json root{{"model", Json{{"preset", name}}}};
    c.models[name] = parse_model(root, "models.json", entries);
  }
  return c;
}

Scenario parse_scenario(const std::string& text, const std::string& path, const std::vector<Override>& overrides) {
  Json root = parse_json(text, path);
  if (!root.is_object()) throw InputError(path, "/", "found " + shown(root), "a JSON object");
  normalise_model(root);
  for (const auto& ov : overrides) {
    Json value;
    try {
      value = Json::parse(ov.value);
    } catch (const Json::parse_error&) {
      value = ov.value;  // not JSON: a string
    }
    Json::json_pointer ptr;
    try {
      ptr = Json::json_pointer(ov.pointer);
    } catch (const Json::exception&) {
      throw InputError(path + " (--set)", ov.pointer, "not a JSON pointer", "a path such as /training/parallelism/tp");
    }
    const Json::json_pointer parent = ptr.parent_pointer();
    if (!root.contains(parent) || !root[parent].is_object()) {
      throw InputError(path + " (--set)", ov.pointer,
                       "the parent " + (parent.to_string().empty() ? std::string("/") : parent.to_string()) +
                           " does not exist in the scenario",
                       "a key inside an existing object (add the parent object first)");
    }
    root[ptr] = value;
    normalise_model(root);
  }
  const JsonObject top(root, "", path);
  top.only({"name", "kind", "seed", "cluster", "model", "training", "network", "catalog", "validation"});
  Scenario sc;
  sc.file = path;
  sc.name = top.string("name");
  sc.kind = top.choice("kind", {"training"});
  sc.seed = static_cast<std::uint64_t>(top.integer("seed", 1, 0));
  const Json* cat_gpus = nullptr;
  const Json* cat_models = nullptr;
  if (top.has("catalog")) {
    const JsonObject c = top.object("catalog");
    c.only({"gpus", "models"});
    if (c.has("gpus")) cat_gpus = &c.raw("gpus");
    if (c.has("models")) cat_models = &c.raw("models");
  }
  const auto gpus = merged_catalog("gpus.json", cat_gpus, path, "gpus");
  const auto models = merged_catalog("models.json", cat_models, path, "models");
  // /cluster/file: a cluster description written by `ctwin cluster --write` (or, later, by
  // realrun's discovery); keys beside it override the file's.
  Json cluster_json = top.has("cluster") ? top.raw("cluster") : Json();
  std::string cluster_file = path;
  std::string cluster_ptr = "/cluster";
  if (cluster_json.is_object() && cluster_json.contains("file")) {
    const JsonObject co = top.object("cluster");
    namespace fs = std::filesystem;
    fs::path f(co.string("file"));
    if (f.is_relative()) f = fs::path(path).parent_path() / f;
    std::ifstream in(f);
    if (!in) co.fail("file", "cannot open \"" + f.string() + "\"", "a cluster description from ctwin cluster --write");
    std::ostringstream ss;
    ss << in.rdbuf();
    Json described = parse_json(ss.str(), f.string());
    if (!described.is_object()) throw InputError(f.string(), "", "found " + shown(described), "a JSON object");
    Json overrides = cluster_json;
    overrides.erase("file");
    if (!overrides.empty()) {
      described.merge_patch(overrides);
    } else {
      cluster_file = f.string();  // errors point into the description file itself
      cluster_ptr = "";
    }
    cluster_json = std::move(described);
  }
  if (!top.has("cluster")) top.object("cluster");  // the missing-key error
  sc.cluster = parse_cluster(JsonObject(cluster_json, cluster_ptr, cluster_file), gpus);
  sc.model = parse_model(root, path, models);
  sc.training = parse_training(top.object("training"), sc.model, sc.cluster, path);
  sc.training.seed = sc.seed;
  if (top.has("network")) {
    const JsonObject n = top.object("network");
    n.only({"fidelity", "algo", "protocol"});
    sc.fidelity = n.choice("fidelity", {"analytical", "flow"}, "analytical") == "flow" ? NetworkFidelity::flow
                                                                                       : NetworkFidelity::analytical;
    sc.collectives = parse_collective_options(n);
  }
  if (top.has("validation")) {
    const JsonObject v = top.object("validation");
    v.only({"source", "metric", "published", "notes", "tolerance"});
    sc.validation.source = v.string("source");
    sc.validation.metric =
        v.choice("metric", {"tflops_per_gpu", "hardware_tflops_per_gpu", "step_time_s", "tokens_per_s_per_gpu", "mfu"});
    sc.validation.published = v.number("published", std::nullopt, 0, 1e300, true);
    sc.validation.notes = v.string("notes", std::string());
  }
  return sc;
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  return parse_scenario(read_text(path), path, overrides);
}

}  // namespace ctwin
