#include "workloads/serving_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "workloads/layer_ops.hpp"
#include "workloads/model_dims.hpp"

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
  dense_layers_ = m.layers - moe_layers_;
  kv_bytes_ = kv_bytes_per_elem(d_.kv_dtype);
  w_bytes_ = weight_bytes_per_param(d_.quantization);
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
  return estimate_collective(d_.cluster, call, d_.collectives).time.seconds();
}

double ServingCostModel::tp_all_reduce_s(std::int64_t tokens) const {
  if (d_.tp <= 1 || tokens <= 0) return 0;
  double v = memo_get(all_reduce_memo_, tokens);
  if (std::isnan(v)) {
    v = collective_s(CollectiveOp::all_reduce, tp_ranks_, static_cast<double>(tokens) * d_.model.hidden * kAct);
    all_reduce_memo_[static_cast<std::size_t>(tokens)] = v;
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

double ServingCostModel::layer_shared_s(double T, bool moe) const {
  const ModelSpec& m = d_.model;
  const ModelDims& dims = dims_;
  const CostModel& cm = *d_.cost_model;
  const CostModel& gm = *d_.gemm_cost_model;
  const double h = dims.hidden, tp = d_.tp;
  // A GEMM (T x k) @ (k x n) at the quantization's weight bytes and peak; weights read once, at
  // the profile's weight-read share of the streaming rate (what bounds small-batch decode).
  const double wread = 1 / d_.overhead.weight_read_efficiency;
  auto gemm = [&](double rows, double k, double n) {
    OpCost op{OpKind::gemm, 2 * rows * k * n, wread * w_bytes_ * k * n + kAct * (rows * k + rows * n), rows, n, k};
    return gm.op_seconds(op);
  };
  auto stream = [&](OpKind kind, double bytes) { return cm.op_seconds(OpCost{kind, 0, bytes}); };
  double s = 0;
  s += 2 * stream(OpKind::norm, kAct * 2 * T * h);         // attention and MLP norms
  s += 2 * stream(OpKind::elementwise, kAct * 3 * T * h);  // the two residual adds
  if (m.mla.enabled()) {
    const double ql = m.mla.q_lora_rank;
    s += ql > 0 ? gemm(T, h, ql) + gemm(T, ql, dims.q_dim / tp) : gemm(T, h, dims.q_dim / tp);
    s += gemm(T, h, m.mla.kv_lora_rank + m.mla.qk_rope_head_dim);
    s += gemm(T, m.mla.kv_lora_rank, m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.v_head_dim) / tp);
  } else {
    s += gemm(T, h, (dims.q_dim + 2 * dims.kv_dim) / tp);
  }
  s += gemm(T, dims.o_in / tp, h);
  const bool gated = is_gated(m.activation);
  auto mlp = [&](double ffn) {
    const double up = (gated ? 2 : 1) * ffn / tp;
    return gemm(T, h, up) + stream(OpKind::elementwise, kAct * T * (up + ffn / tp)) + gemm(T, ffn / tp, h);
  };
  if (moe && m.moe.enabled()) {
    const double E = m.moe.experts, k = m.moe.top_k, ffn = static_cast<double>(m.moe.expert_ffn_hidden);
    const int ep = d_.ep();
    // Router (BF16, replicated) and its top-k.
    s += cm.op_seconds(OpCost{OpKind::gemm, 2 * T * h * E, kAct * (T * h + h * E + T * E), T, E, h});
    s += stream(OpKind::elementwise, 4 * T * E * 2 + T * k * 12);
    // Experts: with EP each rank holds E/ep whole experts; else every expert sharded over TP.
    // Tokens are replicated over the TP group (dp = 1), so each rank runs its experts over its
    // share of the T*k routed rows and the TP all-reduce below combines them (vLLM FusedMoE).
    const double local_experts = E / ep;
    const double ffn_local = ep > 1 ? ffn : ffn / tp;
    const double rows = T * k / ep;
    const double touched = local_experts * (1 - std::pow(1 - k / E, T));
    const double up = (gated ? 2 : 1) * ffn_local;
    auto grouped = [&](double kk, double n) {
      OpCost op{OpKind::grouped_gemm,
                2 * rows * kk * n,
                wread * w_bytes_ * touched * kk * n + kAct * (rows * kk + rows * n),
                rows,
                n,
                kk};
      op.groups = std::max(1.0, touched);
      return gm.op_seconds(op);
    };
    s += stream(OpKind::elementwise, kAct * (T * h + T * k * h) + 8 * T * k) * 2;  // permute and unpermute
    s += grouped(h, up) + stream(OpKind::elementwise, kAct * rows * (up + ffn_local)) + grouped(ffn_local, h);
    if (m.moe.shared_experts > 0) s += mlp(ffn * m.moe.shared_experts);
  } else {
    s += mlp(static_cast<double>(m.ffn_hidden));
  }
  return s;
}

void ServingCostModel::layer(const BatchShape& b, bool moe, Parts& p) const {
  // The token-proportional part depends on the token count alone: memoized.
  std::vector<double>& memo = moe ? moe_layer_memo_ : dense_layer_memo_;
  double s = memo_get(memo, b.tokens());
  if (std::isnan(s)) {
    s = layer_shared_s(static_cast<double>(b.tokens()), moe);
    memo[static_cast<std::size_t>(b.tokens())] = s;
  }
  const ModelSpec& m = d_.model;
  const CostModel& cm = *d_.cost_model;
  const double tp = d_.tp;
  // Attention: each part's own kernel over its sums (paged attention reads the actual contexts).
  if (b.prefill_tokens > 0) {
    const AttentionShape a{static_cast<double>(b.prefill_tokens), b.prefill_attended_pairs, b.prefill_kv_tokens};
    p.prefill_attention += cm.op_seconds(attention_forward(m, a, tp, kv_bytes_));
  }
  if (b.decode_tokens > 0) {
    const AttentionShape a{static_cast<double>(b.decode_tokens), b.decode_attended_pairs, b.decode_kv_tokens};
    p.decode_attention += cm.op_seconds(attention_forward(m, a, tp, kv_bytes_));
  }
  p.shared += s;
  p.comm += 2 * tp_all_reduce_s(b.tokens());
}

ServingCostModel::Parts ServingCostModel::forward(const BatchShape& b, bool lm_head) const {
  Parts p;
  const ModelSpec& m = d_.model;
  const CostModel& cm = *d_.cost_model;
  // Layers of one kind cost the same: price one, count it `layers` times.
  const auto add_layers = [&](int layers, bool moe) {
    if (layers == 0) return;
    Parts one;
    layer(b, moe, one);
    p.shared += layers * one.shared;
    p.prefill_attention += layers * one.prefill_attention;
    p.decode_attention += layers * one.decode_attention;
    p.comm += layers * one.comm;
  };
  add_layers(dense_layers_, false);
  add_layers(moe_layers_, true);
  const double T = static_cast<double>(b.tokens()), h = static_cast<double>(m.hidden), tp = d_.tp;
  // Embedding (first stage): vocab-parallel lookup summed over TP.
  p.shared += cm.op_seconds(OpCost{OpKind::embedding, 0, kAct * 2 * T * h});
  p.comm += tp_all_reduce_s(b.tokens());
  if (lm_head) {
    // LM head and sampling (last stage) for the tokens whose logits are needed: the last token
    // of each prefill chunk (vLLM computes logits for every scheduled sequence) and every
    // verified decode token. BF16, vocab-parallel; logits gathered to the first rank.
    const double rows = static_cast<double>(b.prefill_seqs + b.decode_tokens), v = static_cast<double>(m.vocab);
    if (rows > 0) {
      p.shared += cm.op_seconds(OpCost{OpKind::norm, 0, kAct * 2 * rows * h});
      p.shared += cm.op_seconds(
          OpCost{OpKind::gemm, 2 * rows * h * v / tp, kAct * (rows * h + h * v / tp + rows * v / tp), rows, v / tp, h});
      p.shared += cm.op_seconds(OpCost{OpKind::elementwise, 0, 4.0 * rows * v * 2});  // softmax and sampling, FP32
      if (d_.tp > 1) {
        const auto r = static_cast<std::int64_t>(rows);
        double g = memo_get(logits_memo_, r);
        if (std::isnan(g)) {
          g = collective_s(CollectiveOp::all_gather, tp_ranks_, rows * v * kAct);
          logits_memo_[static_cast<std::size_t>(r)] = g;
        }
        p.comm += g;
      }
    }
  }
  if (d_.pp > 1 && b.tokens() > 0) {
    // Stage hand-offs: hidden states and the residual (vLLM's IntermediateTensors), BF16.
    double v = memo_get(handoff_memo_, b.tokens());
    if (std::isnan(v)) {
      v = 0;
      for (int s = 0; s + 1 < d_.pp; ++s) {
        const std::vector<GpuId> pair{GpuId(static_cast<std::uint32_t>(s * d_.tp)),
                                      GpuId(static_cast<std::uint32_t>((s + 1) * d_.tp))};
        v += collective_s(CollectiveOp::send_recv, pair, 2 * T * h * kAct);
      }
      handoff_memo_[static_cast<std::size_t>(b.tokens())] = v;
    }
    p.comm += v;
  }
  return p;
}

IterationTime ServingCostModel::iteration(const BatchShape& b) const {
  IterationTime it;
  if (b.tokens() <= 0) return it;
  const Parts p = forward(b, true);
  const double share_prefill = static_cast<double>(b.prefill_tokens) / static_cast<double>(b.tokens());
  it.prefill_s = p.shared * share_prefill + p.prefill_attention;
  it.decode_s = p.shared * (1 - share_prefill) + p.decode_attention;
  it.comm_s = p.comm;
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
        layer(step, false, s);
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
  it.total_s = it.prefill_s + it.decode_s + it.comm_s + it.overhead_s + it.draft_s;
  return it;
}

}  // namespace ctwin
