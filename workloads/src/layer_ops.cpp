#include "workloads/layer_ops.hpp"

#include <algorithm>
#include <iterator>

#include "workloads/model_dims.hpp"

namespace ctwin {

const char* to_string(CommGroup g) {
  switch (g) {
    case CommGroup::tp:
      return "tp";
    case CommGroup::cp:
      return "cp";
    case CommGroup::ep:
      return "ep";
    case CommGroup::dp:
      return "dp";
    case CommGroup::pp:
      return "pp";
    case CommGroup::embedding:
      return "embedding";
    case CommGroup::edp:
      return "edp";
  }
  return "?";
}

CrossEntropyBytes cross_entropy_bytes(CrossEntropyKernel k, double e) {
  switch (k) {
    case CrossEntropyKernel::fp32:
      // Megatron's VocabParallelCrossEntropy: cast (read e, write 4), max (read 4), subtract,
      // exp and divide in place (read 4, write 4 each), sum (read 4); backward scales the saved
      // softmax in place (read 4, write 4) and autograd casts it back (read 4, write e).
      return {.fwd = e + 36, .bwd = 12 + e, .resident = e + 4};
    case CrossEntropyKernel::native:
      // The same steps in three jit-fused functions: cast and max (read e, write 4), subtract, exp
      // and sum (read 4, write 4), divide (read 4, write 4); backward one kernel (read 4, write e).
      return {.fwd = e + 20, .bwd = 4 + e, .resident = e + 4};
    case CrossEntropyKernel::fused:
      // Forward reads the logits once for their max and sum of exponentials; backward reads
      // them again and writes the gradient.
      return {.fwd = e, .bwd = 2 * e, .resident = 2 * e};
  }
  return {};
}

double metric_cross_entropy_bytes(double e) {
  // Autocast's cast to FP32 (read e, write 4), then log_softmax over a row too wide for shared
  // memory: a pass for the max, one for the sum of exponentials, one reading and writing the
  // result (read 12, write 4). nll_loss gathers one entry a row.
  return e + 4 + 16;
}

LayerShape layer_shape(const ModelSpec&, const TrainingConfig& cfg) {
  LayerShape s;
  // With context parallelism each GPU holds seq/cp tokens of every sequence but its queries
  // attend over the whole sequence (load-balanced causal chunks, as Megatron-CP and Llama 3).
  s.seq = static_cast<double>(cfg.seq_len);
  s.tokens = cfg.micro_batch * s.seq / cfg.parallel.cp;
  s.cp = cfg.parallel.cp;
  s.tp = cfg.parallel.tp;
  s.sequence_parallel = cfg.parallel.sequence_parallel && cfg.parallel.tp > 1;
  s.flash = cfg.attention != AttentionKernel::standard;
  s.attention_impl = cfg.attention == AttentionKernel::flash2   ? AttentionImpl::flash2
                     : cfg.attention == AttentionKernel::triton ? AttentionImpl::triton
                                                                : AttentionImpl::flash;
  s.cross_entropy = cfg.cross_entropy;
  s.logit_metric_passes = cfg.logit_metric_passes;
  s.dropout = cfg.dropout;
  s.cp_ring = cfg.parallel.cp_comm == Parallelism::CpComm::ring;
  s.bytes_per_elem = cfg.precision.weight_bytes;
  s.dtype = cfg.precision.compute;
  s.microbatches = std::max(1, cfg.grad_accum());
  return s;
}

namespace {

// A GEMM (T x k) @ (k x n): forward 2Tkn FLOPs; backward computes dgrad and wgrad, 4Tkn.
LayerItem gemm(std::string name, double tokens, double k, double n, double e) {
  LayerItem it;
  it.name = std::move(name);
  it.fwd = OpCost{OpKind::gemm, 2 * tokens * k * n, e * (tokens * k + k * n + tokens * n), tokens, n, k};
  it.bwd = OpCost{OpKind::gemm, 4 * tokens * k * n, 2 * e * (tokens * k + k * n + tokens * n), tokens, n, k};
  return it;
}

// A linear layer's GEMM (FP8 under FP8 training).
LayerItem linear(std::string name, double tokens, double k, double n, double e) {
  LayerItem it = gemm(std::move(name), tokens, k, n, e);
  it.linear = true;
  return it;
}

// A memory-bound kernel moving `fwd_bytes` forward and `bwd_bytes` backward (none: no kernel).
LayerItem memory_bound(std::string name, OpKind kind, double fwd_bytes, double bwd_bytes) {
  LayerItem it;
  it.name = std::move(name);
  it.fwd = OpCost{kind, 0, fwd_bytes};
  it.bwd = OpCost{kind, 0, bwd_bytes};
  return it;
}

// A memory-bound kernel reading `read` and writing `write` elements; backward moves twice as much.
LayerItem streaming(std::string name, OpKind kind, double read, double write, double e) {
  return memory_bound(std::move(name), kind, e * (read + write), 2 * e * (read + write));
}

// Megatron's conjugate operators: f is identity forward and all-reduce backward (before a
// column-parallel GEMM); g is all-reduce forward and identity backward (after a row-parallel
// one). With sequence parallelism they become all-gather / reduce-scatter pairs. The size is
// the whole sequence's activations either way (reduce-scatter's nccl-tests size is its input).
LayerItem tp_conjugate(const LayerShape& s, double hidden, bool is_f) {
  LayerItem it;
  it.is_comm = true;
  it.group = CommGroup::tp;
  it.comm_bytes = s.tokens * hidden * s.bytes_per_elem;
  if (s.sequence_parallel) {
    it.name = is_f ? "tp_all_gather" : "tp_reduce_scatter";
    it.fwd_comm = is_f ? CollectiveOp::all_gather : CollectiveOp::reduce_scatter;
    it.bwd_comm = is_f ? CollectiveOp::reduce_scatter : CollectiveOp::all_gather;
  } else {
    it.name = is_f ? "tp_f" : "tp_g";
    (is_f ? it.bwd_comm : it.fwd_comm) = CollectiveOp::all_reduce;
  }
  return it;
}
LayerItem comm_f(const LayerShape& s, double hidden) { return tp_conjugate(s, hidden, true); }
LayerItem comm_g(const LayerShape& s, double hidden) { return tp_conjugate(s, hidden, false); }

}  // namespace

AttentionShape sequence_attention(double seqs, double seq) {
  return AttentionShape{seqs * seq, seqs * causal_pairs(seq, 0), seqs * seq};
}

AttentionShape chunk_attention(double seqs, double chunk, double context) {
  return AttentionShape{seqs * chunk, seqs * (chunk * context + chunk * (chunk + 1) / 2), seqs * (context + chunk)};
}

OpCost attention_forward(const ModelSpec& m, const AttentionShape& a, double tp, double bytes_per_elem) {
  const ModelDims d = model_dims(m);
  const double heads_local = m.heads / tp;
  const double flops = 2 * a.attended_pairs * heads_local * (d.qk_head_dim + d.pv_head_dim);
  const double io =
      bytes_per_elem * (a.query_tokens * (d.q_dim + d.o_in) + a.kv_tokens_read * (d.kv_dim + d.v_dim)) / tp;
  OpCost c{OpKind::attention, flops, io};
  c.query_tokens = a.query_tokens;
  c.attended_pairs = a.attended_pairs;
  c.kv_tokens = a.kv_tokens_read;
  return c;
}

OpCost attention_backward(const OpCost& fwd) {
  OpCost b = fwd;
  b.flops = 2.5 * fwd.flops;
  b.bytes = 2 * fwd.bytes;
  return b;
}

double moe_dispatch_copies(const MoeSpec& moe, int ep, MoeDispatcher dispatcher) {
  const double k = moe.top_k;
  if (dispatcher == MoeDispatcher::alltoall || ep <= 1) return k;
  // P(a rank holds none of the token's k experts) = C(E - E/ep, k) / C(E, k), as a product.
  const double experts = moe.experts, others = experts - experts / ep;
  double none = 1;
  for (int i = 0; i < moe.top_k; ++i) none *= std::max(0.0, others - i) / (experts - i);
  return ep * (1 - none);
}

std::vector<LayerItem> transformer_layer(const ModelSpec& m, const LayerShape& s, bool moe, int ep,
                                         double load_imbalance, MoeDispatcher dispatcher, int expert_tp) {
  const double e = s.bytes_per_elem, t = s.tp, T = s.tokens, h = static_cast<double>(m.hidden);
  // Tokens each GPU normalises: all of them, or 1/t with sequence parallelism.
  const double T_local = s.sequence_parallel ? T / t : T;
  const ModelDims dims = model_dims(m);
  const double q_dim = dims.q_dim, kv_dim = dims.kv_dim, v_dim = dims.v_dim, o_in = dims.o_in;
  std::vector<LayerItem> items;
  items.push_back(streaming("attn_norm", OpKind::norm, T_local * h, T_local * h, e));
  if (t > 1) items.push_back(comm_f(s, h));
  if (m.mla.enabled()) {
    // Low-rank projections: x -> q latent -> q; x -> kv latent -> k_nope, v (DeepSeek-V2 MLA).
    const double ql = m.mla.q_lora_rank > 0 ? m.mla.q_lora_rank : 0;
    if (ql > 0) {
      items.push_back(linear("q_down", T, h, ql, e));
      items.push_back(linear("q_up", T, ql, q_dim / t, e));
    } else {
      items.push_back(linear("q_proj", T, h, q_dim / t, e));
    }
    items.push_back(linear("kv_down", T, h, m.mla.kv_lora_rank + m.mla.qk_rope_head_dim, e));
    items.push_back(linear("kv_up", T, m.mla.kv_lora_rank,
                           m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.v_head_dim) / t, e));
  } else {
    items.push_back(linear("qkv", T, h, (q_dim + 2 * kv_dim) / t, e));
  }
  // Ring attention needs blockwise (flash) attention; unfused attention gathers K/V instead.
  const bool ring = s.cp > 1 && s.cp_ring && s.flash;
  if (s.cp > 1 && !ring) {
    // Context parallelism, all-gather form (Llama 3): gather K and V of the whole sequence
    // before attention; reduce-scatter their gradients in backward.
    LayerItem kv;
    kv.name = "cp_kv_all_gather";
    kv.is_comm = true;
    kv.group = CommGroup::cp;
    kv.comm_bytes = s.cp * T * (kv_dim + v_dim) / t * e;
    kv.fwd_comm = CollectiveOp::all_gather;
    kv.bwd_comm = CollectiveOp::reduce_scatter;
    items.push_back(kv);
  }
  {
    // Causal attention: QK^T and PV each 2*s*s*dim per sequence, half of it masked away.
    const double seqs = T / s.seq;
    const double heads_local = m.heads / t;
    // Per-head widths: GQA shares K/V heads but every query head still attends at full width.
    const double qk_dim = dims.qk_head_dim;
    const double pv_dim = dims.pv_head_dim;
    // Flash attention skips the tiles the mask hides, a sliding window's outside it too; unfused
    // attention (below) scores all s x s pairs whatever the mask.
    const double pairs = causal_pairs(s.seq, s.window);
    const double flops = seqs * heads_local * 2 * pairs * (qk_dim + pv_dim);  // 2*pairs*(dq+dv)
    if (s.flash) {
      LayerItem it;
      it.name = "attention";
      const double io = e * T * (q_dim + kv_dim + v_dim + o_in) / t;
      it.fwd = OpCost{OpKind::attention, flops, io};
      // Geometry: T local queries, each over half the sequence on average (causal; with a window at
      // most w tokens); under CP each GPU reads the whole sequence's K/V (cp chunks of T).
      it.fwd.dtype = s.dtype;
      it.fwd.attention_impl = s.attention_impl;
      it.fwd.query_tokens = T;
      it.fwd.attended_pairs = seqs * pairs;
      it.fwd.kv_tokens = s.cp * T;
      // Without a window, equal to attention_forward(m, sequence_attention(seqs, s.seq), t, e)
      // (tests/workloads/test_attention_shape.cpp checks the two agree); with one, its pairs are
      // the window's (tests/workloads/test_sliding_window.cpp).
      it.bwd = attention_backward(it.fwd);
      it.attention_core = true;
      if (ring) {
        it.name = "ring_attention";
        it.group = CommGroup::cp;
        it.ring_steps = s.cp;
        it.comm_bytes = T * (kv_dim + v_dim) / t * e;  // this rank's K/V chunk
        // Each merge reads the FP32 accumulator and the block's partial result (e bytes) and
        // writes the accumulator back: 4 + e + 4 bytes per element.
        const double merge = 8 + e;
        it.ring_merge_fwd_bytes = merge * T * o_in / t;
        it.ring_merge_bwd_bytes = merge * T * (q_dim + kv_dim + v_dim) / t;
      }
      items.push_back(it);
    } else {
      // Unfused attention (Megatron-LM before flash attention): two batched GEMMs over the
      // full s x s scores (the causal mask is applied after, so nothing is skipped) and a
      // fused scale-mask-softmax(-dropout) kernel streaming the scores.
      const double bh = seqs * heads_local;
      LayerItem qk = gemm("attn_scores", bh * s.seq, qk_dim, s.seq, e);
      LayerItem pv = gemm("attn_context", bh * s.seq, s.seq, pv_dim, e);
      qk.fwd.m = qk.bwd.m = s.seq;  // per head: (s x d) @ (d x s)
      pv.fwd.m = pv.bwd.m = s.seq;
      const double scores = bh * s.seq * s.seq;
      // Read scores, write probabilities (and a 1-byte mask and the dropped-out copy).
      const double per_elem = 2 * e + (s.dropout ? 1 + e : 0);
      LayerItem sm;
      sm.name = "softmax";
      sm.fwd = OpCost{OpKind::elementwise, 0, scores * per_elem};
      sm.bwd = OpCost{OpKind::elementwise, 0, scores * (3 * e + (s.dropout ? 1 : 0))};
      qk.attention_core = sm.attention_core = pv.attention_core = true;
      items.push_back(qk);
      items.push_back(sm);
      items.push_back(pv);
    }
  }
  items.push_back(linear("attn_out", T, o_in / t, h, e));
  if (t > 1) items.push_back(comm_g(s, h));
  items.push_back(streaming("attn_residual", OpKind::elementwise, 2 * T_local * h, T_local * h, e));
  items.push_back(streaming("mlp_norm", OpKind::norm, T_local * h, T_local * h, e));
  const bool gated = is_gated(m.activation);
  // groups > 1: the experts on this GPU as one grouped GEMM, tokens split evenly over them.
  // width_tp: the ranks the MLP's width is split over.
  auto mlp = [&](const std::string& prefix, double tokens, double ffn, double groups = 0, double width_tp = 0) {
    const double wt = width_tp > 0 ? width_tp : t;
    const double up_n = (gated ? 2 : 1) * ffn / wt;
    auto matmul = [&](const std::string& name, double k, double n) {
      LayerItem g = linear(name, tokens, k, n, e);
      if (groups > 0) {
        // Every expert's weights are read once per GEMM, not once for the whole group.
        g.fwd.kind = g.bwd.kind = OpKind::grouped_gemm;
        g.fwd.groups = g.bwd.groups = groups;
        g.fwd.bytes = e * (tokens * k + groups * k * n + tokens * n);
        g.bwd.bytes = 2 * g.fwd.bytes;
      }
      items.push_back(g);
    };
    matmul(prefix + "up", h, up_n);
    items.push_back(
        streaming(prefix + to_string(m.activation), OpKind::elementwise, tokens * up_n, tokens * ffn / wt, e));
    items.back().fuses_fp8_cast = true;
    matmul(prefix + "down", ffn / wt, h);
  };
  const bool moe_here = moe && m.moe.enabled();
  // MoE parallel folding: the routed experts see this rank's own tokens (sequence parallel).
  const bool folded = moe_here && expert_tp == 1 && t > 1;
  if (t > 1 && !folded) items.push_back(comm_f(s, h));
  if (moe_here) {
    const double k = m.moe.top_k, experts = m.moe.experts;
    // The tokens this rank routes: all of them, gathered over TP, or its own 1/tp when folded.
    const double Tr = folded ? T_local : T;
    items.push_back(gemm("router", Tr, h, experts, e));
    // Softmax and top-k over the router logits (FP32), and the load-balancing statistics.
    LayerItem topk;
    topk.name = "router_topk";
    topk.fwd = OpCost{OpKind::elementwise, 0, 4 * Tr * experts * 2 + Tr * k * (4 + 8)};
    topk.bwd = OpCost{OpKind::elementwise, 0, 4 * Tr * experts * 3};
    items.push_back(topk);
    // Each token goes to top_k experts spread over the ep ranks: every rank sends and receives
    // T x copies x h activations (balanced; copies = top_k, or fewer with DeepEP), once to
    // dispatch and once to combine.
    const double routed = Tr * k * load_imbalance;
    // Permutation (Megatron's alltoall dispatcher, vLLM/DeepEP alike): gather each token's k
    // copies into expert order before dispatch; after combine, scatter them back weighted by
    // the router's probabilities. Memory-bound: T*h read and T*k*h written, and the reverse.
    LayerItem permute;
    permute.name = "moe_permute";
    permute.fwd = OpCost{OpKind::elementwise, 0, e * (Tr * h + Tr * k * h) + 8 * Tr * k};
    permute.bwd = permute.fwd;
    items.push_back(permute);
    if (ep > 1) {
      LayerItem a2a;
      a2a.name = "ep_dispatch";
      a2a.is_comm = true;
      a2a.group = CommGroup::ep;
      a2a.comm_bytes = Tr * moe_dispatch_copies(m.moe, ep, dispatcher) * h * e;
      a2a.fwd_comm = CollectiveOp::all_to_all;
      a2a.bwd_comm = CollectiveOp::all_to_all;
      items.push_back(a2a);
    }
    const double local_experts = std::max(1.0, experts / std::max(1, ep));
    mlp("expert_", routed, static_cast<double>(m.moe.expert_ffn_hidden), local_experts, folded ? 1.0 : t);
    if (ep > 1) {
      LayerItem a2a = items[items.size() - 4];  // the dispatch, mirrored
      a2a.name = "ep_combine";
      items.push_back(a2a);
    }
    LayerItem unpermute = permute;
    unpermute.name = "moe_unpermute";
    items.push_back(unpermute);
    if (m.moe.shared_experts > 0) {
      // Shared experts are TP-split like a dense MLP: folded, they gather and scatter on their own.
      if (folded) items.push_back(comm_f(s, h));
      mlp("shared_", T, static_cast<double>(m.moe.expert_ffn_hidden) * m.moe.shared_experts);
      if (folded) items.push_back(comm_g(s, h));
    }
  } else {
    mlp("mlp_", T, static_cast<double>(m.ffn_hidden));
  }
  if (t > 1 && !folded) items.push_back(comm_g(s, h));
  items.push_back(streaming("mlp_residual", OpKind::elementwise, 2 * T_local * h, T_local * h, e));
  if (s.dtype == Dtype::fp8) return fp8_training_items(std::move(items), s);
  return items;
}

