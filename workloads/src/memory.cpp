#include "workloads/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "workloads/layer_ops.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/pipeline_split.hpp"

namespace ctwin {
namespace {

int moe_layers_in(const ModelSpec& m, int first, int count) {
  int n = 0;
  for (int l = first; l < first + count; ++l) n += m.moe_layer(l) ? 1 : 0;
  return n;
}

// ZeRO-3's whole-unit buffers on one GPU of a stage holding `params` parameters over `layers`
// layers (a unit is one transformer layer, or the embedding / LM head where the stage has one):
// - FSDP1 and FSDP2 gather the current unit and prefetch the next (FSDP1's rate limiter lets
//   two all-gathers be in flight; FSDP2 prefetches one unit ahead), and hold one unit's
//   unsharded gradients until its reduce-scatter (PyTorch FSDP docs, "backward_prefetch",
//   "limit_all_gathers"; FSDP2 fully_shard). FSDP2 with reshard_after_forward false keeps every
//   unit gathered from its forward to its backward.
// - DeepSpeed gathers up to stage3_prefetch_bucket_size parameters ahead of the current module
//   and reduces gradients through a reduce_bucket_size buffer (DeepSpeed ZeRO-3 config docs).
double gathered_bytes(const ModelSpec& m, const TrainingConfig& cfg, double params, int layers, int stage) {
  const auto& p = cfg.parallel;
  const auto& pr = cfg.precision;
  double unit = layers > 0 ? params / layers : params;
  if (!m.is_generic() && (stage == 0 || stage == p.pp - 1)) {
    const double vocab_shard = static_cast<double>(m.vocab) * static_cast<double>(m.hidden) / p.tp;
    const double head_and_embedding = stage == 0 && stage == p.pp - 1 && !m.tied_embeddings ? 2 : 1;
    unit = (params - head_and_embedding * vocab_shard) / std::max(1, layers);
    unit = std::max(unit, vocab_shard);
  }
  unit = std::min(unit, params);
  const auto& sh = p.sharding;
  switch (sh.framework) {
    case Sharding::Framework::fsdp1:
      return 2 * unit * pr.weight_bytes + unit * pr.grad_bytes;
    case Sharding::Framework::fsdp2:
      return (sh.reshard_after_forward ? 2 * unit : params) * pr.weight_bytes + unit * pr.grad_bytes;
    case Sharding::Framework::deepspeed:
      return std::min(unit + sh.prefetch_bucket_elements, params) * pr.weight_bytes +
             std::min(sh.reduce_bucket_elements, params) * pr.grad_bytes;
  }
  return 0;
}

}  // namespace

double activation_bytes_per_layer(const ModelSpec& m, const TrainingConfig& cfg, bool moe_layer) {
  const auto& p = cfg.parallel;
  if (m.is_generic()) {
    double total = 0;
    for (const auto& l : m.generic_layers) total += l.activation_bytes;
    return total / static_cast<double>(m.generic_layers.size()) * cfg.micro_batch;  // the mean layer
  }
  const double s = static_cast<double>(cfg.seq_len) / p.cp, b = cfg.micro_batch, h = static_cast<double>(m.hidden);
  const double t = p.tp, a = m.heads, e = cfg.precision.weight_bytes;
  const bool sp = p.sequence_parallel && p.tp > 1;
  if (cfg.recompute == Recompute::full) return e * s * b * h / (sp ? t : 1);  // the layer input only
  const ModelDims dims = model_dims(m);
  const double q_dim = dims.q_dim, kv_dim = dims.kv_dim, v_dim = dims.v_dim;
  // Tensors every TP rank keeps whole unless sequence parallelism splits them: the two norm
  // inputs, the QKV and MLP inputs (e bytes each) and the two dropout masks (1 byte each).
  double replicated = 4 * e * s * b * h;
  if (cfg.dropout) replicated += 2 * s * b * h;
  // Tensors split by TP: Q, K, V, the attention output, the MLP intermediates.
  double split = e * s * b * (q_dim + kv_dim + v_dim + q_dim);
  double ffn = static_cast<double>(m.ffn_hidden), tokens_factor = 1.0;
  if (moe_layer && m.moe.enabled()) {
    ffn = static_cast<double>(m.moe.expert_ffn_hidden);
    tokens_factor = m.moe.top_k * m.moe.capacity_factor + m.moe.shared_experts;
  }
  const double intermediates = mlp_saved_widths(m.activation);
  split += e * s * b * ffn * intermediates * tokens_factor;
  // Standard attention keeps the s x s softmax output (and with dropout its mask and output):
  // Korthikanti's 5as^2b term. Flash attention and selective recomputation keep none of it.
  if (cfg.attention == AttentionKernel::standard && cfg.recompute == Recompute::none) {
    split += (cfg.dropout ? 5 : 2) * a * s * s * b;
  }
  if (cfg.precision.compute == Dtype::fp8) {
    // Transformer Engine saves the linear layers' inputs for wgrad as FP8 (1 byte): the QKV and
    // MLP inputs, the attention output and fc2's input (docs/fidelity-fp8.md).
    replicated -= (e - 1) * 2 * s * b * h;
    split -= (e - 1) * s * b * (q_dim + ffn * tokens_factor);
  }
  return sp ? (replicated + split) / t : replicated + split / t;
}

double stage_params(const ModelSpec& m, const TrainingConfig& cfg, int stage) {
  const auto& p = cfg.parallel;
  const int layers = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
  const PipelineSplit split = pipeline_split(layers, p);
  if (m.is_generic()) {
    double params = 0;
    for (int c = 0; c < split.v; ++c) {
      const auto vs = static_cast<std::size_t>(c * split.pp + stage);
      for (int l = split.first[vs]; l < split.first[vs] + split.layers[vs]; ++l) params += m.generic_layers[l].params;
    }
    return params;
  }
  const int per_stage = split.stage_layers(stage);
  int moe_layers = 0;
  for (int c = 0; c < split.v; ++c) {
    const auto vs = static_cast<std::size_t>(c * split.pp + stage);
    moe_layers += moe_layers_in(m, split.first[vs], split.layers[vs]);
  }
  const int dense_layers = per_stage - moe_layers;
  const double t = p.tp, h = static_cast<double>(m.hidden);
  const ModelDims dims = model_dims(m);
  double params = per_stage * dims.attention_params / t;
  params += dense_layers * dims.dense_mlp_params / t;
  if (moe_layers > 0) {
    const double expert = dims.expert_params;
    params += moe_layers *
              (expert * m.moe.experts / p.ep / expert_tp(p) + expert * m.moe.shared_experts / t + dims.router_params);
  }
  params += per_stage * 2 * dims.norm_params;  // two norms per layer (replicated)
  const double vocab_shard = static_cast<double>(m.vocab) * h / t;
  if (stage == 0) params += vocab_shard + (m.learned_positions ? static_cast<double>(m.max_seq) * h : 0);
  if (stage == p.pp - 1) {
    params += dims.norm_params;  // the final norm
    if (!m.tied_embeddings || p.pp > 1) params += vocab_shard;
  }
  return params;
}

double stage_expert_params(const ModelSpec& m, const TrainingConfig& cfg, int stage) {
  if (m.is_generic() || !m.moe.enabled()) return 0;
  const auto& p = cfg.parallel;
  const PipelineSplit split = pipeline_split(m.layers, p);
  int moe_layers = 0;
  for (int c = 0; c < split.v; ++c) {
    const auto vs = static_cast<std::size_t>(c * split.pp + stage);
    moe_layers += moe_layers_in(m, split.first[vs], split.layers[vs]);
  }
  return moe_layers * model_dims(m).expert_params * m.moe.experts / p.ep / expert_tp(p);
}

double stage_linear_params(const ModelSpec& m, const TrainingConfig& cfg, int stage) {
  if (m.is_generic()) return 0;
  const auto& p = cfg.parallel;
  const double t = p.tp, vocab_shard = static_cast<double>(m.vocab) * static_cast<double>(m.hidden) / t;
  double linear =
      stage_params(m, cfg, stage) - 2 * model_dims(m).norm_params * pipeline_split(m.layers, p).stage_layers(stage);
  if (stage == 0) linear -= vocab_shard + (m.learned_positions ? static_cast<double>(m.max_seq) * m.hidden : 0);
  if (stage == p.pp - 1) linear -= model_dims(m).norm_params + ((!m.tied_embeddings || p.pp > 1) ? vocab_shard : 0);
  return std::max(0.0, linear);
}

double expert_data_parallel(const Parallelism& p) {
  // Folded experts (etp 1) are replicated over the stage's tp x cp x dp ranks / ep.
  const double ranks = static_cast<double>(p.dp) * std::max(1, p.cp) * (experts_folded(p) ? p.tp : 1);
  return std::max(1.0, ranks / std::max(1, p.ep));
}

double inflight_microbatches(const TrainingConfig& cfg, int stage) {
  const auto& p = cfg.parallel;
  const int m = std::max(1, cfg.grad_accum());
  // ZB-H1 lets stage s hold at most p - s micro-batches, as 1F1B (its order depends on costs).
  const PipelineSchedule sc = p.schedule == PipelineSchedule::zero_bubble ? PipelineSchedule::one_f_one_b : p.schedule;
  const int v = sc == PipelineSchedule::interleaved ? std::max(1, p.virtual_stages) : 1;
  const int pp = std::max(1, p.pp);
  const int st = std::clamp(stage, 0, pp - 1);
  return max_in_flight(pipeline_order(sc, pp, st, m, v)) / static_cast<double>(v);
}

double inflight_microbatches(const TrainingConfig& cfg) { return inflight_microbatches(cfg, 0); }

MemoryBreakdown estimate_stage_memory(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes, int stage) {
  const auto& p = cfg.parallel;
  const auto& pr = cfg.precision;
  MemoryBreakdown mb;
  const double params = stage_params(m, cfg, stage);
  // ZeRO / Megatron's distributed optimizer shard over the data-parallel ranks that hold the
  // same weights: dp x cp (context-parallel ranks hold the same layers and reduce gradients
  // together, as the step program's gradient collectives do). Routed experts are held by only
  // dp x cp / ep of them (the expert-data-parallel group): their shards are ep times larger.
  const double dp = static_cast<double>(p.dp) * std::max(1, p.cp);
  const double experts = stage_expert_params(m, cfg, stage);
  // Bytes per GPU of `bytes_per_param` state sharded over its holders: `shard` false keeps it whole.
  const auto state = [&](double bytes_per_param, bool shard) {
    if (!shard) return params * bytes_per_param;
    return (params - experts) * bytes_per_param / dp + experts * bytes_per_param / expert_data_parallel(p);
  };
  mb.weights = state(pr.weight_bytes, p.zero_stage >= 3);
  if (pr.compute == Dtype::fp8 && p.zero_stage < 3 && !m.is_generic()) {
    // Transformer Engine caches each linear layer's FP8 weight and its transpose (1 byte each)
    // for the step; embedding, LM head and norms stay BF16 (docs/fidelity-fp8.md). With
    // fp8_param_gather (TE's fp8_model_init) the FP8 weight is the parameter: no BF16 copy.
    const double linear = stage_linear_params(m, cfg, stage);
    mb.weights += 2 * linear - (pr.fp8_param_gather ? pr.weight_bytes * linear : 0.0);
  }
  mb.grads = state(pr.grad_bytes, p.zero_stage >= 2);
  mb.optimizer = state(pr.master_bytes + pr.optimizer_state_bytes, p.zero_stage >= 1);
  // Offloading (docs/training.md, "Offloading"). ZeRO-Offload keeps the FP32 master weights, the
  // Adam moments and this GPU's gradient partition on the host (Ren et al. Sec. 3.5, 4.2); the
  // GPU keeps only what is in flight: ZeRO-2 its reduce bucket (reduce_bucket_size), ZeRO-3 the
  // unit buffers counted in `gathered`. ZeRO-Infinity puts the optimizer states on NVMe (the
  // gradient partition stays in host memory) and the parameter shards on the host or NVMe.
  const Offload& off = cfg.offload;
  if (off.optimizer != Offload::Device::none) {
    (off.optimizer == Offload::Device::cpu ? mb.host_bytes : mb.nvme_bytes) += mb.optimizer;
    mb.optimizer = 0;
    mb.host_bytes += state(pr.grad_bytes, true);
    if (p.zero_stage >= 3) mb.grads = 0;
    if (p.zero_stage == 2) mb.grads = std::min(p.sharding.reduce_bucket_elements, params) * pr.grad_bytes;
  }
  if (off.params != Offload::Device::none && p.zero_stage >= 3) {
    (off.params == Offload::Device::cpu ? mb.host_bytes : mb.nvme_bytes) += mb.weights;
    mb.weights = 0;
  }
  const int layers = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
  const PipelineSplit split = pipeline_split(layers, p);
  const int st = std::clamp(stage, 0, split.pp - 1);
  const double dense_layer = activation_bytes_per_layer(m, cfg, false);
  const double moe_layer = m.moe.enabled() ? activation_bytes_per_layer(m, cfg, true) : 0.0;
  // What a layer keeps when it is not recomputed (under full recomputation, dense_layer is the
  // checkpointed input only).
  const bool full = cfg.recompute == Recompute::full && !m.is_generic();
  TrainingConfig kept_cfg = cfg;
  kept_cfg.recompute = Recompute::none;
  const double dense_kept = full ? activation_bytes_per_layer(m, kept_cfg, false) : dense_layer;
  const double moe_kept = full && m.moe.enabled() ? activation_bytes_per_layer(m, kept_cfg, true) : moe_layer;
  const int group = std::max(1, cfg.recompute_num_layers);
  // One micro-batch's activations of each model chunk: its own layers (an uneven split, e.g.
  // Llama 3's first chunk with the embedding only, holds fewer), MoE layers where they fall.
  // Full recomputation keeps a checkpointed input per group of recompute_num_layers (uniform),
  // or the first recompute_num_layers layers' inputs and the other layers whole (block).
  std::vector<double> chunk_bytes(static_cast<std::size_t>(split.v), 0.0);
  double rerun = 0;  // the most a recomputation rebuilds at once beyond what the chunk keeps then
  for (int c = 0; c < split.v; ++c) {
    const auto vs = static_cast<std::size_t>(c * split.pp + st);
    const int n = split.layers[vs];
    const int moe = moe_layers_in(m, split.first[vs], n);
    double& bytes = chunk_bytes[static_cast<std::size_t>(c)];
    if (!full) {
      bytes = (n - moe) * dense_layer + moe * moe_layer;
      continue;
    }
    const double widest = m.moe.enabled() ? std::max(dense_kept, moe_kept) : dense_kept;
    if (cfg.recompute_method == RecomputeMethod::uniform) {
      bytes = ((n + group - 1) / group) * dense_layer;
      rerun = std::max(rerun, std::min(group, n) * widest);  // a group's forward, rebuilt whole
      continue;
    }
    // The block method recomputes its layers one at a time, after the kept layers above them
    // have run their backward and freed what they held.
    double freed = 0;
    for (int i = 0; i < n; ++i) {
      const double whole = m.moe_layer(split.first[vs] + i) ? moe_kept : dense_kept;
      bytes += recomputes_layer(cfg, i) ? dense_layer : whole;
      freed += recomputes_layer(cfg, i) ? 0.0 : whole;
    }
    if (std::min(group, n) > 0) rerun = std::max(rerun, widest - freed);
  }
  double per_mb = 0;
  for (double b : chunk_bytes) per_mb += b;
  mb.activations_per_microbatch = per_mb;
  // The schedule's order (1F1B: p - s micro-batches on stage s, Korthikanti Sec. 4.2.3; GPipe
  // all m; interleaved Megatron's warm-up of chunk forwards): the most bytes of forwards whose
  // backward has not run, each chunk forward counting its own layers.
  const PipelineSchedule sc = p.schedule == PipelineSchedule::zero_bubble ? PipelineSchedule::one_f_one_b : p.schedule;
  double held = 0, most = 0;
  for (const auto& slot : pipeline_order(sc, split.pp, st, std::max(1, cfg.grad_accum()), split.v)) {
    const double b = chunk_bytes[static_cast<std::size_t>(std::clamp(slot.chunk, 0, split.v - 1))];
    if (slot.pass == PipelineSlot::Pass::forward) {
      held += b;
      most = std::max(most, held);
    } else if (slot.pass == PipelineSlot::Pass::backward) {
      held -= b;
    }
  }
  mb.activations = most;
  double logits = 0;
  if (stage == p.pp - 1 && !m.is_generic()) {
    // The logits of one micro-batch and what the loss kernel holds beside them: their FP32 copy,
    // or (fused) their gradient.
    const double tokens = cfg.micro_batch * static_cast<double>(cfg.seq_len) / p.cp;
    logits =
        tokens * static_cast<double>(m.vocab) / p.tp * cross_entropy_bytes(cfg.cross_entropy, pr.weight_bytes).resident;
    mb.activations += logits;
  }
  if (full) {
    // A layer's backward first reruns its forward: for that layer (a uniform group: those
    // layers) the stage holds everything no recomputation would keep (Korthikanti's per-layer
    // bytes) beside the stored inputs. The loss's logits are freed before the last layer is
    // recomputed, so only the excess counts.
    mb.recompute = std::max(0.0, rerun - logits);
  }
  if (p.zero_stage >= 3) {
    // With ep = dp x cp a rank holds its experts whole (counted in the weights above): nothing of
    // theirs is gathered.
    const bool experts_whole = p.ep > 1 && expert_data_parallel(p) <= 1;
    const double gathered_params = experts_whole ? params - stage_expert_params(m, cfg, stage) : params;
    mb.gathered = gathered_bytes(m, cfg, gathered_params, split.stage_layers(st), stage);
  }
  mb.allocated = persistent_bytes(mb) + mb.activations + mb.recompute + mb.gathered;
  // The caching allocator keeps freed segments cached, so it reports more reserved than
  // allocated; when a cudaMalloc fails it releases its unused cached segments and retries before
  // raising out of memory (PyTorch CUDACachingAllocator), so what must fit is the allocated peak
  // plus what lives outside the allocator, not the reserved figure.
  mb.reserved = mb.allocated * (1 + cfg.allocator_reserve_fraction);
  mb.comm_buffers = cfg.comm_buffer_bytes;
  mb.overhead = cfg.framework_overhead_bytes;
  mb.peak = mb.allocated + mb.comm_buffers + mb.overhead;
  mb.capacity = capacity_bytes;
  mb.oom = mb.peak > capacity_bytes;
  return mb;
}

double persistent_bytes(const MemoryBreakdown& mb) { return mb.weights + mb.grads + mb.optimizer; }

namespace {

MemoryBreakdown worst_stage(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes) {
  MemoryBreakdown best;
  for (int stage = 0; stage < std::max(1, cfg.parallel.pp); ++stage) {
    const MemoryBreakdown mb = estimate_stage_memory(m, cfg, capacity_bytes, stage);
    if (mb.peak > best.peak) best = mb;
  }
  return best;
}

// The fewest layers of each model chunk that block recomputation must rerun for every stage to
// fit, or 0 where recomputing fewer than all of them does not fit (then "full" is the advice).
// Each layer more keeps one layer input instead of the layer, so the peak falls with the count
// (but for the last layer, whose rerun no kept layer frees first): a bisection finds it.
int fewest_block_layers(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes) {
  if (m.is_generic()) return 0;
  const PipelineSplit split = pipeline_split(m.layers, cfg.parallel);
  const int most = split.layers.empty() ? 0 : *std::max_element(split.layers.begin(), split.layers.end());
  TrainingConfig c = cfg;
  c.recompute = Recompute::full;
  c.recompute_method = RecomputeMethod::block;
  auto fits = [&](int n) {
    c.recompute_num_layers = n;
    return worst_stage(m, c, capacity_bytes).peak <= capacity_bytes;
  };
  if (most < 2 || !fits(most - 1)) return 0;
  int lo = 1, hi = most - 1;  // fits(hi)
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

}  // namespace

MemoryBreakdown estimate_memory(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes) {
  const auto& p = cfg.parallel;
  MemoryBreakdown best = worst_stage(m, cfg, capacity_bytes);
  best.capacity = capacity_bytes;
  best.oom = best.peak > capacity_bytes;
  struct Term {
    const char* name;
    double v;
  } terms[] = {{"weights", best.weights},
               {"grads", best.grads},
               {"optimizer", best.optimizer},
               {"activations", best.activations}};
  const Term* top = &terms[0];
  for (const auto& t : terms) {
    if (t.v > top->v) top = &t;
  }
  best.dominant = top->name;
  if (best.oom) {
    char buf[256];
    const double over = best.peak - capacity_bytes;
    std::snprintf(buf, sizeof buf,
                  "needs %.1f GiB more than the %.1f GiB available; %s dominate (%.1f GiB): ", over / (1u << 30),
                  capacity_bytes / (1u << 30), top->name, top->v / (1u << 30));
    best.advice = buf;
    // Only what the current settings leave to try: never recompute "full" when it is on, ZeRO-3
    // when it is on, sequence_parallel when it is on.
    std::vector<std::string> tries;
    // FP8 weights without their BF16 copy: 2 bytes per linear weight, whatever dominates.
    if (cfg.precision.compute == Dtype::fp8 && !cfg.precision.fp8_param_gather && p.zero_stage < 3 && !m.is_generic())
      tries.emplace_back("fp8_param_gather (no BF16 copy of the FP8 weights)");
    if (best.dominant == "activations") {
      // Selective recomputation frees only unfused attention's scores: with a fused kernel it
      // saves nothing (docs/training.md, "Recomputation and attention").
      const bool scores = cfg.attention == AttentionKernel::standard;
      // Where recomputing some layers of each chunk is enough, the fewest that fit (Megatron's
      // --recompute-method block --recompute-num-layers), which costs less than all of them.
      const bool partial = cfg.recompute != Recompute::full || cfg.recompute_method == RecomputeMethod::block;
      const int block = partial ? fewest_block_layers(m, cfg, capacity_bytes) : 0;
      const std::string full = block > 0
                                   ? "recompute \"full\" with recompute_method \"block\" and recompute_num_layers " +
                                         std::to_string(block) + " (the fewest that fit)"
                                   : "recompute \"full\"";
      if (cfg.recompute == Recompute::none) {
        tries.emplace_back(!scores     ? full
                           : block > 0 ? "recompute \"selective\", " + full
                                       : "recompute \"selective\" or \"full\"");
      }
      if (cfg.recompute == Recompute::selective) tries.emplace_back(full);
      if (cfg.recompute == Recompute::full && cfg.recompute_method == RecomputeMethod::block)
        tries.emplace_back(block > 0 ? "recompute_num_layers " + std::to_string(block) + " (the fewest that fit)"
                                     : "recompute_method \"uniform\"");
      if (cfg.recompute == Recompute::full && cfg.recompute_method == RecomputeMethod::uniform &&
          cfg.recompute_num_layers > 1)
        tries.emplace_back("recompute_num_layers 1 (an input kept per layer, one layer rebuilt at a time)");
      if (cfg.micro_batch > 1) tries.emplace_back("a smaller micro_batch");
      if (p.tp > 1 && !p.sequence_parallel) tries.emplace_back("sequence_parallel");
      tries.emplace_back("more tp or cp");
    } else {
      if (p.zero_stage < 3 && p.dp > 1) tries.emplace_back("zero_stage " + std::to_string(p.zero_stage + 1));
      tries.emplace_back("more pp or tp");
    }
    best.advice += "try ";
    for (std::size_t i = 0; i < tries.size(); ++i) {
      if (i > 0) best.advice += i + 1 == tries.size() ? " or " : ", ";
      best.advice += tries[i];
    }
  }
  return best;
}

}  // namespace ctwin
