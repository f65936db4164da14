#include "workloads/serving_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "topology/custom_all_reduce.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/measured_tables.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/serving_lora.hpp"
#include "workloads/serving_memory.hpp"

namespace ctwin {

double expected_distinct_experts(double experts, double top_k, double tokens) {
  if (experts <= 0 || tokens <= 0) return 0;
  return experts * (1 - std::pow(1 - top_k / experts, tokens));
}

namespace {

constexpr double kAct = 2;  // activations are BF16 (W8A8 quantizes them inside the GEMM)

double memo_get(std::vector<double>& memo, std::int64_t i) {
  if (i >= static_cast<std::int64_t>(memo.size())) {
    memo.resize(static_cast<std::size_t>(std::max<std::int64_t>(i + 1, 2 * static_cast<std::int64_t>(memo.size()))),
                std::numeric_limits<double>::quiet_NaN());
  }
  return memo[static_cast<std::size_t>(i)];
}

}  // namespace

ServingCostModel::ServingCostModel(ServingDeployment d) : d_(with_default_cost_models(std::move(d))) {
  for (int t = 0; t < d_.tp; ++t) tp_ranks_.push_back(GpuId(static_cast<std::uint32_t>(t)));
  const ModelSpec& m = d_.model;
  dims_ = model_dims(m);
  moe_layers_ = m.moe.enabled() ? std::max(0, m.layers - m.moe.first_dense_layers) : 0;
  lora_widths_ = lora_layer_widths(m);
  dense_layers_ = m.layers - moe_layers_;
  dense_windowed_ = m.windowed_layers(0, dense_layers_);
  moe_windowed_ = m.windowed_layers(dense_layers_, moe_layers_);
  kv_bytes_ = kv_bytes_per_elem(d_.kv_dtype);
  w_bytes_ = weight_bytes_per_param(d_.quantization);
  expert_w_bytes_ = expert_weight_bytes_per_param(d_.quantization);
  if (d_.spec_method == SpecMethod::draft_model && d_.draft) {
    ServingDeployment dd = d_;
    dd.model = *d_.draft;
    dd.pp = 1;
    dd.expert_parallel = false;
    dd.quantization = Quantization::none;
    dd.gemm_cost_model = dd.cost_model;
    dd.spec_method = SpecMethod::none;
    dd.draft.reset();
    draft_ = std::make_unique<ServingCostModel>(std::move(dd));
  }
}

ServingCostModel::~ServingCostModel() = default;

double ServingCostModel::collective_s(CollectiveOp op, const std::vector<GpuId>& ranks, double bytes) const {
  CollectiveCall call;
  call.op = op;
  call.ranks = ranks;
  call.bytes = bytes;
  // The framework's own all-reduce where it takes the call (not NCCL, so no NCCL table applies).
  if (d_.custom_all_reduce) {
    CustomAllReduce k;
    k.max_bytes = d_.custom_all_reduce_max_bytes;
    const CustomAllReduceKernel kernel = custom_all_reduce_kernel(d_.cluster, call, k);
    if (kernel != CustomAllReduceKernel::none) return custom_all_reduce_s(d_.cluster, call, k, kernel);
  }
  // A profile's measured curve where it covers the call, as training's analytical fidelity.
  if (d_.measured_collectives && !d_.measured_collectives->empty()) {
    const auto t = measured_collective_s(*d_.measured_collectives, op, static_cast<int>(ranks.size()),
                                         spans_nodes(d_.cluster, call), bytes);
    if (t) return *t;
  }
  return estimate_collective(d_.cluster, call, d_.collectives).time.seconds();
}

double ServingCostModel::all_reduce_bytes(std::int64_t tokens) const {
  return static_cast<double>(tokens) * d_.model.hidden * kAct;
}
double ServingCostModel::logits_bytes(std::int64_t rows) const {
  return static_cast<double>(rows) * static_cast<double>(d_.model.vocab) * kAct;
}
double ServingCostModel::handoff_bytes(std::int64_t tokens) const {
  // Hidden states and the residual (vLLM's IntermediateTensors), BF16.
  return 2 * static_cast<double>(tokens) * static_cast<double>(d_.model.hidden) * kAct;
}

double ServingCostModel::tp_all_reduce_s(std::int64_t tokens) const {
  if (d_.tp <= 1 || tokens <= 0) return 0;
  double v = memo_get(all_reduce_memo_, tokens);
  if (std::isnan(v)) {
    v = collective_s(CollectiveOp::all_reduce, tp_ranks_, all_reduce_bytes(tokens));
    all_reduce_memo_[static_cast<std::size_t>(tokens)] = v;
  }
  return v;
}

double ServingCostModel::logits_gather_s(std::int64_t rows) const {
  if (d_.tp <= 1 || rows <= 0) return 0;
  double g = memo_get(logits_memo_, rows);
  if (std::isnan(g)) {
    g = collective_s(CollectiveOp::all_gather, tp_ranks_, logits_bytes(rows));
    logits_memo_[static_cast<std::size_t>(rows)] = g;
  }
  return g;
}

double ServingCostModel::handoffs_s(std::int64_t tokens) const {
  if (d_.pp <= 1 || tokens <= 0) return 0;
  double v = memo_get(handoff_memo_, tokens);
  if (std::isnan(v)) {
    v = 0;
    for (int s = 0; s + 1 < d_.pp; ++s) {
      const std::vector<GpuId> pair{GpuId(static_cast<std::uint32_t>(s * d_.tp)),
                                    GpuId(static_cast<std::uint32_t>((s + 1) * d_.tp))};
      v += collective_s(CollectiveOp::send_recv, pair, handoff_bytes(tokens));
    }
    handoff_memo_[static_cast<std::size_t>(tokens)] = v;
  }
  return v;
}

bool ServingCostModel::uses_cuda_graph(const BatchShape& b) const {
  // vLLM captures decode-only batches up to the largest capture size; a longer context than
  // max_seq_len_to_capture falls back to eager (v0); mixed batches run eagerly.
  if (!d_.cuda_graphs || b.prefill_tokens > 0 || b.decode_seqs <= 0) return false;
  if (b.decode_seqs > d_.max_cuda_graph_batch) return false;
  return b.decode_kv_tokens <= static_cast<double>(d_.max_seq_len_to_capture) * static_cast<double>(b.decode_seqs);
}

namespace {

enum Want : unsigned { kShared = 1, kAttention = 2, kComm = 4, kLora = 8, kAll = 15 };

// The collectives the emitters issue, each sized by a count the pricing memoizes on.
enum class ServingCollective : std::uint8_t { tp_all_reduce, logits_gather, handoff };

}  // namespace

// Prices each emitted op into a Parts (iteration() and the proposers' passes).
struct ServingCostModel::PriceSink {
  const ServingCostModel& m;
  Parts& p;
  void kernel(IterationPart part, const char*, const OpCost& op, bool quantized) {
    const double t = (quantized ? *m.d_.gemm_cost_model : *m.d_.cost_model).op_seconds(op);
    switch (part) {
      case IterationPart::shared:
        p.shared += t;
        break;
      case IterationPart::prefill_attention:
        p.prefill_attention += t;
        break;
      case IterationPart::decode_attention:
        p.decode_attention += t;
        break;
      case IterationPart::comm:
        p.comm += t;
        break;
      case IterationPart::lora:
        p.lora += t;
        break;
    }
  }
  void collective(const char*, ServingCollective c, std::int64_t count) {
    switch (c) {
      case ServingCollective::tp_all_reduce:
        p.comm += m.tp_all_reduce_s(count);
        break;
      case ServingCollective::logits_gather:
        p.comm += m.logits_gather_s(count);
        break;
      case ServingCollective::handoff:
        p.comm += m.handoffs_s(count);
        break;
    }
  }
};

// Lists each emitted op with the stage and layer it runs in. Collectives that iteration()
// prices at 0 (TP ones at tp = 1) are not ops.
struct ServingCostModel::ListSink {
  const ServingCostModel& m;
  std::vector<IterationOp>& out;
  int stage = 0, layer = -1;
  void kernel(IterationPart part, const char* name, const OpCost& op, bool quantized) {
    IterationOp o;
    o.name = name;
    o.part = part;
    o.stage = stage;
    o.layer = layer;
    o.cost = op;
    o.quantized = quantized;
    out.push_back(std::move(o));
  }
  void collective(const char* name, ServingCollective c, std::int64_t count) {
    const int tp = m.d_.tp;
    IterationOp o;
    o.name = name;
    o.part = IterationPart::comm;
    o.stage = stage;
    o.layer = layer;
    o.collective = true;
    switch (c) {
      case ServingCollective::tp_all_reduce:
      case ServingCollective::logits_gather:
        if (tp <= 1 || count <= 0) return;
        o.op = c == ServingCollective::tp_all_reduce ? CollectiveOp::all_reduce : CollectiveOp::all_gather;
        o.bytes = c == ServingCollective::tp_all_reduce ? m.all_reduce_bytes(count) : m.logits_bytes(count);
        for (int t = 0; t < tp; ++t) o.ranks.push_back(GpuId(static_cast<std::uint32_t>(stage * tp + t)));
        break;
      case ServingCollective::handoff:
        if (stage + 1 >= m.d_.pp || count <= 0) return;
        o.op = CollectiveOp::send_recv;
        o.bytes = m.handoff_bytes(count);
        o.ranks = {GpuId(static_cast<std::uint32_t>(stage * tp)), GpuId(static_cast<std::uint32_t>((stage + 1) * tp))};
        break;
    }
    out.push_back(std::move(o));
  }
};

template <class Sink>
void ServingCostModel::emit_layer(const BatchShape& b, bool moe, bool windowed, unsigned want, Sink& sink) const {
  const ModelSpec& m = d_.model;
  const ModelDims& dims = dims_;
  const double T = static_cast<double>(b.tokens());
  const double h = dims.hidden, tp = d_.tp;
  // Attention: each part's own kernel over its sums (paged attention reads the actual contexts;
  // a windowed layer's kernels score and read only the window's keys).
  auto attention = [&] {
    if ((want & kAttention) == 0) return;
    if (b.prefill_tokens > 0) {
      const AttentionShape a{static_cast<double>(b.prefill_tokens),
                             windowed ? b.prefill_window_pairs : b.prefill_attended_pairs,
                             windowed ? b.prefill_window_kv_tokens : b.prefill_kv_tokens};
      sink.kernel(IterationPart::prefill_attention, "attention_prefill", attention_forward(m, a, tp, kv_bytes_), false);
    }
    if (b.decode_tokens > 0) {
      const AttentionShape a{static_cast<double>(b.decode_tokens),
                             windowed ? b.decode_window_pairs : b.decode_attended_pairs,
                             windowed ? b.decode_window_kv_tokens : b.decode_kv_tokens};
      sink.kernel(IterationPart::decode_attention, "attention_decode", attention_forward(m, a, tp, kv_bytes_), false);
    }
  };
  auto all_reduce = [&](const char* name) {
    if ((want & kComm) != 0) sink.collective(name, ServingCollective::tp_all_reduce, b.tokens());
  };
  // The adapters' shrink and expand (the formula in serving_cost.hpp).
  auto lora = [&] {
    if ((want & kLora) == 0 || b.lora_tokens <= 0) return;
    const double lt = static_cast<double>(b.lora_tokens), r = b.lora_rank;
    const double A = std::max<double>(1, b.lora_adapters), P = lora_widths_.projections;
    const double din = lora_widths_.d_in / tp, dout = lora_widths_.d_out / tp;
    OpCost shrink{OpKind::grouped_gemm, 2 * lt * r * din, kAct * (A * r * din + lt * din + lt * r * P), lt, r, h};
    shrink.groups = A;
    OpCost expand{
        OpKind::grouped_gemm, 2 * lt * r * dout, kAct * (A * r * dout + lt * r * P + 2 * lt * dout), lt, h, r};
    expand.groups = A;
    sink.kernel(IterationPart::lora, "lora_shrink", shrink, false);
    sink.kernel(IterationPart::lora, "lora_expand", expand, false);
  };
  if ((want & kShared) == 0) {
    // Pricing's per-iteration part (the token-proportional ops are memoized): the same calls,
    // without walking the GEMMs it does not want.
    attention();
    all_reduce("attention_all_reduce");
    lora();
    all_reduce("mlp_all_reduce");
    return;
  }
  // A GEMM (T x k) @ (k x n) at the quantization's weight bytes and peak; weights read once, at
  // the profile's weight-read share of the streaming rate (what bounds small-batch decode).
  const double wread = 1 / d_.overhead.weight_read_efficiency;
  auto gemm = [&](const char* name, double rows, double k, double n) {
    sink.kernel(
        IterationPart::shared, name,
        OpCost{OpKind::gemm, 2 * rows * k * n, wread * w_bytes_ * k * n + kAct * (rows * k + rows * n), rows, n, k},
        true);
  };
  auto stream = [&](const char* name, OpKind kind, double bytes) {
    sink.kernel(IterationPart::shared, name, OpCost{kind, 0, bytes}, false);
  };
  stream("input_norm", OpKind::norm, kAct * 2 * T * h);
  if (m.mla.enabled()) {
    const double ql = m.mla.q_lora_rank;
    if (ql > 0) {
      gemm("q_a", T, h, ql);
      gemm("q_b", T, ql, dims.q_dim / tp);
    } else {
      gemm("q", T, h, dims.q_dim / tp);
    }
    gemm("kv_a", T, h, m.mla.kv_lora_rank + m.mla.qk_rope_head_dim);
    gemm("kv_b", T, m.mla.kv_lora_rank, m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.v_head_dim) / tp);
  } else {
    gemm("qkv", T, h, (dims.q_dim + 2 * dims.kv_dim) / tp);
  }
  attention();
  gemm("o_proj", T, dims.o_in / tp, h);
  all_reduce("attention_all_reduce");
  stream("residual_add", OpKind::elementwise, kAct * 3 * T * h);
  stream("post_attention_norm", OpKind::norm, kAct * 2 * T * h);
  const bool gated = is_gated(m.activation);
  auto mlp = [&](double ffn) {
    const double up = (gated ? 2 : 1) * ffn / tp;
    gemm("mlp_up", T, h, up);
    stream("mlp_activation", OpKind::elementwise, kAct * T * (up + ffn / tp));
    gemm("mlp_down", T, ffn / tp, h);
  };
  if (moe && m.moe.enabled()) {
    const double E = m.moe.experts, k = m.moe.top_k, ffn = static_cast<double>(m.moe.expert_ffn_hidden);
    const int ep = d_.ep();
    // Router (BF16, replicated) and its top-k.
    sink.kernel(IterationPart::shared, "router",
                OpCost{OpKind::gemm, 2 * T * h * E, kAct * (T * h + h * E + T * E), T, E, h}, false);
    stream("router_topk", OpKind::elementwise, 4 * T * E * 2 + T * k * 12);
    // Experts: with EP each rank holds E/ep whole experts; else every expert sharded over TP.
    // Tokens are replicated over the TP group (dp = 1), so each rank runs its experts over its
    // share of the T*k routed rows and the TP all-reduce below combines them (vLLM FusedMoE).
    const double local_experts = E / ep;
    const double ffn_local = ep > 1 ? ffn : ffn / tp;
    const double rows = T * k / ep;
    const double touched = local_experts * (1 - std::pow(1 - k / E, T));
    const double up = (gated ? 2 : 1) * ffn_local;
    auto grouped = [&](const char* name, double kk, double n) {
      OpCost op{OpKind::grouped_gemm,
                2 * rows * kk * n,
                wread * expert_w_bytes_ * touched * kk * n + kAct * (rows * kk + rows * n),
                rows,
                n,
                kk};
      op.groups = std::max(1.0, touched);
      sink.kernel(IterationPart::shared, name, op, true);
    };
    const double permute = kAct * (T * h + T * k * h) + 8 * T * k;
    stream("moe_permute", OpKind::elementwise, permute);
    grouped("experts_up", h, up);
    stream("experts_activation", OpKind::elementwise, kAct * rows * (up + ffn_local));
    grouped("experts_down", ffn_local, h);
    stream("moe_unpermute", OpKind::elementwise, permute);
    if (m.moe.shared_experts > 0) mlp(ffn * m.moe.shared_experts);
  } else {
    mlp(static_cast<double>(m.ffn_hidden));
  }
  lora();
  all_reduce("mlp_all_reduce");
  stream("residual_add", OpKind::elementwise, kAct * 3 * T * h);
}

