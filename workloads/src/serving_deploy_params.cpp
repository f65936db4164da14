#include "workloads/serving_deploy_params.hpp"

#include <string>

#include "sim/error.hpp"

namespace ctwin {

double weight_bytes_per_param(Quantization q) {
  switch (q) {
    case Quantization::none:
    case Quantization::mxfp4:  // its other GEMMs
      return 2;
    case Quantization::fp8:
    case Quantization::int8:
    case Quantization::w8a16:
      return 1;  // per-channel or per-tensor scales: negligible
    case Quantization::w4a16:
      return 0.5 + 2.0 / 128;  // AWQ/GPTQ: one 16-bit scale per group of 128 (zeros packed beside)
    case Quantization::fp4:
      return 0.5 + 1.0 / 16;  // NVFP4: one FP8 E4M3 scale per 16 elements
  }
  return 2;
}

double expert_weight_bytes_per_param(Quantization q) {
  return q == Quantization::mxfp4 ? 0.5 + 1.0 / 32 : weight_bytes_per_param(q);
}

double kv_bytes_per_elem(KvCacheDtype d) { return d == KvCacheDtype::fp8 ? 1 : 2; }

double gemm_peak_flops(const GpuSpec& gpu, Quantization q) {
  switch (q) {
    case Quantization::none:
    case Quantization::w4a16:
    case Quantization::w8a16:
    case Quantization::mxfp4:
      // Weight-only kernels (Marlin) dequantize to BF16 and multiply at its peak.
      return gpu.peak_flops(Dtype::bf16);
    case Quantization::fp8:
      return gpu.peak_flops(Dtype::fp8);
    case Quantization::int8:
      return gpu.int8_tops * 1e12;  // the GPU catalog's, with its source
    case Quantization::fp4:
      return gpu.fp4_tflops * 1e12;  // 0 before Blackwell
  }
  return 0;
}

ServingDeployment with_default_cost_models(ServingDeployment d) {
  const GpuSpec& gpu = d.cluster.spec.gpu;
  if (!d.cost_model) d.cost_model = default_cost_model(gpu, Dtype::bf16);
  if (!d.gemm_cost_model) {
    switch (d.quantization) {
      case Quantization::none:
      case Quantization::w4a16:
      case Quantization::w8a16:
      case Quantization::mxfp4:
        d.gemm_cost_model = d.cost_model;
        break;
      case Quantization::fp8:
        d.gemm_cost_model = default_cost_model(gpu, Dtype::fp8);
        break;
      case Quantization::int8:
      case Quantization::fp4: {
        // The profile's roofline coefficients at the precision's datasheet peak.
        ComputeModel cm = default_compute_model(gpu, Dtype::bf16);
        cm.peak_flops = gemm_peak_flops(gpu, d.quantization);
        d.gemm_cost_model = std::make_shared<RooflineCostModel>(cm);
        break;
      }
    }
  }
  return d;
}

ServingDeployment with_profile(ServingDeployment d, const Profile& p) {
  const GpuSpec& gpu = d.cluster.spec.gpu;
  const ComputeModel bf16 = compute_model(p, gpu, Dtype::bf16);
  d.cost_model = profile_cost_model(p, gpu, Dtype::bf16);
  if (d.quantization == Quantization::none || d.quantization == Quantization::mxfp4) {
    d.gemm_cost_model = d.cost_model;
  } else {
    ComputeModel gemm = bf16;
    gemm.peak_flops = gemm_peak_flops(gpu, d.quantization);
    d.gemm_cost_model = std::make_shared<RooflineCostModel>(gemm);
  }
  d.measured_collectives = p.tables.collectives.empty()
                               ? nullptr
                               : std::make_shared<const std::vector<MeasuredCollective>>(p.tables.collectives);
  d.overhead = p.serving;
  return d;
}

ServingDeployment deployment_from_json(const JsonObject& o, const ModelSpec& model, const Cluster& cluster,
                                       const ModelCatalog& models, bool check_keys) {
  const ParamReader r(o, serving_deployment_params, check_keys);
  ServingDeployment d;
  d.model = model;
  d.cluster = cluster;
  d.overhead = builtin_profile(cluster.spec.gpu.name).serving;
  if (model.is_generic() || model.layers <= 0) {
    throw InputError(o.file(), o.path(), "the model is not a transformer", "a transformer model to serve");
  }
  if (model.attention_window > 0 && model.full_attention_every <= 0) {
    // The KV cache names and prefix-caches the full-attention layers' pages and counts the
    // windowed layers' beside them (kv_cache.hpp KvWindow): with no full layer there is nothing
    // to name.
    throw InputError(
        o.file(), "/model/full_attention_every",
        "0 (every layer windowed, attention_window " + std::to_string(model.attention_window) + ") in serving",
        "a model with some full-attention layers (full_attention_every >= 1), or attention_window 0");
  }
  d.tp = static_cast<int>(r.integer("tensor_parallel_size"));
  d.pp = static_cast<int>(r.integer("pipeline_parallel_size"));
  d.expert_parallel = r.boolean("enable_expert_parallel");
  d.quantization = r.choice("quantization", quantization_names);
  d.kv_dtype = r.choice("kv_cache_dtype", kv_cache_dtype_names);
  d.cuda_graphs = !r.boolean("enforce_eager");
  d.custom_all_reduce = !r.boolean("disable_custom_all_reduce");
  d.custom_all_reduce_max_bytes = r.number("custom_all_reduce_max_bytes");
  d.max_cuda_graph_batch = static_cast<int>(r.integer("max_cuda_graph_batch_size"));
  d.max_seq_len_to_capture = r.integer("max_seq_len_to_capture");
  const std::string tp_text = std::to_string(d.tp);
  if (model.heads % d.tp != 0) {
    o.fail("tensor_parallel_size",
           "found " + tp_text + ", which does not divide the " + std::to_string(model.heads) + " attention heads of " +
               model.name,
           "a divisor of the attention heads");
  }
  const int kvh = model.kv_heads > 0 ? model.kv_heads : model.heads;
  if (!model.mla.enabled() && kvh % d.tp != 0 && d.tp % kvh != 0) {
    o.fail("tensor_parallel_size",
           "found " + tp_text + ": the " + std::to_string(kvh) + " KV heads can be neither split nor replicated evenly",
           "a divisor or a multiple of the KV heads (vLLM replicates KV heads when tp exceeds them)");
  }
  if (d.pp > model.layers) {
    o.fail(
        "pipeline_parallel_size",
        "found " + std::to_string(d.pp) + ", more stages than the model's " + std::to_string(model.layers) + " layers",
        "at most the layers");
  }
  if (1ll * d.tp * d.pp > cluster.gpu_count()) {
    o.fail(r.has("pipeline_parallel_size") ? "pipeline_parallel_size" : "tensor_parallel_size",
           "tensor_parallel_size x pipeline_parallel_size = " + std::to_string(1ll * d.tp * d.pp) + " GPUs, but the " +
               "cluster has " + std::to_string(cluster.gpu_count()),
           "a replica that fits the cluster");
  }
  if (d.expert_parallel && !model.moe.enabled()) {
    o.fail("enable_expert_parallel", "found true, but " + model.name + " is not a mixture of experts",
           "false for a dense model");
  }
  if (d.quantization == Quantization::mxfp4 && !model.moe.enabled()) {
    o.fail("quantization", "found \"mxfp4\", but " + model.name + " is not a mixture of experts",
           "a mixture of experts (mxfp4 quantizes the routed experts), or another method");
  }
  if (gemm_peak_flops(cluster.spec.gpu, d.quantization) <= 0) {
    o.fail("quantization",
           std::string("found \"") + quantization_names.name(d.quantization) + "\", which " + cluster.spec.gpu.name +
               " cannot run (fp8 needs FP8 tensor cores: Hopper, Ada or later; fp4 needs Blackwell)",
           "\"none\", \"int8\", \"w4a16\" or \"w8a16\"");
  }
  if (o.has("speculative_config")) {
    const JsonObject so = o.object("speculative_config");
    const ParamReader sr(so, speculative_config_params);
    const std::string method = sr.choice("method");
    d.spec_method = *spec_method_names.parse(method);
    if (d.spec_method == SpecMethod::draft_model) {
      if (!sr.has("model")) so.fail("model", "missing", "the draft model's name in the model catalog");
      const std::string name = sr.string("model");
      auto it = models.models.find(name);
      if (it == models.models.end()) {
        so.fail("model", "found \"" + name + "\", not in the model catalog", "a catalog model name");
      }
      const ModelSpec& draft = it->second;
      if (draft.is_generic() || draft.vocab != model.vocab) {
        so.fail("model",
                "found \"" + name + "\" with vocabulary " + std::to_string(draft.vocab) + ", but " + model.name +
                    " has " + std::to_string(model.vocab),
                "a transformer draft sharing the target's tokenizer");
      }
      if (draft.heads % d.tp != 0) {
        so.fail("model",
                "found \"" + name + "\" with " + std::to_string(draft.heads) + " heads, not divisible by tp " + tp_text,
                "a draft whose heads the target's tensor_parallel_size divides");
      }
      if (draft.attention_window > 0 || model.attention_window > 0) {
        so.fail(
            "model",
            "a draft model with " + std::string(model.attention_window > 0 ? "a windowed target" : "a windowed draft"),
            "method \"eagle\" or \"ngram\" with sliding-window models (a draft pass over the target's window is "
            "not modelled)");
      }
      d.draft = draft;
    } else if (sr.has("model") && d.spec_method == SpecMethod::ngram) {
      so.fail("model", "given for the ngram method, which has no model", "no model with \"ngram\"");
    }
  }
  return d;
}

}  // namespace ctwin
