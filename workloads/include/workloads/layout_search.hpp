// The training layouts `ctwin sweep` considers for "parallelism": "auto": every combination of
// TP, PP, CP, EP, virtual stages, ZeRO stage, micro-batch size and recomputation that the layout
// check accepts for a model on a cluster (tp inside a node); which of them cannot fit in GPU
// memory, and why; and a lower bound on each one's step time, cheap to compute, that lets a
// sweep skip a layout that cannot beat the ones it has already simulated (docs/sweep.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/cluster.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// The values each layout dimension may take; an empty list: every value the model and cluster
// allow (layout_space_defaults says which).
struct LayoutSpace {
  std::vector<int> tp;               // default: powers of two up to the GPUs of a node
  std::vector<int> pp;               // default: divisors of the GPU count up to the layer count
  std::vector<int> cp;               // default: powers of two up to 16
  std::vector<int> ep;               // default: MoE: divisors of the experts; dense: 1
  std::vector<int> virtual_stages;   // default: 1 (1F1B) and 2 to 8 (interleaved)
  std::vector<int> zero_stage;       // default: 0 and 1; 2 and 3 also without pipeline parallelism
  std::vector<int> micro_batch;      // default: 1, 2, 4, 8
  std::vector<Recompute> recompute;  // default: none, selective, full
};

// The layouts of `space` (its empty lists filled by the defaults above) that pass
// check_training_layout for `base`'s batch, sequence and precision on `cluster`, in a fixed order
// (tp, pp, cp, ep, virtual stages, ZeRO, micro-batch, recompute, each ascending). ZeRO 2 and 3 go
// only with pp 1 (DeepSpeed and FSDP do not shard across a Megatron pipeline); sequence
// parallelism is on wherever tp > 1. Every other field comes from `base`.
std::vector<TrainingConfig> enumerate_training_layouts(const ModelSpec& m, const TrainingConfig& base,
                                                       const Cluster& cluster, const LayoutSpace& space);

// Why a layout cannot run on `capacity_bytes` GPUs: the stage over capacity, by how much, and its
// largest memory terms; nullopt when it fits.
std::optional<std::string> memory_refusal_reason(const MemoryBreakdown& mb);

// A lower bound on simulate_training's step time, from the step program of a few micro-batches:
// a GPU runs its compute stream one kernel at a time, so the step takes at least the busiest
// GPU's kernels (each micro-batch's the same, scaled to the step's count, plus the optimizer)
// and, for a non-interleaved pipeline, the forwards of the stages before it and the backwards
// after. Communication, bubbles inside the schedule and contention only add. nullopt where it is
// not a bound: kernel noise (a kernel may run faster than its modelled time).
std::optional<double> step_time_lower_bound_s(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                              const TrainingOptions& opt);

// A short name for a layout: "TP8 PP4 VP5 DP32 CP1 EP1 ZeRO1 mb1 rc:selective".
std::string layout_label(const Parallelism& par, int micro_batch, Recompute rc);

}  // namespace ctwin
