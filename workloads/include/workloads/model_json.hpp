// Models as JSON: workloads/catalog/models.json (embedded in the library), /model objects in
// scenarios, and HuggingFace config.json files.
#pragma once

#include <string>

#include "sim/json_reader.hpp"
#include "sim/params.hpp"
#include "workloads/model.hpp"

namespace ctwin {

// ModelSpec::learned_positions as a name.
inline constexpr auto position_names = make_names<bool>({{false, "rope"}, {true, "learned"}});

// How a /model object names its model (before the fields of model_params, which override it).
inline constexpr ParamDecl model_source_params[] = {
    {.key = "preset",
     .type = ParamType::string,
     .doc = "a catalog model (workloads/catalog/models.json); the other keys override its fields"},
    {.key = "hf_config",
     .type = ParamType::string,
     .doc = "a HuggingFace config.json, relative to the scenario (the fields read are listed below)"},
    {.key = "generic_layers",
     .type = ParamType::any,
     .doc = "any model as a non-empty array of layer objects (/model/generic_layers/N); only dp and pp apply"},
    {.key = "name", .type = ParamType::string, .doc = "for reports", .computed = "the preset's, else \"custom\""},
};

// The fields of a transformer (a /model object or a catalog entry), filling ModelSpec.
inline constexpr ParamDecl model_params[] = {
    {.key = "layers", .type = ParamType::integer, .min = 1, .max = 100000, .doc = "decoder layers", .required = true},
    {.key = "hidden", .type = ParamType::integer, .min = 1, .max = 1 << 24, .doc = "model width", .required = true},
    {.key = "heads",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 16,
     .doc = "attention (query) heads",
     .required = true},
    {.key = "kv_heads",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 16,
     .doc = "key/value heads (GQA when fewer); divides heads",
     .computed = "heads"},
    {.key = "head_dim",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1 << 16,
     .doc = "per head (0: hidden/heads)",
     .computed = "hidden/heads"},
    {.key = "ffn_hidden",
     .type = ParamType::integer,
     .min = 1,
     .max = 1ll << 30,
     .doc = "MLP intermediate size",
     .required = true},
    {.key = "activation",
     .type = ParamType::choice,
     .def_name = "swiglu",
     .doc = "MLP activation: gated swiglu (Llama) and geglu (Gemma) have three MLP matrices, gelu, relu and relu2 "
            "(squared ReLU, Nemotron) two",
     .choices = activation_names.names},
    {.key = "norm",
     .type = ParamType::choice,
     .def_name = "rmsnorm",
     .doc = "LayerNorm models carry biases",
     .choices = norm_names.names},
    {.key = "vocab",
     .type = ParamType::integer,
     .min = 1,
     .max = 1ll << 30,
     .unit = "tokens",
     .doc = "vocabulary",
     .required = true},
    {.key = "max_seq",
     .type = ParamType::integer,
     .min = 1,
     .max = 1ll << 30,
     .unit = "tokens",
     .doc = "longest sequence the model takes",
     .required = true},
    {.key = "tied_embeddings", .type = ParamType::boolean, .def = 0, .doc = "LM head shares the embedding"},
    {.key = "position",
     .type = ParamType::choice,
     .def_name = "rope",
     .doc = "learned adds max_seq x hidden parameters",
     .choices = position_names.names},
    {.key = "attention_window",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1ll << 30,
     .unit = "tokens",
     .doc = "sliding-window attention: a windowed layer's query attends to this many tokens, itself and those "
            "before it (Mistral 4096, GPT-OSS 128); 0: full attention. Training and serving (serving needs some "
            "full layers), not realrun"},
    {.key = "full_attention_every",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 100000,
     .unit = "layers",
     .doc = "with attention_window: every Nth layer attends over the whole sequence (GPT-OSS and Gemma 2: 2, "
            "Gemma 3: 6); 0: every layer windowed"},
    {.key = "moe", .type = ParamType::object, .doc = "mixture of experts (/model/moe)"},
    {.key = "mla", .type = ParamType::object, .doc = "multi-head latent attention (/model/mla)"},
    {.key = "source", .type = ParamType::string, .doc = "where the shapes come from"},
};

inline constexpr ParamDecl moe_params[] = {
    {.key = "experts", .type = ParamType::integer, .min = 1, .max = 1 << 16, .doc = "routed experts", .required = true},
    {.key = "top_k",
     .type = ParamType::integer,
     .def = 2,
     .min = 1,
     .max = 1 << 16,
     .doc = "experts per token; at most experts"},
    {.key = "shared_experts",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1 << 10,
     .doc = "experts every token passes through"},
    {.key = "expert_ffn_hidden",
     .type = ParamType::integer,
     .min = 1,
     .max = 1ll << 30,
     .doc = "intermediate size of one expert",
     .computed = "ffn_hidden"},
    {.key = "first_dense_layers",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 100000,
     .doc = "leading layers with a dense MLP; at most layers",
     .source = "DeepSeek-V3: 3"},
    {.key = "capacity_factor",
     .type = ParamType::number,
     .def = 1.0,
     .min = 0,
     .max = 64,
     .doc = "expert capacity over the balanced share",
     .min_exclusive = true},
};

inline constexpr ParamDecl mla_params[] = {
    {.key = "q_lora_rank",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1 << 20,
     .doc = "rank of the Q projection (0: none)",
     .source = "DeepSeek-V2 paper"},
    {.key = "kv_lora_rank",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 20,
     .doc = "rank of the KV projection",
     .source = "DeepSeek-V2 paper",
     .required = true},
    {.key = "qk_nope_head_dim",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 16,
     .doc = "per-head Q/K width without position",
     .required = true},
    {.key = "qk_rope_head_dim",
     .type = ParamType::integer,
     .min = 0,
     .max = 1 << 16,
     .doc = "per-head Q/K width carrying RoPE",
     .required = true},
    {.key = "v_head_dim",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 16,
     .doc = "per-head V width",
     .required = true},
};

inline constexpr ParamDecl generic_layer_params[] = {
    {.key = "name", .type = ParamType::string, .doc = "for reports", .computed = "\"layer N\""},
    {.key = "fwd_flops",
     .type = ParamType::number,
     .min = 0,
     .max = 1e20,
     .unit = "FLOP per sample",
     .doc = "forward FLOPs (2 per multiply-add); backward costs twice this",
     .required = true},
    {.key = "params",
     .type = ParamType::number,
     .min = 0,
     .max = 1e15,
     .unit = "parameters",
     .doc = "weights",
     .required = true},
    {.key = "activation_bytes",
     .type = ParamType::number,
     .min = 0,
     .max = 1e15,
     .unit = "bytes per sample",
     .doc = "activations kept for backward",
     .required = true},
    {.key = "hbm_bytes",
     .type = ParamType::number,
     .min = 0,
     .max = 1e15,
     .unit = "bytes per sample",
     .doc = "accepted, not read yet (the forward's memory traffic)"},
};

// A /model object at o: a preset from `catalog` (the builtin catalog merged with a scenario's
// /catalog/models), a HuggingFace config (relative to o's file), a generic layer list, or
// explicit fields. Throws InputError naming the file and JSON pointer.
ModelSpec model_from_json(const JsonObject& o, const CatalogEntries& catalog);

// A HuggingFace config.json (relative to `scenario_file`); `pointer` is where it was named.
ModelSpec model_from_hf_config(const std::string& path, const std::string& scenario_file, const std::string& pointer);

// workloads/catalog/models.json as shipped, and parsed.
const Json& builtin_models_json();
ModelCatalog builtin_models();

}  // namespace ctwin
