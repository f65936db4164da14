#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const TrainingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// A validation case simulated as `ctwin validate` does, with optional overrides: its result and
// its relative error against the published figure.
struct CaseRun {
  TrainingResult r;
  double error = 0;
};

CaseRun run_case(const std::string& name, const std::vector<Override>& overrides = {}) {
  const auto file = std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" / (name + ".json");
  const Scenario sc = load_scenario(file.string(), overrides);
  REQUIRE(sc.validation.present());
  const auto job = training_job(sc);
  CaseRun c;
  c.r = simulate_training(job.model, job.training, build_cluster(sc.cluster), {});
  c.error = (predicted_metric(sc, c.r) - sc.validation.published) / sc.validation.published;
  return c;
}

// NeMo 24.03's long-sequence table on H100: Llama 2 7B FP8, 4K to 1M tokens, CP to 32.
const std::vector<std::string> kNemoH100LongSequence = {
    "nemo-llama2-7b-fp8-4k-4xh100",     "nemo-llama2-7b-fp8-8k-8xh100",     "nemo-llama2-7b-fp8-16k-16xh100",
    "nemo-llama2-7b-fp8-32k-32xh100",   "nemo-llama2-7b-fp8-64k-64xh100",   "nemo-llama2-7b-fp8-128k-128xh100",
    "nemo-llama2-7b-fp8-256k-256xh100", "nemo-llama2-7b-fp8-512k-512xh100", "nemo-llama2-7b-fp8-1024k-1024xh100"};

// B200's ten FP8 training cases: the same page's B200 table (NeMo 25.04, Llama 3 8B, 8K to 1M
// tokens) and Megatron-Bridge 25.11's two rows. B200's GEMM efficiency is fitted on them.
const std::vector<std::string> kB200 = {"nemo-llama3-8b-fp8-8k-2xb200",     "nemo-llama3-8b-fp8-16k-4xb200",
                                        "nemo-llama3-8b-fp8-32k-8xb200",    "nemo-llama3-8b-fp8-64k-16xb200",
                                        "nemo-llama3-8b-fp8-128k-32xb200",  "nemo-llama3-8b-fp8-256k-64xb200",
                                        "nemo-llama3-8b-fp8-512k-128xb200", "nemo-llama3-8b-fp8-1024k-256xb200",
                                        "mbridge-llama3-8b-fp8cs-8xb200",   "mbridge-llama31-405b-fp8cs-128xb200"};

}  // namespace

