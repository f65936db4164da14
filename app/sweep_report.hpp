// What `ctwin sweep` prints and writes: the ranked table with each configuration's breakdown,
// every configuration as CSV and JSON, a plot as SVG, and the best configuration as the launch
// flags of its framework (Megatron-LM for training, vLLM for serving).
#pragma once

#include <string>
#include <vector>

#include "sweep.hpp"

namespace ctwin {

// The top-k table, the written layout's place, why the best beats the runner-up, and what was
// refused (out of memory, by dominant term; pruned by bound). Deterministic: no timings.
std::string sweep_report_text(const SweepResult& r);
OrderedJson sweep_report_json(const SweepResult& r);
// One line per configuration, in enumeration order; the union of every row's set keys as columns.
std::string sweep_report_csv(const SweepResult& r);
// The simulated configurations' objective, best first (at most 40 bars); or, for a sweep of one
// numeric axis, the objective against that axis.
std::string sweep_report_svg(const SweepResult& r);

// The flags a framework takes for a scenario's layout: Megatron-LM's pretrain_gpt.py for training
// (with torchrun's node counts), `vllm serve` for serving.
std::string launch_flags(const Scenario& sc);
// Megatron-LM's --pipeline-model-parallel-layout string for layers per virtual stage (virtual
// stage = chunk x pp + stage), the embedding in the first and the loss in the last.
std::string megatron_pipeline_layout(const std::vector<int>& layers);
// Megatron-LM's flags for how `model_layers` split over par's stages ("" without pipeline).
std::string pipeline_split_flags(int model_layers, const Parallelism& par);

}  // namespace ctwin
