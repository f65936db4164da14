// The /serving deployment keys: read through their ParamDecl table, every bad value an
// InputError naming its JSON pointer.
#include <doctest/doctest.h>

#include <string>

#include "sim/error.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/serving_deploy_params.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

const std::string kFile = "scenario.json";

Cluster preset(const std::string& name) {
  ClusterSpec s;
  REQUIRE(preset_cluster(name, 1, builtin_gpus(), s));
  return build_cluster(s);
}

ServingDeployment read(const std::string& text, const std::string& model = "llama3-8b",
                       const std::string& cluster = "dgx-h100") {
  const Json j = Json::parse(text);
  const JsonObject o(j, "/serving", kFile);
  const ModelCatalog cat = builtin_models();
  return deployment_from_json(o, cat.models.at(model), preset(cluster), cat, true);
}

// The pointer of the InputError reading `text` throws.
std::string error_path(const std::string& text, const std::string& model = "llama3-8b",
                       const std::string& cluster = "dgx-h100") {
  try {
    read(text, model, cluster);
  } catch (const InputError& e) {
    return e.path;
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("serving deployment keys: vLLM's names and defaults") {
  const ServingDeployment d = read("{}");
  CHECK(d.tp == 1);
  CHECK(d.pp == 1);
  CHECK(d.quantization == Quantization::none);
  CHECK(d.kv_dtype == KvCacheDtype::automatic);
  CHECK(d.cuda_graphs);
  CHECK(d.max_cuda_graph_batch == 512);
  CHECK(d.spec_method == SpecMethod::none);
  CHECK(d.custom_all_reduce);
  CHECK(d.custom_all_reduce_max_bytes == 8388608);  // vLLM's custom all-reduce buffer, 8 MiB
  // The H100 profile's host costs.
  CHECK(d.overhead.iteration_overhead_graph_us == rel_approx(300, 1e-12));
  const ServingDeployment e = read(
      R"({"tensor_parallel_size": 2, "quantization": "fp8", "kv_cache_dtype": "fp8", "enforce_eager": true,
          "speculative_config": {"method": "draft_model", "model": "llama3.2-1b"}})");
  CHECK(e.tp == 2);
  CHECK(e.quantization == Quantization::fp8);
  CHECK(e.kv_dtype == KvCacheDtype::fp8);
  CHECK_FALSE(e.cuda_graphs);
  const ServingDeployment t = read(R"({"disable_custom_all_reduce": true, "custom_all_reduce_max_bytes": 16e6})");
  CHECK_FALSE(t.custom_all_reduce);
  CHECK(t.custom_all_reduce_max_bytes == 16e6);
  REQUIRE(e.draft.has_value());
  CHECK(e.draft->layers == 16);
  const ServingDeployment m = read(R"({"tensor_parallel_size": 8, "enable_expert_parallel": true})", "mixtral-8x7b");
  CHECK(m.ep() == 8);
}

TEST_CASE("serving deployment keys: every bad value names its pointer") {
  // 32 heads: 3 does not divide them.
  CHECK(error_path(R"({"tensor_parallel_size": 3})") == "/serving/tensor_parallel_size");
  CHECK(error_path(R"({"tensor_parallel_size": 0})") == "/serving/tensor_parallel_size");
  // 16 GPUs on an 8-GPU node.
  CHECK(error_path(R"({"tensor_parallel_size": 8, "pipeline_parallel_size": 2})") == "/serving/pipeline_parallel_size");
  CHECK(error_path(R"({"pipeline_parallel_size": 33})") == "/serving/pipeline_parallel_size");
  CHECK(error_path(R"({"enable_expert_parallel": true})") == "/serving/enable_expert_parallel");
  // NVFP4 needs Blackwell; FP8 needs Hopper or Ada.
  CHECK(error_path(R"({"quantization": "fp4"})") == "/serving/quantization");
  CHECK(error_path(R"({"quantization": "fp8"})", "llama3-8b", "dgx-a100") == "/serving/quantization");
  CHECK(read(R"({"quantization": "int8"})", "llama3-8b", "dgx-a100").quantization == Quantization::int8);
  CHECK(read(R"({"quantization": "fp4"})", "llama3-8b", "dgx-b200").quantization == Quantization::fp4);
  CHECK(error_path(R"({"quantization": "awq"})") == "/serving/quantization");
  // MXFP4 quantizes a mixture of experts' routed experts: a dense model has none.
  CHECK(error_path(R"({"quantization": "mxfp4"})") == "/serving/quantization");
  CHECK(read(R"({"quantization": "mxfp4"})", "mixtral-8x7b").quantization == Quantization::mxfp4);
  CHECK(error_path(R"({"kv_cache_dtype": "int4"})") == "/serving/kv_cache_dtype");
  CHECK(error_path(R"({"custom_all_reduce_max_bytes": -1})") == "/serving/custom_all_reduce_max_bytes");
  CHECK(error_path(R"({"disable_custom_all_reduce": "yes"})") == "/serving/disable_custom_all_reduce");
  CHECK(error_path(R"({"speculative_config": {"method": "medusa"}})") == "/serving/speculative_config/method");
  CHECK(error_path(R"({"speculative_config": {"method": "draft_model"}})") == "/serving/speculative_config/model");
  CHECK(error_path(R"({"speculative_config": {"method": "draft_model", "model": "nope"}})") ==
        "/serving/speculative_config/model");
  // Mixtral's 32000-token vocabulary is not Llama 3's.
  CHECK(error_path(R"({"speculative_config": {"method": "draft_model", "model": "mixtral-8x7b"}})") ==
        "/serving/speculative_config/model");
  CHECK(error_path(R"({"tensor_paralel_size": 2})") == "/serving/tensor_paralel_size");
}

TEST_CASE("quantized GEMM peaks from the datasheets; weight bytes per parameter") {
  const GpuCatalog g = builtin_gpus();
  CHECK(gemm_peak_flops(g.gpus.at("A100-SXM-80GB"), Quantization::int8) == rel_approx(624e12, 1e-12));
  CHECK(gemm_peak_flops(g.gpus.at("H100-SXM"), Quantization::int8) == rel_approx(1979e12, 1e-12));
  CHECK(gemm_peak_flops(g.gpus.at("B200"), Quantization::fp4) == rel_approx(9000e12, 1e-12));
  CHECK(gemm_peak_flops(g.gpus.at("H100-SXM"), Quantization::fp4) == 0);
  CHECK(gemm_peak_flops(g.gpus.at("H100-SXM"), Quantization::w4a16) == rel_approx(989e12, 1e-12));
  CHECK(weight_bytes_per_param(Quantization::fp8) == 1);
  CHECK(weight_bytes_per_param(Quantization::w4a16) == rel_approx(0.515625, 1e-12));
  CHECK(kv_bytes_per_elem(KvCacheDtype::fp8) == 1);
}

TEST_CASE("with_profile: a scenario's profile sets the host costs and the roofline") {
  ServingDeployment d = read(R"({"quantization": "fp8"})");
  Profile p = builtin_profile("H100-SXM");
  p.serving.iteration_overhead_graph_us = 123;
  p.compute.gemm_efficiency = 0.5;
  d = with_profile(d, p);
  CHECK(d.overhead.iteration_overhead_graph_us == rel_approx(123, 1e-12));
  // A large FP8 GEMM at 0.5 of 1979 TFLOP/s (knee 64 on each dimension), plus the 2 us launch.
  OpCost op{OpKind::gemm, 2 * 8192.0 * 8192 * 8192, 0, 8192, 8192, 8192};
  const double knee = 8192.0 / (8192 + 64);
  CHECK(d.gemm_cost_model->op_seconds(op) == rel_approx(op.flops / (1979e12 * 0.5 * knee * knee * knee) + 2e-6, 1e-9));
}
