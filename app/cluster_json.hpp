// Cluster descriptions as JSON: what `ctwin cluster --write` emits and /cluster/file reads back
// (realrun's topology discovery will write the same format).
#pragma once

#include <nlohmann/json.hpp>

#include "topology/cluster.hpp"

namespace ctwin {

// Every field of the spec, the GPU inline, in the keys the scenario loader reads under /cluster.
nlohmann::ordered_json cluster_to_json(const ClusterSpec& c);

}  // namespace ctwin
