#include "workloads/pipeline_split.hpp"

#include <algorithm>

namespace ctwin {

int PipelineSplit::stage_layers(int stage) const {
  int n = 0;
  for (int c = 0; c < v; ++c) n += layers[static_cast<std::size_t>(c * pp + stage)];
  return n;
}

int chunks_per_stage(const Parallelism& par) {
  return par.schedule == PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
}

PipelineSplit pipeline_split(int model_layers, const Parallelism& par) {
  PipelineSplit s;
  s.pp = std::max(1, par.pp);
  s.v = chunks_per_stage(par);
  const int n = s.pp * s.v;
  s.layers.assign(static_cast<std::size_t>(n), 0);
  if (!par.pipeline_layers.empty() && static_cast<int>(par.pipeline_layers.size()) == n) {
    for (int i = 0; i < n; ++i) s.layers[i] = std::max(0, par.pipeline_layers[static_cast<std::size_t>(i)]);
  } else if (par.first_stage_layers >= 0 || par.last_stage_layers >= 0) {
    // Megatron-LM: the given first / last stage counts, the remaining layers even over the rest.
    int rest = model_layers, middle = n;
    if (par.first_stage_layers >= 0) rest -= par.first_stage_layers, --middle;
    if (par.last_stage_layers >= 0) rest -= par.last_stage_layers, --middle;
    const int each = middle > 0 ? std::max(0, rest) / middle : 0;
    for (int i = 0; i < n; ++i) s.layers[i] = each;
    if (par.first_stage_layers >= 0) s.layers.front() = par.first_stage_layers;
    if (par.last_stage_layers >= 0) s.layers.back() = par.last_stage_layers;
  } else {
    // Even, with the embedding and the loss each counted as one layer when asked
    // (they sit on the first and the last virtual stage).
    const int extra_first = par.account_for_embedding ? 1 : 0, extra_last = par.account_for_loss ? 1 : 0;
    const int each = (model_layers + extra_first + extra_last) / n;
    for (int i = 0; i < n; ++i) s.layers[i] = each;
    s.layers.front() = std::max(0, s.layers.front() - extra_first);
    s.layers.back() = std::max(0, s.layers.back() - extra_last);
  }
  s.first.assign(static_cast<std::size_t>(n), 0);
  for (int i = 1; i < n; ++i) s.first[i] = s.first[i - 1] + s.layers[i - 1];
  return s;
}

std::vector<bool> recomputed_layers(int model_layers, const TrainingConfig& cfg) {
  std::vector<bool> out(static_cast<std::size_t>(std::max(0, model_layers)), false);
  const PipelineSplit split = pipeline_split(model_layers, cfg.parallel);
  for (std::size_t vs = 0; vs < split.layers.size(); ++vs) {
    for (int i = 0; i < split.layers[vs]; ++i) {
      const int layer = split.first[vs] + i;
      if (layer >= 0 && layer < model_layers) out[static_cast<std::size_t>(layer)] = recomputes_layer(cfg, i);
    }
  }
  return out;
}

}  // namespace ctwin
