#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "scenario.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const TrainingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;

// Each case reproduces a published measurement (its source is in the file and in
// docs/validation.md). One set of per-GPU defaults serves all of them. The list is explicit so a
// case joins the bound only once it is reviewed and documented.
TEST_CASE("every validation case is within 10% of its published figure, and the mean within 5%") {
  const auto dir = std::filesystem::path(CTWIN_SOURCE_DIR) / "scenarios" / "validation";
  const char* cases[] = {
      "llama3-405b-16384xh100", "llama3-405b-8192xh100", "megatron-gpt-1.7b-a100", "megatron-gpt-145b-a100",
      "megatron-gpt-18b-a100", "megatron-gpt-3.6b-a100", "megatron-gpt-39b-a100", "megatron-gpt-7.5b-a100",
      "megatron-gpt-76b-a100", "mixtral-8x7b-64xh100", "mpt-30b-8xh100", "mpt-70b-64xh100",
      // FSDP weak scaling on A100-40GB (docs/training.md, Sharded data parallelism)
      "mpt-7b-16xa100-40gb", "mpt-7b-128xa100-40gb", "mpt-13b-16xa100-40gb", "mpt-13b-128xa100-40gb",
      "mpt-70b-128xa100-40gb",
      // FP8 (Transformer Engine) on H100, docs/fidelity-fp8.md
      "mbridge-llama3-70b-fp8cs-64xh100", "nemo-gpt3-175b-fp8-128xh100", "nemo-gpt3-175b-fp8-512xh100",
      "nemo-gpt3-20b-fp8-64xh100", "nemo-gpt3-5b-fp8-64xh100", "nemo-llama2-13b-fp8-16xh100",
      "nemo-llama2-70b-fp8-64xh100", "nemo-llama2-7b-fp8-8xh100", "nemo-llama3-70b-fp8-64xh100"};
  double sum = 0;
  int n = 0;
  for (const char* name : cases) {
    const auto file = dir / (std::string(name) + ".json");
    const Scenario sc = load_scenario(file.string());
    REQUIRE(sc.validation.present());
    const auto r = simulate_training(training_job(sc).model, training_job(sc).training, build_cluster(sc.cluster), {});
    const double err = (predicted_metric(sc, r) - sc.validation.published) / sc.validation.published;
    CAPTURE(name);
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.10);
    sum += std::fabs(err);
    ++n;
  }
  CHECK(n >= 9);
  CHECK(sum / n <= 0.05);
}