// Each case reproduces a published measurement (its source is in the file and in
// docs/validation.md). One set of per-GPU defaults serves all of them. The list is explicit so a
// case joins the bound only once it is reviewed and documented.
// A published run ran, so it fit in its GPUs' memory: a case predicted out of memory fails too.
TEST_CASE("every validation case is within 10% of its published figure, fits in memory, and the mean is within 5%") {
  std::vector<std::string> cases = {
      "llama3-405b-128k-16384xh100", "llama3-405b-16384xh100", "llama3-405b-8192xh100", "megatron-gpt-1.7b-a100",
      "megatron-gpt-145b-a100", "megatron-gpt-18b-a100", "megatron-gpt-3.6b-a100", "megatron-gpt-39b-a100",
      "megatron-gpt-7.5b-a100", "megatron-gpt-76b-a100", "mixtral-8x7b-64xh100", "mpt-30b-8xh100", "mpt-70b-64xh100",
      // FSDP weak scaling on A100-40GB (docs/training.md, Sharded data parallelism)
      "mpt-7b-16xa100-40gb", "mpt-7b-128xa100-40gb", "mpt-13b-16xa100-40gb", "mpt-13b-128xa100-40gb",
      "mpt-70b-128xa100-40gb",
      // MoE with FSDP2 and expert parallelism (NeMo AutoModel, DeepEP dispatch)
      "qwen3-30b-a3b-8xh100",
      // FSDP on H100: 8 GPUs (Triton attention) and LLM Foundry's large-scale table at 256 and 512
      "mpt-7b-8xh100", "mpt-13b-8xh100", "mpt-13b-256xh100-fsdp", "mpt-13b-512xh100-fsdp", "mpt-30b-256xh100-fsdp",
      "mpt-30b-512xh100-fsdp", "mpt-70b-256xh100-fsdp", "mpt-70b-512xh100-fsdp",
      // FP8 (Transformer Engine) on H100, docs/fidelity-fp8.md
      "mbridge-llama3-70b-fp8cs-64xh100", "nemo-gpt3-175b-fp8-128xh100", "nemo-gpt3-175b-fp8-512xh100",
      "nemo-gpt3-20b-fp8-64xh100", "nemo-gpt3-5b-fp8-64xh100", "nemo-llama2-13b-fp8-16xh100",
      "nemo-llama2-70b-fp8-64xh100", "nemo-llama2-7b-fp8-8xh100", "nemo-llama3-70b-fp8-64xh100",
      // Nemotron: squared ReLU, 256K vocabulary (the last stage's LM head and loss), 340B with BF16 optimizer states
      "nemo-nemotron3-8b-fp8-64xh100", "nemo-nemotron3-22b-fp8-64xh100", "nemo-nemotron4-340b-fp8-128xh100",
      // Megatron-Bridge 25.11: Llama 3.1 405B on 1,024 H100 (its B200 rows are in kB200)
      "mbridge-llama31-405b-fp8cs-1024xh100",
      // ... and Llama 3 8B on 8 H100: block recomputation of 5 layers, FP8 parameters
      "mbridge-llama3-8b-fp8cs-rl5-8xh100",
      // MoE parallel folding (etp 1): Qwen3-235B-A22B's EP 32 over TP 2 x DP 16 (docs/training.md)
      "mbridge-qwen3-235b-a22b-fp8cs-256xh100"};
  // Long sequences (docs/validation.md, "Long sequences") and B200's fitted set.
  cases.insert(cases.end(), kNemoH100LongSequence.begin(), kNemoH100LongSequence.end());
  cases.insert(cases.end(), kB200.begin(), kB200.end());
  double sum = 0;
  int n = 0;
  for (const auto& name : cases) {
    const CaseRun c = run_case(name);
    CAPTURE(name);
    CAPTURE(c.error);
    CHECK(std::fabs(c.error) <= 0.10);
    CAPTURE(c.r.memory.peak);
    CHECK_FALSE(c.r.memory.oom);
    sum += std::fabs(c.error);
    ++n;
  }
  CHECK(n >= 9);
  CHECK(sum / n <= 0.05);
}

// Megatron-Bridge 25.11's Llama 3 8B FP8 recipe on 8 H100 (scripts/performance at v0.2.0):
// recompute_num_layers 5 (block) and the FP8-CS precision's fp8_param_gather. The run ran, so it
// fit: with a BF16 copy beside each FP8 weight it would not, and recomputing every layer would
// cost about a fifth of the step, where the block of 5 of 32 layers costs a few percent.
TEST_CASE("Megatron-Bridge's H100 Llama 3 8B recipe: 5 of 32 layers recomputed, FP8 weights only; within 10%, fits") {
  const std::string name = "mbridge-llama3-8b-fp8cs-rl5-8xh100";
  const CaseRun c = run_case(name);
  CHECK(std::fabs(c.error) <= 0.10);
  CHECK_FALSE(c.r.memory.oom);
  const CaseRun bf16_copy = run_case(name, {parse_override("/training/precision/fp8_param_gather=false")});
  CHECK(bf16_copy.r.memory.oom);
  // A BF16 copy of the linear weights: 2 bytes each of Llama 3 8B's 6,979,321,856 (32 layers of
  // 4096 x (4096 + 1024 + 1024 + 4096) + 3 x 4096 x 14336).
  CHECK(bf16_copy.r.memory.weights - c.r.memory.weights == rel_approx(2 * 6979321856.0, 1e-9));
  const auto file = std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" / (name + ".json");
  const Scenario sc = load_scenario(file.string(), {});
  const auto job = training_job(sc);
  const Cluster cl = build_cluster(sc.cluster);
  auto step_s = [&](Recompute rc, RecomputeMethod method) {
    TrainingConfig t = job.training;
    t.recompute = rc;
    t.recompute_method = method;
    return simulate_training(job.model, t, cl, {}).step_time_s;
  };
  const double none = step_s(Recompute::none, RecomputeMethod::uniform);
  CHECK(step_s(Recompute::full, RecomputeMethod::block) == c.r.step_time_s);
  const double block_cost = c.r.step_time_s / none - 1;
  const double full_cost = step_s(Recompute::full, RecomputeMethod::uniform) / none - 1;
  CAPTURE(block_cost);
  CAPTURE(full_cost);
  // Recomputing 5 of 32 layers costs 5/32 of recomputing all 32 (within a tenth: the rest of the
  // step, the loss and the optimizer, is not recomputed either way).
  CHECK(block_cost == rel_approx(5.0 / 32 * full_cost, 0.1));
}

