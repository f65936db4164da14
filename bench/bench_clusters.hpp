// The DGX H100 cluster the benchmarks run on: the shipped preset (topology/src/presets.cpp over
// topology/catalog/gpus.json), 8 H100 SXM per node on NVSwitch, one 400 Gb/s NDR NIC per GPU.
#pragma once

#include <stdexcept>

#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"
#include "workloads/training.hpp"

namespace ctwin {

inline ClusterSpec bench_dgx_h100(int nodes) {
  ClusterSpec s;
  if (!preset_cluster("dgx-h100", nodes, builtin_gpus(), s)) throw std::logic_error("no dgx-h100 preset");
  return s;
}

// Llama 3 405B's layout as Meta trained it on 16,384 H100 (The Llama 3 Herd of Models, Table 4):
// TP8 PP16 DP128 with sequence parallelism, 2,048 sequences of 8,192 tokens a step; quick: PP4
// DP4, 16 sequences.
inline TrainingConfig bench_llama3_405b_layout(bool quick) {
  TrainingConfig c;
  c.parallel.tp = 8;
  c.parallel.pp = quick ? 4 : 16;
  c.parallel.dp = quick ? 4 : 128;
  c.parallel.sequence_parallel = true;
  c.parallel.zero_stage = 1;
  c.micro_batch = 1;
  c.seq_len = 8192;
  c.global_batch = quick ? 16 : 2048;
  return c;
}

}  // namespace ctwin
