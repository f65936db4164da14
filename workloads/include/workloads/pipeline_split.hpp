// How a model's layers are split over pipeline stages (and, for the interleaved schedule,
// over each stage's model chunks): evenly, as a list of layers per virtual stage
// (`pipeline_layers`), with Megatron-LM's uneven first and last stages
// (decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers, the rest even over the
// middle stages), or evenly with the embedding and/or the loss counted as one layer each
// (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split). Everything that
// needs a stage's layers (the step program, stage memory, the report) asks this one function.
#pragma once

#include <vector>

#include "workloads/training.hpp"

namespace ctwin {

struct PipelineSplit {
  int pp = 1, v = 1;        // stages, model chunks per stage
  std::vector<int> layers;  // per virtual stage vs = chunk * pp + stage
  std::vector<int> first;   // the first layer of each virtual stage (prefix sums of `layers`)
  // The decoder layers stage `stage` holds, over all its chunks.
  int stage_layers(int stage) const;
};

// Chunks per stage: virtual_stages under the interleaved schedule, else 1.
int chunks_per_stage(const Parallelism& par);

// The split of `model_layers` under `par`. Assumes par passed check_training_layout (the split
// problems are reported there); where it did not, a stage never gets a negative count.
PipelineSplit pipeline_split(int model_layers, const Parallelism& par);

// For each of the `model_layers` decoder layers, whether cfg's recomputation reruns its whole
// forward in backward (recomputes_layer, by its index within its model chunk).
std::vector<bool> recomputed_layers(int model_layers, const TrainingConfig& cfg);

}  // namespace ctwin
