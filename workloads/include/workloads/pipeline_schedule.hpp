// The order in which one pipeline stage runs the forward and backward passes of a step's
// micro-batches: GPipe (Huang et al. 2019), 1F1B / PipeDream-Flush (Narayanan et al. 2021),
// Megatron-LM's interleaved 1F1B over virtual stages, and zero-bubble ZB-H1 (Qi et al. 2024).
// Pure functions, so the order can be checked against hand-worked schedules.
#pragma once

#include <vector>

#include "workloads/training.hpp"

namespace ctwin {

struct PipelineSlot {
  // forward; backward (the whole backward, or only the input gradient under zero-bubble);
  // weight: the deferred weight-gradient pass of a zero-bubble schedule.
  enum class Pass : char { forward = 'F', backward = 'B', weight = 'W' };
  int micro_batch = 0;
  int chunk = 0;  // model chunk (virtual stage = chunk * pp + stage); 0 unless interleaved
  Pass pass = Pass::forward;
  bool operator==(const PipelineSlot&) const = default;
};

// Stage `stage`'s order of work for gpipe, 1F1B and interleaved (virtual_stages > 1; with 1 it
// is 1F1B). GPipe: every forward, then every backward. 1F1B: pp - stage - 1 warm-up forwards,
// then one forward one backward, then the remaining backwards. Interleaved: Megatron-LM's
// order: (pp - stage - 1) * 2 + (v - 1) * pp warm-up chunk forwards (all of them when that
// reaches micro_batches x v), micro-batches taken in groups of pp per chunk.
// Zero-bubble depends on the passes' costs: use zero_bubble_orders (throws std::invalid_argument).
std::vector<PipelineSlot> pipeline_order(PipelineSchedule schedule, int pp, int stage, int micro_batches,
                                         int virtual_stages = 1);

// Every stage's zero-bubble (ZB-H1) order from a greedy list schedule at the given costs of
// one stage's forward (tf), input-gradient backward (tb) and weight-gradient pass (tw): a
// stage runs a ready B first, else a ready F while it holds fewer than pp - stage
// micro-batches (1F1B's memory), else a pending W to fill what would be a bubble.
std::vector<std::vector<PipelineSlot>> zero_bubble_orders(int pp, int micro_batches, double tf, double tb, double tw);

// The most forwards of `order` whose backward has not yet run, at any point: the
// (micro-batch, chunk) activations the stage holds at its peak. In chunk units: divide by
// virtual_stages for whole-stage micro-batches.
int max_in_flight(const std::vector<PipelineSlot>& order);

}  // namespace ctwin