template <class Sink>
void ServingCostModel::emit_embedding(const BatchShape& b, Sink& sink) const {
  // Vocab-parallel lookup (first stage), summed over TP.
  const double T = static_cast<double>(b.tokens()), h = static_cast<double>(d_.model.hidden);
  sink.kernel(IterationPart::shared, "embedding", OpCost{OpKind::embedding, 0, kAct * 2 * T * h}, false);
  sink.collective("embedding_all_reduce", ServingCollective::tp_all_reduce, b.tokens());
}

template <class Sink>
void ServingCostModel::emit_head(const BatchShape& b, Sink& sink) const {
  // LM head and sampling (last stage) for the tokens whose logits are needed: the last token of
  // each prefill chunk (vLLM computes logits for every scheduled sequence) and every verified
  // decode token. BF16, vocab-parallel; logits gathered to the first rank.
  const std::int64_t r = b.prefill_seqs + b.decode_tokens;
  if (r <= 0) return;
  const double rows = static_cast<double>(r), v = static_cast<double>(d_.model.vocab), tp = d_.tp;
  const double h = static_cast<double>(d_.model.hidden);
  sink.kernel(IterationPart::shared, "final_norm", OpCost{OpKind::norm, 0, kAct * 2 * rows * h}, false);
  sink.kernel(
      IterationPart::shared, "lm_head",
      OpCost{OpKind::gemm, 2 * rows * h * v / tp, kAct * (rows * h + h * v / tp + rows * v / tp), rows, v / tp, h},
      false);
  sink.kernel(IterationPart::shared, "sampling", OpCost{OpKind::elementwise, 0, 4.0 * rows * v * 2}, false);  // FP32
  sink.collective("logits_all_gather", ServingCollective::logits_gather, r);
}

