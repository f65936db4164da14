// Whether a training layout fits its model and cluster: tp*pp*dp*cp against the GPU count,
// heads and KV heads against tp, sequence chunks against cp, layers against pp and virtual
// stages, experts against ep, the batch against micro_batch*dp. Pure: it returns the problems
// (the scenario loader maps each field to its JSON pointer; the simulator can refuse a bad
// layout the same way), first the one a user should fix first.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "topology/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

struct LayoutProblem {
  // The key at fault, relative to the training object: "parallelism/tp", "global_batch", ...
  std::string field;
  std::string what;      // what is wrong, with the values found
  std::string expected;  // what would be accepted
};

// A scenario's check: tp*pp*dp*cp must equal the cluster's GPUs.
std::vector<LayoutProblem> check_training_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster);

// What the simulator cannot run, thrown by build_training_step: the same checks, except that a
// layout may use only the first tp*pp*dp*cp GPUs of a larger cluster.
struct LayoutError : std::invalid_argument {
  explicit LayoutError(std::vector<LayoutProblem> problems);
  std::vector<LayoutProblem> problems;  // first the one to fix first
};
void require_simulable_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster);

}  // namespace ctwin
