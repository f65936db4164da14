// The DGX H100 cluster the benchmarks run on: the shipped preset (topology/src/presets.cpp over
// topology/catalog/gpus.json), 8 H100 SXM per node on NVSwitch, one 400 Gb/s NDR NIC per GPU.
#pragma once

#include <stdexcept>

#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"

namespace ctwin {

inline ClusterSpec bench_dgx_h100(int nodes) {
  ClusterSpec s;
  if (!preset_cluster("dgx-h100", nodes, builtin_gpus(), s)) throw std::logic_error("no dgx-h100 preset");
  return s;
}

}  // namespace ctwin
