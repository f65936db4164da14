// The deployment keys of a scenario's /serving object (named as vLLM's EngineArgs names them):
// how one replica runs its model (TP x PP, expert parallelism, weight and KV precisions, CUDA
// graphs, the speculative proposer). The scheduler's keys (max_num_seqs, block_size, ...) live
// in the scheduler's table; /serving is read through both.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/params.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/model.hpp"
#include "workloads/profile.hpp"

namespace ctwin {

// Weight (and activation) precision of the GEMMs, as vLLM's quantization methods run them.
// none: BF16. fp8 / int8: W8A8, GEMMs at the FP8 / INT8 tensor peak. w4a16 / w8a16:
// weight-only (AWQ, GPTQ through Marlin), dequantised to BF16 in the kernel. fp4: NVFP4 W4A4,
// Blackwell only. mxfp4: the routed experts only (gpt-oss's checkpoint, vLLM's Mxfp4MoEMethod),
// E2M1 weights with one E8M0 scale per 32, dequantized and multiplied at BF16 (the kernels vLLM
// runs before Blackwell; Blackwell's W4A8 path is not modelled); every other GEMM BF16.
enum class Quantization : std::uint8_t { none, fp8, int8, w4a16, w8a16, fp4, mxfp4 };
inline constexpr auto quantization_names = make_names<Quantization>({{Quantization::none, "none"},
                                                                     {Quantization::fp8, "fp8"},
                                                                     {Quantization::int8, "int8"},
                                                                     {Quantization::w4a16, "w4a16"},
                                                                     {Quantization::w8a16, "w8a16"},
                                                                     {Quantization::fp4, "fp4"},
                                                                     {Quantization::mxfp4, "mxfp4"}});
// auto: the model's dtype (BF16); fp8: E4M3, one byte per element.
enum class KvCacheDtype : std::uint8_t { automatic, fp8 };
inline constexpr auto kv_cache_dtype_names =
    make_names<KvCacheDtype>({{KvCacheDtype::automatic, "auto"}, {KvCacheDtype::fp8, "fp8"}});
enum class SpecMethod : std::uint8_t { none, draft_model, ngram, eagle };
inline constexpr auto spec_method_names = make_names<SpecMethod>({{SpecMethod::none, "none"},
                                                                  {SpecMethod::draft_model, "draft_model"},
                                                                  {SpecMethod::ngram, "ngram"},
                                                                  {SpecMethod::eagle, "eagle"}});

// One replica's deployment: the model on tp x pp GPUs of `cluster` (ranks 0 .. tp*pp-1, TP
// innermost as vLLM places them), priced by `cost_model` (BF16 kernels, the training roofline
// by default) and `gemm_cost_model` (the quantized GEMMs at their precision's peak).
struct ServingDeployment {
  ModelSpec model;
  Cluster cluster;
  CostModelPtr cost_model;       // null: default_cost_model(gpu, bf16)
  CostModelPtr gemm_cost_model;  // null: the roofline at the quantization's peak (gemm_peak_flops)
  CollectiveOptions collectives;
  // A profile's measured collective curves (/tables/collectives), consulted before the
  // estimator where they cover a call; null: none.
  std::shared_ptr<const std::vector<MeasuredCollective>> measured_collectives;
  ProfileServing overhead;  // host costs and non-torch memory (the GPU's profile)
  int tp = 1;
  int pp = 1;
  bool expert_parallel = false;  // MoE experts split over the TP ranks instead of sharded
  Quantization quantization = Quantization::none;
  KvCacheDtype kv_dtype = KvCacheDtype::automatic;
  bool cuda_graphs = true;  // !enforce_eager
  // TP all-reduces up to max_bytes run the framework's own kernels (vLLM's custom all-reduce,
  // TRT-LLM's one-shot / two-shot) where they apply; NCCL runs the rest. !disable_custom_all_reduce.
  bool custom_all_reduce = true;
  double custom_all_reduce_max_bytes = 8.0 * 1024 * 1024;
  int max_cuda_graph_batch = 512;              // largest decode batch captured (vLLM: 512)
  std::int64_t max_seq_len_to_capture = 8192;  // longer contexts run eagerly (vLLM v0)
  SpecMethod spec_method = SpecMethod::none;
  std::optional<ModelSpec> draft;  // draft_model: the proposer (runs at the same tp)

