// Llama-3-8B on one DGX H100 with the H100's shipped profile and a scheduler of 8K-token
// requests: the replica the serving tests (replicas, disaggregation) run real cost models on.
#pragma once

#include <doctest/doctest.h>

#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin::test {

inline ServingDeployment llama8b_h100() {
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-h100", 1, builtin_gpus(), s));
  apply_profile(builtin_profile(s.gpu.name), s);
  ServingDeployment d;
  d.model = builtin_models().models.at("llama3-8b");
  d.cluster = build_cluster(s);
  d.overhead = builtin_profile(s.gpu.name).serving;
  return d;
}

inline SchedulerConfig scheduler() {
  SchedulerConfig c;
  c.max_model_len = 8192;
  return c;
}

}  // namespace ctwin::test