std::vector<LayerItem> embedding_items(const ModelSpec& m, const LayerShape& s) {
  const double h = static_cast<double>(m.hidden);
  std::vector<LayerItem> items;
  items.push_back(streaming("embedding", OpKind::embedding, s.tokens * h, s.tokens * h, s.bytes_per_elem));
  // Vocab-parallel: each TP rank looks up its rows only, so the partial outputs are summed, g's
  // all-reduce (reduce-scatter with SP), as Megatron's VocabParallelEmbedding does.
  if (s.tp > 1) items.push_back(comm_g(s, h));
  if (s.dtype == Dtype::fp8) return fp8_training_items(std::move(items), s);
  return items;
}

std::vector<LayerItem> head_items(const ModelSpec& m, const LayerShape& s) {
  const double h = static_cast<double>(m.hidden), v = static_cast<double>(m.vocab), t = s.tp;
  std::vector<LayerItem> items;
  const double T_local = s.sequence_parallel ? s.tokens / t : s.tokens;
  items.push_back(streaming("final_norm", OpKind::norm, T_local * h, T_local * h, s.bytes_per_elem));
  if (t > 1) items.push_back(comm_f(s, h));
  items.push_back(gemm("lm_head", s.tokens, h, v / t, s.bytes_per_elem));
  const double logits = s.tokens * v / t;
  const CrossEntropyBytes ce = cross_entropy_bytes(s.cross_entropy, s.bytes_per_elem);
  items.push_back(memory_bound("cross_entropy", OpKind::loss, ce.fwd * logits, ce.bwd * logits));
  if (s.logit_metric_passes > 0) {
    const double metric = s.logit_metric_passes * metric_cross_entropy_bytes(s.bytes_per_elem) * logits;
    items.push_back(memory_bound("train_metrics", OpKind::loss, metric, 0));
  }
  if (s.dtype == Dtype::fp8) return fp8_training_items(std::move(items), s);  // the LM head stays BF16
  return items;
}