  int ep() const { return expert_parallel && model.moe.enabled() ? tp : 1; }
  int gpus() const { return tp * pp; }
};

// Bytes per parameter of a quantized GEMM weight, scales included (w4a16: one BF16 scale per
// group of 128, as AWQ/GPTQ; fp4: one FP8 scale per 16, NVFP4).
double weight_bytes_per_param(Quantization q);
// The same for a routed expert's GEMM weight: mxfp4's 4.25 bits (E2M1 and an E8M0 scale per
// 32), else weight_bytes_per_param.
double expert_weight_bytes_per_param(Quantization q);
// KV cache bytes per element.
double kv_bytes_per_elem(KvCacheDtype d);
// The tensor peak the quantized GEMMs run at, FLOP/s (INT8: the FP8 figure on Hopper and later,
// where NVIDIA quotes equal dense INT8 TOPS; twice BF16 on Ampere and Ada; FP4: twice FP8 on
// Blackwell), 0 where the GPU cannot run it.
double gemm_peak_flops(const GpuSpec& gpu, Quantization q);
// The deployment with its null cost models filled in from the GPU's shipped profile.
ServingDeployment with_default_cost_models(ServingDeployment d);
// The deployment priced by profile `p` (a scenario's /profile): the roofline's coefficients for
// both cost models (the GEMMs' at the quantization's peak), the profile's measured tables where
// it has them (kernels of a measured shape at their measured time, as training prices them:
// profile_cost_model; BF16 GEMMs only, a quantized GEMM keeps the roofline; collectives inside a
// measured curve), and the host costs and non-torch memory of p's /serving section.
ServingDeployment with_profile(ServingDeployment d, const Profile& p);

inline constexpr std::string_view spec_method_choices[] = {"draft_model", "ngram", "eagle"};

inline constexpr ParamDecl serving_deployment_params[] = {
    {.key = "tensor_parallel_size",
     .type = ParamType::integer,
     .def = 1,
     .min = 1,
     .max = 1024,
     .unit = "GPUs",
     .doc = "tensor-parallel ranks of the replica; divides the attention heads and KV heads",
     .source = "vLLM --tensor-parallel-size"},
    {.key = "pipeline_parallel_size",
     .type = ParamType::integer,
     .def = 1,
     .min = 1,
     .max = 1024,
     .unit = "stages",
     .doc = "pipeline stages of the replica; at most the layers",
     .source = "vLLM --pipeline-parallel-size"},
    {.key = "enable_expert_parallel",
     .type = ParamType::boolean,
     .def = 0,
     .doc = "MoE: experts split over the TP ranks (EP = TP) instead of each expert sharded",
     .source = "vLLM --enable-expert-parallel"},
    {.key = "quantization",
     .type = ParamType::choice,
     .def_name = "none",
     .doc = "GEMM precision: none (BF16), fp8/int8 (W8A8), w4a16/w8a16 (weight-only), fp4 (NVFP4, Blackwell), "
            "mxfp4 (MoE experts only, as gpt-oss ships; the rest BF16)",
     .source = "vLLM --quantization",
     .choices = quantization_names.names},
    {.key = "kv_cache_dtype",
     .type = ParamType::choice,
     .def_name = "auto",
     .doc = "KV cache element type: auto (the model's, BF16) or fp8",
     .source = "vLLM --kv-cache-dtype",
     .choices = kv_cache_dtype_names.names},
    {.key = "disable_custom_all_reduce",
     .type = ParamType::boolean,
     .def = 0,
     .doc = "TP all-reduces all through NCCL; otherwise those of at most custom_all_reduce_max_bytes inside one "
            "NVSwitch node (2, 4, 6 or 8 ranks) run the framework's one-shot / two-shot kernels",
     .source = "vLLM --disable-custom-all-reduce"},
    {.key = "custom_all_reduce_max_bytes",
     .type = ParamType::number,
     .def = 8388608,
     .min = 0,
     .max = 1e12,
     .unit = "bytes",
     .doc = "largest all-reduce the custom kernels take (their peer buffer); larger ones go to NCCL",
     .source = "vLLM custom_all_reduce.py max_size: 8 MiB; TensorRT-LLM's workspace: 8 MB above 2 ranks, 16 MB at 2"},
    {.key = "enforce_eager",
     .type = ParamType::boolean,
     .def = 0,
     .doc = "no CUDA graphs: every iteration pays the eager host overhead",
     .source = "vLLM --enforce-eager"},
    {.key = "max_cuda_graph_batch_size",
     .type = ParamType::integer,
     .def = 512,
     .min = 1,
     .max = 1 << 20,
     .unit = "sequences",
     .doc = "largest decode batch captured as a CUDA graph",
     .source = "vLLM: cudagraph capture sizes up to 512 (max_num_seqs caps them)"},
    {.key = "max_seq_len_to_capture",
     .type = ParamType::integer,
     .def = 8192,
     .min = 1,
     .max = 1ll << 30,
     .unit = "tokens",
     .doc = "decode batches with a longer context run eagerly",
     .source = "vLLM --max-seq-len-to-capture"},
    {.key = "speculative_config",
     .type = ParamType::object,
     .doc = "the speculative proposer (method, model); num_speculative_tokens and acceptance are the scheduler's",
     .computed = "none"},
};

inline constexpr ParamDecl speculative_config_params[] = {
    {.key = "method",
     .type = ParamType::choice,
     .doc = "draft_model: a smaller model proposes; ngram: prompt lookup on the CPU; eagle: a one-layer head",
     .source = "vLLM speculative_config.method",
     .required = true,
     .choices = spec_method_choices},
    {.key = "model",
     .type = ParamType::string,
     .doc = "draft_model: the draft's name in the model catalog",
     .source = "vLLM speculative_config.model"},
};

// Reads the deployment keys of `o` (a /serving object; with check_keys false its other keys are
// the scheduler's, checked by the caller) for `model` on `cluster`, whose profile gives the host
// costs. Throws InputError with the key's pointer: TP not dividing the heads or KV heads, TP x PP
// beyond the cluster or PP beyond the layers, expert parallelism on a dense model, a
// quantization the GPU cannot run (fp8 without FP8 tensor cores, fp4 off Blackwell), a draft
// model not in `models` or with another vocabulary.
ServingDeployment deployment_from_json(const JsonObject& o, const ModelSpec& model, const Cluster& cluster,
                                       const ModelCatalog& models, bool check_keys = false);

}  // namespace ctwin