TEST_CASE("causal_tflops_per_gpu counts QK^T and PV over the causal half: Llama 3 8B at 8K keeps 88.9% of the FLOPs") {
  // Llama 3 8B per token: 6 x 7,504,658,432 matmul weights (8,030,261,248 less the 128256 x 4096
  // input embedding and the 65 x 4096 norm scales) = 45,027,950,592; attention 12 x 32 layers x
  // 8192 x 4096 = 12,884,901,888, of which the causal count keeps half.
  // (45,027,950,592 + 6,442,450,944) / (45,027,950,592 + 12,884,901,888).
  const auto file = std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" / "open" /
                    "nemo-llama3-8b-fp8-8xh100.json";
  const Scenario sc = load_scenario(file.string(), {parse_override("/validation/metric=causal_tflops_per_gpu")});
  TrainingResult r;
  r.tflops_per_gpu = 100;
  CHECK(predicted_metric(sc, r) == rel_approx(100 * 51470401536.0 / 57912852480.0, 1e-9));
}

// NVIDIA NeMo's long-sequence table (docs/source/performance/performance_long_sequence.md @9421f21a): Llama 2 7B
// FP8 on H100 from 4K to 1M tokens a sequence, each length on as many GPUs as it has thousands of tokens, context
// parallelism up to 32. Attention goes from 8% of the FLOPs the GPUs run (its causal half) at 4K to 95% at 1M, so the
// rows measure the attention kernel's rate. The launcher that ran them (24.03.01) set NVTE_FUSED_ATTN=0, so
// Transformer Engine ran flash-attn 2: FlashAttention-2's H100 rate (Dao 2023, not fitted here) holds every row; the
// later fused kernel's rate (flash) misses more the longer the sequence.
TEST_CASE(
    "NeMo's long-sequence table, 4K to 1M tokens: FlashAttention-2's rate holds every row within 5%, "
    "the later fused kernel's misses by up to 39%") {
  auto error = [](const std::string& name, const std::string& attention) {
    return run_case(name, {parse_override("/training/attention=" + attention)}).error;
  };
  double sum = 0;
  std::vector<double> later;
  for (const auto& name : kNemoH100LongSequence) {
    const double e = error(name, "flash2");
    CAPTURE(name);
    CAPTURE(e);
    CHECK(std::fabs(e) <= 0.05);
    sum += std::fabs(e);
    later.push_back(error(name, "flash"));
  }
  CHECK(sum / static_cast<double>(kNemoH100LongSequence.size()) <= 0.03);
  // At 4K attention is 8% of the FLOPs and either rate is within 10%; from 128K it is most of them
  // and the faster kernel is 28% to 39% ahead of the runs.
  CHECK(later.front() <= 0.10);
  for (std::size_t i = 5; i < later.size(); ++i) CHECK(later[i] >= 0.25);
  CHECK(later.back() - later.front() >= 0.25);
}

// B200's GEMM efficiency (BF16 and FP8 alike, topology/catalog/gpus.json) is fitted, worst error least, to its ten FP8
// training cases: NeMo 25.04's long-sequence table (Llama 3 8B, 8K to 1M tokens) and Megatron-Bridge 25.11's two rows.
// With Hopper's 0.62, which B200 took before, every one of them is 4% to 11% fast.
TEST_CASE("B200's fitted GEMM efficiency holds its ten FP8 training cases within 3%; Hopper's 0.62 puts all ten fast") {
  for (const auto& name : kB200) {
    CAPTURE(name);
    const double fitted = run_case(name).error;
    CHECK(std::fabs(fitted) <= 0.03);
    const double hopper = run_case(name, {parse_override("/catalog/gpus/B200/gemm_efficiency=0.62"),
                                          parse_override("/catalog/gpus/B200/fp8_gemm_efficiency=0.62")})
                              .error;
    CHECK(hopper >= 0.04);
    CHECK(hopper <= 0.11);
  }
}