LayerItem generic_layer_item(const GenericLayer& l, const TrainingConfig& cfg) {
  LayerItem it;
  it.name = l.name;
  const double b = cfg.micro_batch, e = cfg.precision.weight_bytes;
  // Unless given, a layer's traffic is its activations written once and read once.
  const double traffic = l.hbm_bytes > 0 ? l.hbm_bytes : 2 * l.activation_bytes;
  const double bytes = l.params * e + traffic * b;
  it.fwd = OpCost{OpKind::gemm, l.fwd_flops * b, bytes};
  it.bwd = OpCost{OpKind::gemm, 2 * l.fwd_flops * b, 2 * bytes};
  return it;
}

namespace {

// The compute item before (step -1) or after (+1) index i, skipping communication; null at the ends.
const LayerItem* compute_neighbour(const std::vector<LayerItem>& items, std::size_t i, int step) {
  for (auto j = static_cast<std::ptrdiff_t>(i) + step; j >= 0 && j < static_cast<std::ptrdiff_t>(items.size());
       j += step) {
    if (!items[static_cast<std::size_t>(j)].is_comm) return &items[static_cast<std::size_t>(j)];
  }
  return nullptr;
}

}  // namespace

std::vector<LayerItem> fp8_training_items(std::vector<LayerItem> items, const LayerShape& s) {
  const double e = s.bytes_per_elem;
  std::vector<LayerItem> out;
  out.reserve(2 * items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    LayerItem it = items[i];
    if (it.is_comm) {
      out.push_back(std::move(it));
      continue;
    }
    if (!it.linear) {
      it.fwd.dtype = it.bwd.dtype = Dtype::bf16;  // attention, norms, LM head, router: BF16
      out.push_back(std::move(it));
      continue;
    }
    // (T x k) @ (k x n) per group: FP8 operands (1 byte), BF16 output; backward twice the traffic.
    const double T = it.fwd.m, k = it.fwd.k, n = it.fwd.n, weights = it.fwd.groups * k * n;
    it.fwd.dtype = it.bwd.dtype = Dtype::fp8;
    it.bwd.split_accumulator = true;  // TE's dgrad and wgrad: _2X_ACC_DGRAD, _2X_ACC_WGRAD
    it.fwd.bytes = T * k + weights + e * T * n;
    it.bwd.bytes = 2 * it.fwd.bytes;
    // TE fuses the input cast into the norm before (LayerNormLinear, LayerNormMLP) or the
    // activation (fc2); the FP8 input's transpose for wgrad then runs in backward (read 1, write
    // 1 byte). Unfused, forward runs cast_transpose: read e, write 1 + 1 bytes per element.
    const LayerItem* before = compute_neighbour(items, i, -1);
    const LayerItem* after = compute_neighbour(items, i, +1);
    const bool input_fused = before != nullptr && (before->fwd.kind == OpKind::norm || before->fuses_fp8_cast);
    // The output gradient's cast_transpose (read e, write 1 + 1), fused into the activation's
    // backward when one follows (fc1: dgelu / dswiglu with cast_transpose).
    const bool grad_fused = after != nullptr && after->fuses_fp8_cast;
    LayerItem cast;
    cast.name = it.name + "_fp8_cast";
    cast.fwd = OpCost{OpKind::elementwise, 0, input_fused ? 0 : (e + 2) * T * k};
    cast.bwd = OpCost{OpKind::elementwise, 0, (grad_fused ? 0 : (e + 2) * T * n) + (input_fused ? 2 * T * k : 0)};
    // Weights: cast and transposed once per step (Megatron's is_first_microbatch caches them),
    // read e, write 1 + 1 bytes, spread over the step's micro-batches.
    cast.fwd.bytes += (e + 2) * weights / s.microbatches;
    cast.fwd.dtype = cast.bwd.dtype = Dtype::bf16;
    // Before the collectives that lead into the GEMM, so a TP collective still overlaps the GEMM
    // (tp_comm_overlap) rather than the cast.
    auto at = out.end();
    while (at != out.begin() && std::prev(at)->is_comm) --at;
    out.insert(at, std::move(cast));
    out.push_back(std::move(it));
  }
  return out;
}

double forward_flops(const std::vector<LayerItem>& items) {
  double f = 0;
  for (const auto& it : items) {
    if (!it.is_comm) f += it.fwd.flops;
  }
  return f;
}

}  // namespace ctwin