void ServingCostModel::layer(const BatchShape& b, bool moe, bool windowed, Parts& p) const {
  // The token-proportional part depends on the token count alone: memoized.
  std::vector<double>& memo = moe ? moe_layer_memo_ : dense_layer_memo_;
  double s = memo_get(memo, b.tokens());
  if (std::isnan(s)) {
    Parts one;
    PriceSink sink{*this, one};
    emit_layer(b, moe, false, kShared, sink);
    s = one.shared;
    memo[static_cast<std::size_t>(b.tokens())] = s;
  }
  PriceSink sink{*this, p};
  emit_layer(b, moe, windowed, kAttention | kComm | kLora, sink);
  p.shared += s;
}

ServingCostModel::Parts ServingCostModel::forward(const BatchShape& b, bool lm_head) const {
  Parts p;
  // Layers of one kind cost the same: price one, count it `layers` times.
  const auto add_layers = [&](int layers, bool moe, bool windowed) {
    if (layers == 0) return;
    Parts one;
    layer(b, moe, windowed, one);
    p.shared += layers * one.shared;
    p.prefill_attention += layers * one.prefill_attention;
    p.decode_attention += layers * one.decode_attention;
    p.comm += layers * one.comm;
    p.lora += layers * one.lora;
  };
  if (d_.model.attention_window > 0 && b.window != d_.model.attention_window)
    throw std::logic_error("serving cost: a batch of a windowed model without the model's window");
  add_layers(dense_layers_ - dense_windowed_, false, false);
  add_layers(dense_windowed_, false, true);
  add_layers(moe_layers_ - moe_windowed_, true, false);
  add_layers(moe_windowed_, true, true);
  PriceSink sink{*this, p};
  emit_embedding(b, sink);
  if (lm_head) emit_head(b, sink);
  // Stage hand-offs: every stage's, summed (the list names each after its stage).
  sink.collective("stage_handoff", ServingCollective::handoff, b.tokens());
  return p;
}

std::vector<IterationOp> ServingCostModel::iteration_ops(const BatchShape& b) const {
  std::vector<IterationOp> out;
  if (b.tokens() <= 0) return out;
  ListSink sink{*this, out};
  emit_embedding(b, sink);
  int layer = 0;
  for (int s = 0; s < d_.pp; ++s) {
    sink.stage = s;
    for (int i = 0; i < stage_layers(d_, s); ++i, ++layer) {
      sink.layer = layer;
      emit_layer(b, layer >= dense_layers_, d_.model.windowed_layer(layer), kAll, sink);
    }
    sink.layer = -1;
    sink.collective("stage_handoff", ServingCollective::handoff, b.tokens());
  }
  emit_head(b, sink);
  return out;
}

double ServingCostModel::op_seconds(const IterationOp& op) const {
  if (!op.collective) return (op.quantized ? *d_.gemm_cost_model : *d_.cost_model).op_seconds(op.cost);
  return collective_s(op.op, op.ranks, op.bytes);
}

IterationTime ServingCostModel::iteration(const BatchShape& b) const {
  IterationTime it;
  if (b.tokens() <= 0) return it;
  const Parts p = forward(b, true);
  const double share_prefill = static_cast<double>(b.prefill_tokens) / static_cast<double>(b.tokens());
  it.prefill_s = p.shared * share_prefill + p.prefill_attention;
  it.decode_s = p.shared * (1 - share_prefill) + p.decode_attention;
  it.comm_s = p.comm;
  it.lora_s = p.lora;
  const ProfileServing& o = d_.overhead;
  it.overhead_s = 1e-6 * ((uses_cuda_graph(b) ? o.iteration_overhead_graph_us : o.iteration_overhead_eager_us) +
                          o.per_sequence_overhead_us * static_cast<double>(b.prefill_seqs + b.decode_seqs));
  if (b.spec_k > 0 && b.decode_seqs > 0) {
    const double k = b.spec_k;
    BatchShape step;  // one proposal step: one token per decode sequence over its context
    step.decode_seqs = b.decode_seqs;
    step.decode_tokens = b.decode_seqs;
    step.decode_kv_tokens = b.decode_kv_tokens;
    step.decode_attended_pairs = b.decode_kv_tokens;
    switch (d_.spec_method) {
      case SpecMethod::draft_model:
        if (draft_) {
          // k autoregressive draft steps over the decode sequences, and the draft's own prefill
          // of this iteration's prompt chunks (its KV cache must hold the prompts too).
          const Parts s = draft_->forward(step, true);
          double t = k * (s.shared + s.decode_attention + s.comm);
          if (b.prefill_tokens > 0) {
            BatchShape pre = b;
            pre.decode_seqs = pre.decode_tokens = 0;
            pre.decode_attended_pairs = pre.decode_kv_tokens = 0;
            const Parts q = draft_->forward(pre, false);
            t += q.shared + q.prefill_attention + q.comm;
          }
          it.draft_s = t;
        }
        break;
      case SpecMethod::eagle: {
        // EAGLE's head: about one decoder layer of the target, then the target's LM head, per step.
        Parts s;
        layer(step, false, false, s);
        const ModelSpec& m = d_.model;
        const double rows = static_cast<double>(b.decode_seqs), v = static_cast<double>(m.vocab), h = m.hidden;
        const double head =
            d_.cost_model->op_seconds(OpCost{OpKind::gemm, 2 * rows * h * v / d_.tp,
                                             kAct * (rows * h + h * v / d_.tp + rows * v / d_.tp), rows, v / d_.tp, h});
        it.draft_s = k * (s.shared + s.decode_attention + s.comm + head);
        break;
      }
      case SpecMethod::ngram:
        // Prompt lookup on the CPU: one lookup proposes all k tokens of a sequence.
        it.draft_s = 1e-6 * o.ngram_lookup_us * static_cast<double>(b.decode_seqs);
        break;
      case SpecMethod::none:
        break;
    }
  }
  it.total_s = it.prefill_s + it.decode_s + it.comm_s + it.overhead_s + it.draft_s + it.lora_s;
  return it;
}

}  // namespace ctwin
