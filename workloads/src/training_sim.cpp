#include "workloads/training_sim.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "sim/engine.hpp"
#include "sim/error.hpp"
#include "sim/streams.hpp"
#include "topology/collective.hpp"
#include "topology/network.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/pipeline_schedule.hpp"

namespace ctwin {

double model_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg) {
  if (m.is_generic()) {
    double fwd = 0;
    for (const auto& l : m.generic_layers) fwd += l.fwd_flops;
    return 3.0 * fwd * cfg.global_batch;  // forward plus a backward of twice its FLOPs
  }
  const ParamCounts pc = count_parameters(m);
  const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  const double q_dim = m.mla.enabled() ? m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim)
                                       : static_cast<double>(m.heads) * m.effective_head_dim();
  // 6N per token for the weight GEMMs (2 forward, 4 backward), plus QK^T and PV: 4*s*h_q
  // forward per token per layer, 12*s*h_q with backward (Narayanan et al. 2021; PaLM App. B).
  return tokens * (6.0 * pc.matmul_per_token + 12.0 * m.layers * cfg.seq_len * q_dim);
}

double recompute_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg) {
  const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  if (m.is_generic()) {
    double fwd = 0;
    for (const auto& l : m.generic_layers) fwd += l.fwd_flops;
    return cfg.recompute == Recompute::full ? fwd * cfg.global_batch : 0.0;
  }
  const ParamCounts pc = count_parameters(m);
  const double q_dim = m.mla.enabled() ? m.heads * static_cast<double>(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim)
                                       : static_cast<double>(m.heads) * m.effective_head_dim();
  // The attention core's forward (QK^T, PV) in the same non-causal convention as model FLOPs.
  const double attention_fwd = 4.0 * m.layers * cfg.seq_len * q_dim * tokens;
  switch (cfg.recompute) {
    case Recompute::none:
      return 0;
    case Recompute::selective:
      return attention_fwd;  // Korthikanti et al.: the attention core again
    case Recompute::full: {
      // Every layer's forward again; the LM head and embedding are not recomputed.
      const double layer_weights = pc.active_per_token - pc.embedding - pc.lm_head - pc.norms;
      return 2.0 * layer_weights * tokens + attention_fwd;
    }
  }
  return 0;
}

namespace {

// What a task is, for the breakdown and the trace.
enum class TaskClass : std::uint8_t { compute, optimizer, comm_tp, comm_cp, comm_ep, comm_dp, comm_pp };

TaskClass class_of(CommGroup g) {
  switch (g) {
    case CommGroup::tp:
      return TaskClass::comm_tp;
    case CommGroup::cp:
      return TaskClass::comm_cp;
    case CommGroup::ep:
      return TaskClass::comm_ep;
    case CommGroup::dp:
    case CommGroup::embedding:  // gradient synchronisation, as the DP reduction
      return TaskClass::comm_dp;
    case CommGroup::pp:
      return TaskClass::comm_pp;
  }
  return TaskClass::comm_tp;
}

// Kept small: an unfolded 16,384-GPU step has tens of millions of tasks. Display names are
// composed from these fields only when a trace is written.
struct TaskMeta {
  std::uint32_t gpu = 0;    // index into the simulated GPUs
  std::uint32_t name = 0;   // interned op name ("qkv", "grad_all_reduce")
  std::uint16_t kind = 0;   // interned kind ("gemm", "all_reduce")
  std::int16_t layer = -1;  // -1: not a layer op
  std::uint16_t mb = 0;     // micro-batch
  TaskClass cls = TaskClass::compute;
  std::uint8_t stream = 0;           // 0 compute, 1 dp comm, 2 pp transfers
  std::int8_t activation_delta = 0;  // +1 after a forward micro-batch, -1 after a backward one
  std::uint8_t phase = 0;            // 0 forward, 1 backward, 2 recompute, 3 step-level
  std::uint8_t group = 0;            // a collective's CommGroup
  float flops = 0;
  float bytes = 0;
};

// A collective call as recorded at build time: the rank list is interned per group.
struct CallRecord {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::uint32_t group = 0;
  double bytes = 0;
};

struct Coords {
  int t = 0, c = 0, d = 0, p = 0;
};

// Rank placement from an order string such as "tp-cp-ep-dp-pp", innermost first. EP groups
// are carved from consecutive DP ranks, so "ep" takes no dimension of its own.
struct Placement {
  std::array<int, 4> size{};  // tp, cp, dp, pp
  std::array<int, 4> stride{};
  Placement(const Parallelism& par) {
    size = {par.tp, par.cp, par.dp, par.pp};
    std::vector<int> order;
    std::stringstream ss(par.order);
    std::string tok;
    while (std::getline(ss, tok, '-')) {
      if (tok == "tp")
        order.push_back(0);
      else if (tok == "cp")
        order.push_back(1);
      else if (tok == "dp")
        order.push_back(2);
      else if (tok == "pp")
        order.push_back(3);
    }
    for (int dim = 0; dim < 4; ++dim) {
      if (std::find(order.begin(), order.end(), dim) == order.end()) order.push_back(dim);
    }
    int s = 1;
    for (int dim : order) {
      stride[dim] = s;
      s *= size[dim];
    }
  }
  int rank(const Coords& c) const { return c.t * stride[0] + c.c * stride[1] + c.d * stride[2] + c.p * stride[3]; }
};

class Builder {
 public:
  Builder(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cl, const TrainingOptions& opt)
      : m_(m), cfg_(cfg), opt_(opt), par_(cfg.parallel), place_(cfg.parallel) {
    cm_ = opt.cost_model ? opt.cost_model : default_cost_model(cl.spec.gpu, cfg.precision.compute);
    shape_ = layer_shape(m, cfg);
    if (m.is_generic()) {
      for (const auto& l : m.generic_layers) generic_.push_back({generic_layer_item(l, cfg)});
    } else {
      dense_layer_ = transformer_layer(m, shape_, false, par_.ep);
      moe_layer_ = transformer_layer(m, shape_, true, par_.ep, cfg.moe_load_imbalance);
      embed_ = embedding_items(m, shape_);
      head_ = head_items(m, shape_);
    }
    layers_ = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
    mbs_ = std::max(1, cfg.grad_accum());
    replicas_ = opt.fold ? 1 : par_.dp;
    for (int d = 0; d < replicas_; ++d)
      for (int p = 0; p < par_.pp; ++p)
        for (int c = 0; c < par_.cp; ++c)
          for (int t = 0; t < par_.tp; ++t) gpus_.push_back(Coords{t, c, d, p});
    std::sort(gpus_.begin(), gpus_.end(),
              [&](const Coords& a, const Coords& b) { return place_.rank(a) < place_.rank(b); });
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      streams_.push_back(
          {graph_.add_stream(), graph_.add_stream(), graph_.add_stream(), graph_.add_stream(), graph_.add_stream()});
    }
    seq_.assign(gpus_.size(), {});
  }

  void build() {
    if (par_.schedule == PipelineSchedule::zero_bubble) zb_order_ = zero_bubble_order();
    for (std::uint32_t g = 0; g < gpus_.size(); ++g) build_gpu(g);
  }

  StreamId stream_of(std::uint32_t g, int which) const { return streams_[g][which]; }

  TaskGraph graph_;
  std::vector<TaskMeta> meta_;
  std::vector<CallRecord> calls_;           // per rendezvous
  std::vector<std::vector<GpuId>> groups_;  // interned rank lists
  std::vector<Coords> gpus_;
  Trace names_;  // string table shared with the trace

  CollectiveCall call(RendezvousId r) const {
    const CallRecord& c = calls_[r.value];
    return CollectiveCall{c.op, groups_[c.group], c.bytes};
  }

 private:
  const ModelSpec& m_;
  const TrainingConfig& cfg_;
  const TrainingOptions& opt_;
  const Parallelism& par_;
  Placement place_;
  CostModelPtr cm_;
  LayerShape shape_;
  std::vector<LayerItem> dense_layer_, moe_layer_, embed_, head_;
  std::vector<std::vector<LayerItem>> generic_;  // one item list per layer of a generic model
  int layers_ = 0;

  const std::vector<LayerItem>& items_for(int layer) const {
    if (!generic_.empty()) return generic_[static_cast<std::size_t>(layer)];
    return is_moe_layer(layer) ? moe_layer_ : dense_layer_;
  }
  int mbs_ = 1, replicas_ = 1;
  std::vector<std::array<StreamId, 5>> streams_;   // compute, dp comm, (pp transfers are free), tp comm, cp comm
  std::vector<std::array<std::uint32_t, 6>> seq_;  // collectives issued per group kind, per GPU
  struct Pending {
    RendezvousId id;
    std::uint32_t remaining;  // simulated members still to join; the entry is dropped at zero
  };
  std::unordered_map<std::uint64_t, Pending> rendezvous_;
  std::unordered_map<std::uint64_t, std::uint32_t> group_index_;
  std::uint16_t cur_mb_ = 0;
  std::int16_t cur_layer_ = -1;
  std::uint8_t cur_phase_ = 0;

  // Joins (or opens) the rendezvous named `key` with `members` simulated members.
  RendezvousId join(std::uint64_t key, std::uint32_t members, CollectiveOp op, std::uint32_t group, double bytes) {
    auto it = rendezvous_.find(key);
    if (it == rendezvous_.end()) {
      RendezvousId r = graph_.add_rendezvous();
      calls_.push_back(CallRecord{op, group, bytes});
      it = rendezvous_.emplace(key, Pending{r, members}).first;
    }
    const RendezvousId r = it->second.id;
    if (--it->second.remaining == 0) rendezvous_.erase(it);
    return r;
  }

  std::uint32_t intern_group(std::uint64_t key, std::vector<GpuId> ranks) {
    auto it = group_index_.find(key);
    if (it != group_index_.end()) return it->second;
    groups_.push_back(std::move(ranks));
    const auto id = static_cast<std::uint32_t>(groups_.size() - 1);
    group_index_.emplace(key, id);
    return id;
  }

  void push_meta(std::uint32_t g, const std::string& name, const char* kind, TaskClass cls, int stream, double flops,
                 double bytes) {
    TaskMeta mt;
    mt.gpu = g;
    mt.name = names_.intern(name);
    mt.kind = static_cast<std::uint16_t>(names_.intern(kind));
    mt.layer = cur_layer_;
    mt.mb = cur_mb_;
    mt.cls = cls;
    mt.stream = static_cast<std::uint8_t>(stream);
    mt.phase = cur_phase_;
    mt.flops = static_cast<float>(flops);
    mt.bytes = static_cast<float>(bytes);
    meta_.push_back(mt);
  }

  bool is_moe_layer(int layer) const { return m_.moe.enabled() && layer >= m_.moe.first_dense_layers; }

  TaskId add(std::uint32_t g, int stream, Time dur, const std::string& name, const char* kind, TaskClass cls,
             double flops, double bytes, std::span<const TaskId> deps) {
    TaskId id = graph_.add_task(streams_[g][stream], dur, 0, deps);
    push_meta(g, name, kind, cls, stream, flops, bytes);
    return id;
  }

  // The members of g's group of kind `grp`, as global ranks in group order.
  std::vector<GpuId> group_ranks(const Coords& c, CommGroup grp) const {
    std::vector<GpuId> r;
    Coords x = c;
    switch (grp) {
      case CommGroup::tp:
        for (x.t = 0; x.t < par_.tp; ++x.t) r.emplace_back(place_.rank(x));
        break;
      case CommGroup::cp:
        for (x.c = 0; x.c < par_.cp; ++x.c) r.emplace_back(place_.rank(x));
        break;
      case CommGroup::dp:  // gradients are reduced over the DP and CP ranks together
        for (x.d = 0; x.d < par_.dp; ++x.d)
          for (x.c = 0; x.c < par_.cp; ++x.c) r.emplace_back(place_.rank(x));
        break;
      case CommGroup::ep: {
        const int base = c.d / par_.ep * par_.ep;
        for (x.d = base; x.d < base + par_.ep; ++x.d) r.emplace_back(place_.rank(x));
        break;
      }
      case CommGroup::pp:
        for (x.p = 0; x.p < par_.pp; ++x.p) r.emplace_back(place_.rank(x));
        break;
      case CommGroup::embedding:
        x.p = 0;
        r.emplace_back(place_.rank(x));
        x.p = par_.pp - 1;
        r.emplace_back(place_.rank(x));
        break;
    }
    return r;
  }

  // A collective member task for GPU g: every member issues its group's collectives in the
  // same order, so (group, sequence number) names the rendezvous.
  TaskId collective(std::uint32_t g, int stream, CommGroup grp, CollectiveOp op, double bytes, const std::string& name,
                    std::span<const TaskId> deps) {
    const Coords& c = gpus_[g];
    auto ranks = group_ranks(c, grp);
    const std::uint64_t kind = static_cast<std::uint64_t>(grp);
    const std::uint64_t first = ranks.front().value;
    const std::uint64_t seq = seq_[g][static_cast<int>(grp)]++;
    // Members simulated: the whole group, except DP/EP groups folded down to one replica.
    std::uint32_t members = static_cast<std::uint32_t>(ranks.size());
    if (opt_.fold && grp == CommGroup::ep) members = 1;
    if (opt_.fold && grp == CommGroup::dp) members = static_cast<std::uint32_t>(par_.cp);
    const std::uint32_t group = intern_group(kind << 32 | first, std::move(ranks));
    const RendezvousId r = join(kind << 61 | first << 37 | seq, members, op, group, bytes);
    TaskId id = graph_.add_member(streams_[g][stream], r, 0, deps);
    push_meta(g, name, to_string(op), class_of(grp), stream, 0, bytes);
    meta_.back().group = static_cast<std::uint8_t>(grp);
    return id;
  }

  // A point-to-point transfer between pipeline stages: a two-member rendezvous.
  // `vs` is the receiving virtual stage, so chunks of an interleaved pipeline keep apart.
  TaskId p2p(std::uint32_t g, const Coords& src, const Coords& dst, bool fwd, int mb, int vs, bool sender,
             std::span<const TaskId> deps) {
    const double bytes = shape_.tokens * static_cast<double>(m_.hidden) * cfg_.precision.weight_bytes / par_.tp;
    const std::uint64_t s = static_cast<std::uint64_t>(place_.rank(src));
    const std::uint64_t d = static_cast<std::uint64_t>(place_.rank(dst));
    const std::uint32_t group = intern_group(std::uint64_t{7} << 61 | s << 30 | d, {GpuId(s), GpuId(d)});
    const RendezvousId r = join(std::uint64_t{6 + (fwd ? 0u : 1u)} << 61 | s << 32 |
                                    static_cast<std::uint64_t>(vs) << 16 | static_cast<std::uint64_t>(mb),
                                2, CollectiveOp::send_recv, group, bytes);
    // Transfers hold no stream: a pipeline stage posts its sends and receives as they come
    // (Megatron batches isend/irecv), so they must not serialise behind one another.
    TaskId id = graph_.add_member(StreamId::none(), r, 0, deps);
    const char* name =
        fwd ? (sender ? "send_activations" : "recv_activations") : (sender ? "send_grads" : "recv_grads");
    push_meta(g, name, "send_recv", TaskClass::comm_pp, 2, 0, bytes);
    meta_.back().group = static_cast<std::uint8_t>(CommGroup::pp);
    return id;
  }

  // Ring attention on GPU g (Liu et al. 2023; Megatron-CP): attention in cp blocks, block i
  // over the K/V chunk that arrived in step i; step i+1 forwards that chunk to the next CP rank
  // while block i computes. Backward passes the chunk and its gradient. On return deps.back()
  // is the last block.
  void ring_attention(std::uint32_t g, const LayerItem& it, const OpCost& whole, const std::string& name, bool fwd,
                      std::vector<TaskId>& deps, TaskId& join) {
    if (join.valid()) deps.push_back(join), join = TaskId::none();
    const int n = it.ring_steps;
    OpCost blk = whole;
    blk.flops /= n;
    blk.bytes /= n;
    const Time t_blk = seconds(op_seconds(cm_, blk));
    const double bytes = it.comm_bytes * (fwd ? 1 : 2);
    const std::string kv_name = it.name + (fwd ? " kv" : " kv+grad");
    TaskId prev = TaskId::none(), arrived = TaskId::none();
    for (int i = 0; i < n; ++i) {
      TaskId next = TaskId::none();
      if (i + 1 < n) {
        const TaskId after[] = {arrived};
        next = collective(g, 4, CommGroup::cp, CollectiveOp::send_recv, bytes, kv_name,
                          i == 0 ? std::span<const TaskId>(deps) : std::span<const TaskId>(after));
      }
      std::vector<TaskId> bdeps = i == 0 ? deps : std::vector<TaskId>{prev};
      if (arrived.valid()) bdeps.push_back(arrived);
      prev = add(g, 0, t_blk, name, to_string(blk.kind), TaskClass::compute, blk.flops, blk.bytes, bdeps);
      arrived = next;
    }
    deps.assign(1, prev);
  }

  // Which part of a layer's work a run covers. Zero-bubble schedules split backward into the
  // input gradient (B, on the critical path) and the weight gradient (W, deferrable).
  enum class Pass { forward, backward, backward_input, backward_weight };

  // Runs `items` on GPU g's compute stream after `dep` (and `extra`, if valid); returns the last task.
  TaskId run_items(std::uint32_t g, const std::vector<LayerItem>& items, Pass pass, TaskId dep,
                   TaskId extra = TaskId::none()) {
    // With TP communication overlap (Megatron's tp_comm_overlap), a TP collective runs on its
    // own stream beside the GEMM that follows it (the GEMM is split into chunks that consume the
    // collective's output as it arrives); the next kernel waits for both.
    const bool overlap_tp = par_.tp_comm_overlap;
    TaskId join = TaskId::none();
    auto one = [&](const LayerItem& it) {
      std::vector<TaskId> deps;
      if (dep.valid()) deps.push_back(dep);
      if (extra.valid()) {
        deps.push_back(extra);
        extra = TaskId::none();
      }
      if (it.is_comm) {
        if (pass == Pass::backward_weight) return;
        auto op = pass == Pass::forward ? it.fwd_comm : it.bwd_comm;
        if (!op) return;
        for (TaskId* j : {&join, &pending_join_}) {
          if (j->valid()) deps.push_back(*j), *j = TaskId::none();
        }
        if (overlap_tp && it.group == CommGroup::tp) {
          join = collective(g, 3, it.group, *op, it.comm_bytes, it.name, deps);
          return;
        }
        dep = collective(g, 0, it.group, *op, it.comm_bytes, it.name, deps);
        return;
      }
      OpCost c = pass == Pass::forward ? it.fwd : it.bwd;
      const bool gemm = c.kind == OpKind::gemm || c.kind == OpKind::grouped_gemm;
      if (pass == Pass::backward_weight) {
        if (!gemm) return;
        c.flops /= 2;  // wgrad: one of the two backward GEMMs
        c.bytes /= 2;
      } else if (pass == Pass::backward_input && gemm) {
        c.flops /= 2;  // dgrad
        c.bytes /= 2;
      }
      const std::string name = pass == Pass::backward_weight ? it.name + " wgrad" : it.name;
      if (it.ring_steps > 1 && pass != Pass::backward_weight) {
        ring_attention(g, it, c, name, pass == Pass::forward, deps, join);
        dep = deps.back();
        if (pending_join_.valid()) graph_.add_dep(pending_join_, dep), pending_join_ = TaskId::none();
        return;
      }
      // The kernel right after an overlapped collective runs beside it; the one after that joins it.
      const bool beside = join.valid() && gemm;
      if (join.valid() && !beside) deps.push_back(join), join = TaskId::none();
      dep = add(g, 0, seconds(op_seconds(cm_, c)), name, to_string(c.kind), TaskClass::compute, c.flops, c.bytes, deps);
      if (beside) {
        // Carry the collective to the next kernel.
        pending_join_ = join;
        join = TaskId::none();
      } else if (pending_join_.valid()) {
        graph_.add_dep(pending_join_, dep);
        pending_join_ = TaskId::none();
      }
    };
    if (pass == Pass::forward) {
      for (const auto& it : items) one(it);
    } else {
      for (auto it = items.rbegin(); it != items.rend(); ++it) one(*it);
    }
    if (extra.valid()) graph_.add_dep(extra, dep);  // no task ran: still order after extra
    for (TaskId j : {join, pending_join_}) {
      if (!j.valid()) continue;
      // Nothing followed inside this run: join on a zero-length marker so callers see one task.
      TaskId deps2[] = {dep, j};
      dep = add(g, 0, Time{}, "tp_overlap_join", "elementwise", TaskClass::compute, 0, 0, deps2);
    }
    pending_join_ = TaskId::none();
    return dep;
  }
  TaskId pending_join_ = TaskId::none();

  double layer_grad_bytes(int layer) const {
    if (m_.is_generic()) return m_.generic_layers[static_cast<std::size_t>(layer)].params * cfg_.precision.grad_bytes;
    const double t = par_.tp;
    // Attention and MLP weights split over TP; the two norms (scale, and bias for LayerNorm) and
    // the MoE router replicated.
    double p = attention_params_per_layer(m_) / t + 2.0 * norm_params(m_);
    if (is_moe_layer(layer)) {
      const double e = dense_mlp_params(m_, m_.moe.expert_ffn_hidden);
      p += e * m_.moe.experts / par_.ep / t + e * m_.moe.shared_experts / t +
           static_cast<double>(m_.hidden) * m_.moe.experts;
    } else {
      p += dense_mlp_params(m_, m_.ffn_hidden) / t;
    }
    return p * cfg_.precision.grad_bytes;
  }

  // Each stage's order of work (workloads/pipeline_schedule.hpp). GPipe: all forwards then
  // all backwards. 1F1B: pp-stage-1 warm-up forwards, then one forward one backward
  // (Narayanan et al. 2021). Interleaved: Megatron-LM's virtual-pipeline order over v model
  // chunks. Zero-bubble (ZB-H1, Qi et al. 2024): 1F1B with each weight-gradient pass W
  // deferred behind the next backward passes, filling the drain with W work.
  std::vector<PipelineSlot> schedule(int stage) const {
    if (par_.schedule == PipelineSchedule::zero_bubble) return zb_order_.at(static_cast<std::size_t>(stage));
    return pipeline_order(par_.schedule, par_.pp, stage, mbs_, par_.virtual_stages);
  }

  // The zero-bubble order comes from a greedy list schedule at the layers' modelled costs.
  std::vector<std::vector<PipelineSlot>> zero_bubble_order() const {
    double tf = 0, tb = 0, tw = 0;
    for (const auto& it : dense_layer_) {
      if (it.is_comm) continue;
      tf += op_seconds(cm_, it.fwd);
      const bool gemm = it.bwd.kind == OpKind::gemm || it.bwd.kind == OpKind::grouped_gemm;
      OpCost half = it.bwd;
      half.flops /= 2;
      half.bytes /= 2;
      tb += gemm ? op_seconds(cm_, half) : op_seconds(cm_, it.bwd);
      tw += gemm ? op_seconds(cm_, half) : 0;
    }
    return zero_bubble_orders(par_.pp, mbs_, tf, tb, tw);
  }
  std::vector<std::vector<PipelineSlot>> zb_order_;

  double layer_param_bytes(int layer) const {
    return layer_grad_bytes(layer) / cfg_.precision.grad_bytes * cfg_.precision.weight_bytes;
  }

  void build_gpu(std::uint32_t g) {
    const Coords c = gpus_[g];
    const int stage = c.p, pp = par_.pp, v = par_.schedule == PipelineSchedule::interleaved ? par_.virtual_stages : 1;
    const int chunk_layers = layers_ / (pp * v);
    const int zero = par_.zero_stage;
    const bool dp_comm = par_.dp * par_.cp > 1;
    const bool zb = par_.schedule == PipelineSchedule::zero_bubble;
    std::vector<TaskId> dp_tasks;
    double bucket = 0;
    // Gradients are reduced over DP (and CP) ranks: an all-reduce, or a reduce-scatter when
    // ZeRO shards them.
    auto flush_bucket = [&](TaskId after) {
      if (bucket <= 0 || !dp_comm) {
        bucket = 0;
        return;
      }
      const CollectiveOp op = zero >= 1 ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce;
      TaskId deps[] = {after};
      dp_tasks.push_back(collective(g, 1, CommGroup::dp, op, bucket, "grad_" + std::string(to_string(op)), deps));
      bucket = 0;
    };
    // ZeRO-3 / FSDP gathers a layer's parameters before using it, at most two layers ahead.
    std::array<TaskId, 2> recent{TaskId::none(), TaskId::none()};
    auto gather = [&](int layer) -> TaskId {
      if (zero < 3 || !dp_comm) return TaskId::none();
      std::vector<TaskId> deps;
      if (recent[0].valid()) deps.push_back(recent[0]);
      return collective(g, 1, CommGroup::dp, CollectiveOp::all_gather, layer_param_bytes(layer), "fsdp_all_gather",
                        deps);
    };
    auto layer_done = [&](TaskId t) {
      recent[0] = recent[1];
      recent[1] = t;
    };
    const auto plan = schedule(stage);
    std::vector<int> backwards_left(static_cast<std::size_t>(v), mbs_);
    TaskId last_compute = TaskId::none();
    for (const PipelineSlot& sl : plan) {
      const int mb = sl.micro_batch, vs = sl.chunk * pp + stage, nvs = pp * v;
      const bool first = vs == 0, last = vs == nvs - 1;
      const bool fwd = sl.pass == PipelineSlot::Pass::forward;
      cur_mb_ = static_cast<std::uint16_t>(mb);
      cur_layer_ = -1;
      cur_phase_ = fwd ? 0 : 1;
      TaskId dep = last_compute;
      // Neighbouring virtual stages: the previous and next chunks' GPUs.
      Coords prev = c, next = c;
      prev.p = (stage + pp - 1) % pp;
      next.p = (stage + 1) % pp;
      if (sl.pass == PipelineSlot::Pass::weight) {
        for (int l = chunk_layers - 1; l >= 0; --l) {
          const int layer = vs * chunk_layers + l;
          cur_layer_ = static_cast<std::int16_t>(layer);
          dep = run_items(g, items_for(layer), Pass::backward_weight, dep);
        }
        last_compute = dep;
        continue;
      }
      if (fwd && !first) dep = p2p(g, prev, c, true, mb, vs, false, {});
      if (!fwd && !last) dep = p2p(g, next, c, false, mb, vs, false, {});
      // A receive is a free task; the compute stream waits for it and for its own order.
      if (fwd) {
        if (first) dep = run_items(g, embed_, Pass::forward, dep);
        for (int l = 0; l < chunk_layers; ++l) {
          const int layer = vs * chunk_layers + l;
          cur_layer_ = static_cast<std::int16_t>(layer);
          TaskId gth = gather(layer);
          dep = run_items(g, items_for(layer), Pass::forward, dep, gth);
          layer_done(dep);
        }
        cur_layer_ = -1;
        if (last) dep = run_items(g, head_, Pass::forward, dep);
        meta_.back().activation_delta = +1;
        if (!last) {
          TaskId deps[] = {dep};
          p2p(g, c, next, true, mb, vs + 1, true, deps);
        }
      } else {
        // Gradients are reduced once per step after the final micro-batch (DDP's no_sync,
        // Megatron), or after every micro-batch when ZeRO-2/3 partitions them (DeepSpeed).
        const bool reduce_now = --backwards_left[static_cast<std::size_t>(sl.chunk)] == 0 || zero >= 2;
        const Pass bp = zb ? Pass::backward_input : Pass::backward;
        if (last) dep = run_items(g, head_, bp, dep);
        if (reduce_now && last && !m_.is_generic()) {
          // The LM head's gradient (unless it is the embedding's, counted on the first stage) and the final norm's.
          const bool own_head = !m_.tied_embeddings || nvs > 1;
          bucket += (own_head ? static_cast<double>(m_.hidden) * m_.vocab / par_.tp : 0.0) * cfg_.precision.grad_bytes +
                    norm_params(m_) * cfg_.precision.grad_bytes;
        }
        for (int l = chunk_layers - 1; l >= 0; --l) {
          const int layer = vs * chunk_layers + l;
          const auto& items = items_for(layer);
          cur_layer_ = static_cast<std::int16_t>(layer);
          TaskId gth = gather(layer);
          if (cfg_.recompute == Recompute::full) {
            cur_phase_ = 2;
            dep = run_items(g, items, Pass::forward, dep, gth);
            gth = TaskId::none();
            cur_phase_ = 1;
          }
          dep = run_items(g, items, bp, dep, gth);
          layer_done(dep);
          if (reduce_now) {
            bucket += layer_grad_bytes(layer);
            if (zero >= 3 || (cfg_.overlap_grad_reduce && bucket >= cfg_.grad_bucket_bytes)) flush_bucket(dep);
          }
        }
        cur_layer_ = -1;
        if (first && !m_.is_generic()) {
          dep = run_items(g, embed_, bp, dep);
          if (reduce_now) {
            // The token embedding (split over TP) and learned positions (replicated).
            const double positions = m_.learned_positions ? static_cast<double>(m_.max_seq) * m_.hidden : 0.0;
            bucket += (static_cast<double>(m_.hidden) * m_.vocab / par_.tp + positions) * cfg_.precision.grad_bytes;
          }
        }
        meta_.back().activation_delta = -1;
        if (reduce_now) flush_bucket(dep);
        if (!first) {
          TaskId deps[] = {dep};
          p2p(g, c, prev, false, mb, vs - 1, true, deps);
        }
      }
      last_compute = dep;
    }
    cur_phase_ = 3;
    cur_layer_ = -1;
    // A tied word embedding lives on the first stage and, as the LM head, on the last: after the
    // DP reduction the two copies' gradients are all-reduced between them (Megatron's embedding
    // group, finalize_model_grads), so both apply the same update.
    if (m_.tied_embeddings && !m_.is_generic() && pp > 1 && (stage == 0 || stage == pp - 1)) {
      std::vector<TaskId> deps = dp_tasks;
      deps.push_back(last_compute);
      const double bytes = static_cast<double>(m_.hidden) * m_.vocab / par_.tp * cfg_.precision.grad_bytes;
      dp_tasks.push_back(
          collective(g, 1, CommGroup::embedding, CollectiveOp::all_reduce, bytes, "embedding_grad_all_reduce", deps));
    }
    // Optimizer step on this GPU's shard, once every gradient has been reduced.
    double params = stage_params(m_, cfg_, stage);
    const double shard = zero >= 1 ? params / (par_.dp * par_.cp) : params;
    const auto& pr = cfg_.precision;
    OpCost opt{OpKind::optimizer, 0,
               shard * (pr.grad_bytes + 2 * pr.master_bytes + pr.optimizer_state_bytes * 2 + pr.weight_bytes)};
    std::vector<TaskId> deps = dp_tasks;
    deps.push_back(last_compute);
    TaskId o =
        add(g, 0, seconds(op_seconds(cm_, opt)), "adam_step", "optimizer", TaskClass::optimizer, 0, opt.bytes, deps);
    if ((zero == 1 || zero == 2) && dp_comm) {
      TaskId d2[] = {o};
      collective(g, 1, CommGroup::dp, CollectiveOp::all_gather, params * pr.weight_bytes, "param_all_gather", d2);
    }
  }
};

}  // namespace

TrainingResult simulate_training(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                 const TrainingOptions& opt) {
  const auto& par = cfg.parallel;
  if (par.schedule == PipelineSchedule::interleaved && par.virtual_stages > 1 && cfg.grad_accum() % par.pp != 0) {
    throw InputError("", "/training/global_batch",
                     "the interleaved schedule needs the number of micro-batches (" + std::to_string(cfg.grad_accum()) +
                         ") to be a multiple of pp (" + std::to_string(par.pp) + ")",
                     "global_batch / (micro_batch * dp) divisible by pp");
  }
  // Noise breaks the symmetry between replicas: simulate every one of them.
  TrainingOptions eff = opt;
  // Noise breaks the symmetry between replicas, and flow fidelity needs every replica's traffic
  // on the links: simulate all of them.
  if (cfg.noise.active() || opt.flow_network) eff.fold = false;
  Builder b(m, cfg, cluster, eff);
  b.build();

  // splitmix64: a counter-based generator, so a kernel's noise depends only on (seed, step, task).
  auto mix = [](std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  auto uniform = [&](std::uint64_t key) { return (static_cast<double>(mix(key) >> 11) + 0.5) * 0x1.0p-53; };
  const int steps = std::max(1, cfg.noise.steps);
  std::vector<double> step_times;
  std::unique_ptr<Engine> first_engine;  // the first step is kept for the breakdown and trace
  std::unique_ptr<StreamExecutor> first_exec;
  std::uint64_t events = 0;
  for (int step = 0; step < steps; ++step) {
    auto engine_ptr = std::make_unique<Engine>();
    auto exec_ptr = std::make_unique<StreamExecutor>(*engine_ptr, b.graph_);
    Engine* engine = engine_ptr.get();
    StreamExecutor* x = exec_ptr.get();
    // Collectives at the chosen fidelity: alpha-beta times, or flows sharing the cluster's links.
    auto runner = std::make_unique<CollectiveRunner>(
        *engine, cluster, opt.flow_network ? Fidelity::flow : Fidelity::analytical, opt.collectives);
    x->on_rendezvous([x, &b, run = runner.get()](RendezvousId r, Time) {
      run->start(b.call(r), [x, r] { x->finish_rendezvous(r); });
    });
    const double slow = cfg.overlap_slowdown;
    const auto& noise = cfg.noise;
    if (slow > 0 || noise.active()) {
      const std::uint64_t base = mix(cfg.seed * 0x100000001b3ull + static_cast<std::uint64_t>(step));
      std::vector<double> gpu_factor(b.gpus_.size(), 1.0);
      for (std::size_t g = 0; g < gpu_factor.size(); ++g) {
        if (noise.straggler_probability > 0 && uniform(base ^ mix(g + 1)) < noise.straggler_probability) {
          gpu_factor[g] = noise.straggler_slowdown;
        }
      }
      x->on_duration([&, x, base, gpu_factor](TaskId t, Time) {
        const Time d = b.graph_.task(t).duration;
        const TaskMeta& mt = b.meta_[t.value];
        if (mt.cls != TaskClass::compute && mt.cls != TaskClass::optimizer) return d;
        double f = gpu_factor[mt.gpu];
        if (slow > 0 && (x->busy(b.stream_of(mt.gpu, 1)) || x->busy(b.stream_of(mt.gpu, 3)))) f *= 1.0 + slow;
        if (noise.kernel_jitter > 0) {
          // Box-Muller from two uniforms keyed by the task.
          const double u1 = uniform(base ^ mix(2 * std::uint64_t{t.value} + 1000003));
          const double u2 = uniform(base ^ mix(2 * std::uint64_t{t.value} + 1000004));
          const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
          f *= std::exp(noise.kernel_jitter * z);
        }
        return f == 1.0 ? d : Time{std::llround(static_cast<double>(d.ps) * f)};
      });
    }
    x->start();
    if (opt.progress) {
      // Slices of a million events keep the progress line live on long runs.
      while (engine->run_events(1u << 20) > 0) {
        opt.progress((step + static_cast<double>(x->done_count()) / b.graph_.task_count()) / steps);
      }
    } else {
      engine->run();
    }
    if (!x->all_done()) throw std::logic_error("simulate_training: the step graph deadlocked");
    step_times.push_back(x->makespan().seconds());
    events += engine->dispatched();
    if (step == 0) {
      first_engine = std::move(engine_ptr);
      first_exec = std::move(exec_ptr);
    }
  }
  const StreamExecutor& exec = *first_exec;
  TrainingResult res;
  const int gpus = par.tp * par.pp * par.dp * par.cp;
  res.gpus = gpus;
  res.simulated_gpus = static_cast<int>(b.gpus_.size());
  res.grad_accum = cfg.grad_accum();
  res.events = events;
  res.folded = eff.fold && par.dp > 1;
  res.step_times_s = step_times;
  {
    std::vector<double> sorted = step_times;
    std::sort(sorted.begin(), sorted.end());
    // Nearest-rank percentiles.
    auto pct = [&](double q) { return sorted[static_cast<std::size_t>(std::ceil(q * sorted.size())) - 1]; };
    res.step_time_p50_s = pct(0.5);
    res.step_time_p99_s = pct(0.99);
  }
  res.tasks = b.graph_.task_count();
  res.step_time_s = exec.makespan().seconds();
  res.tokens_per_step = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  res.tokens_per_s = res.tokens_per_step / res.step_time_s;
  res.model_flops_per_step = model_flops_per_step(m, cfg);
  res.hardware_flops_per_step = res.model_flops_per_step + recompute_flops_per_step(m, cfg);
  res.peak_tflops = cluster.spec.gpu.peak_flops(cfg.precision.compute) / 1e12;
  res.tflops_per_gpu = res.model_flops_per_step / res.step_time_s / gpus / 1e12;
  res.hw_tflops_per_gpu = res.hardware_flops_per_step / res.step_time_s / gpus / 1e12;
  res.mfu = res.tflops_per_gpu / res.peak_tflops;
  res.hfu = res.hw_tflops_per_gpu / res.peak_tflops;
  res.memory = estimate_memory(m, cfg, cluster.spec.gpu.hbm_bytes);

  // Where each simulated GPU's time went: sweep the boundaries of its tasks.
  const std::int64_t end = exec.makespan().ps;
  const auto n_gpu = b.gpus_.size();
  std::vector<std::vector<std::uint32_t>> tasks_of(n_gpu);
  for (std::uint32_t t = 0; t < b.meta_.size(); ++t) tasks_of[b.meta_[t].gpu].push_back(t);
  auto breakdown_of = [&](std::uint32_t g) {
    // Priority: the compute stream's state first; when it idles, a running DP or PP transfer.
    struct Edge {
      std::int64_t t;
      int what;  // index into counters
      int delta;
    };
    enum { kCompute, kOpt, kTp, kCp, kEp, kWait, kDp, kPp, kN };
    std::vector<Edge> edges;
    for (std::uint32_t t : tasks_of[g]) {
      const auto& mt = b.meta_[t];
      const auto& tm = exec.timing(TaskId(t));
      int what = kCompute;
      switch (mt.cls) {
        case TaskClass::compute:
          what = kCompute;
          break;
        case TaskClass::optimizer:
          what = kOpt;
          break;
        case TaskClass::comm_tp:
          what = kTp;
          break;
        case TaskClass::comm_cp:
          what = kCp;
          break;
        case TaskClass::comm_ep:
          what = kEp;
          break;
        case TaskClass::comm_dp:
          what = kDp;
          break;
        case TaskClass::comm_pp:
          what = kPp;
          break;
      }
      if (mt.stream == 0 && tm.start > tm.ready) {
        edges.push_back({tm.ready.ps, kWait, +1});
        edges.push_back({tm.start.ps, kWait, -1});
      }
      if (tm.end > tm.start) {
        edges.push_back({tm.start.ps, what, +1});
        edges.push_back({tm.end.ps, what, -1});
      }
    }
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& x) { return a.t < x.t; });
    std::array<int, kN> active{};
    std::array<std::int64_t, kN + 1> acc{};  // last slot: idle
    std::int64_t prev = 0;
    auto charge = [&](std::int64_t until) {
      if (until <= prev) return;
      int slot = kN;
      for (int k : {kCompute, kOpt, kTp, kCp, kEp, kWait, kDp, kPp}) {
        if (active[k] > 0) {
          slot = k;
          break;
        }
      }
      acc[slot] += until - prev;
      prev = until;
    };
    for (const auto& e : edges) {
      charge(e.t);
      active[e.what] += e.delta;
    }
    charge(end);
    StepBreakdown bd;
    auto s = [](std::int64_t ps) { return static_cast<double>(ps) * 1e-12; };
    bd.compute_s = s(acc[kCompute]);
    bd.optimizer_s = s(acc[kOpt]);
    bd.exposed_tp_s = s(acc[kTp]);
    bd.exposed_cp_s = s(acc[kCp]);
    bd.exposed_ep_s = s(acc[kEp]);
    bd.exposed_dp_s = s(acc[kDp]);
    bd.exposed_pp_s = s(acc[kPp]);
    // Idle time with nothing to wait for is the pipeline's fill and drain when there is one.
    if (par.pp > 1) {
      bd.bubble_s = s(acc[kN]);
      bd.other_s = s(acc[kWait]);
    } else {
      bd.other_s = s(acc[kN] + acc[kWait]);
    }
    return bd;
  };
  res.breakdown = breakdown_of(0);
  res.stage_utilization.assign(par.pp, 0.0);
  for (std::uint32_t g = 0; g < n_gpu; ++g) {
    const auto& c = b.gpus_[g];
    if (c.t == 0 && c.c == 0 && c.d == 0) {
      auto bd = c.p == 0 ? res.breakdown : breakdown_of(g);
      res.stage_utilization[c.p] = (bd.compute_s + bd.optimizer_s) / res.step_time_s;
    }
  }

  if (opt.trace) {
    const Placement placement(par);
    for (std::uint32_t t = 0; t < b.meta_.size(); ++t) {
      const auto& mt = b.meta_[t];
      if (mt.cls == TaskClass::compute || mt.cls == TaskClass::optimizer) continue;
      const RendezvousId r = b.graph_.task(TaskId(t)).rendezvous;
      if (!r.valid()) continue;
      const auto& call = b.calls_[r.value];
      StepCollective sc;
      const auto& c = b.gpus_[mt.gpu];
      sc.rank = placement.rank(c);
      sc.stage = c.p;
      sc.group = static_cast<CommGroup>(mt.group);
      sc.op = call.op;
      sc.bytes = call.bytes;
      sc.group_size = static_cast<int>(b.groups_[call.group].size());
      sc.phase = static_cast<StepCollective::Phase>(std::min<int>(mt.phase, 3));
      sc.micro_batch = sc.phase == StepCollective::Phase::step ? -1 : mt.mb;
      sc.layer = mt.layer;
      sc.name = b.names_.str(mt.name);
      res.collectives.push_back(std::move(sc));
    }
    Trace& tr = res.trace;
    tr = std::move(b.names_);
    const auto gpn = cluster.spec.gpus_per_node;
    Placement place(par);
    // Each GPU's lanes by stream: compute, dp comm, pp comm, then tp comm and cp comm if used.
    std::vector<std::array<std::uint32_t, 5>> lane_of(n_gpu);
    for (std::uint32_t g = 0; g < n_gpu; ++g) {
      const auto& c = b.gpus_[g];
      const int rank = place.rank(c);
      const std::string proc = "gpu " + std::to_string(rank);
      const std::string group = "node " + std::to_string(rank / gpn) + " / stage " + std::to_string(c.p);
      const auto pid = static_cast<std::uint32_t>(rank);
      auto& l = lane_of[g];
      l[0] = tr.add_lane(proc, "compute", group, pid, 0);
      l[1] = tr.add_lane(proc, "dp comm", group, pid, 1);
      l[2] = tr.add_lane(proc, "pp comm", group, pid, 2);
      l[3] = l[4] = l[0];
      if (par.tp_comm_overlap) l[3] = tr.add_lane(proc, "tp comm", group, pid, 3);
      if (par.cp > 1 && par.cp_comm == Parallelism::CpComm::ring) l[4] = tr.add_lane(proc, "cp comm", group, pid, 4);
    }
    tr.events.reserve(b.meta_.size());
    static const char* kPhase[] = {"", "bwd ", "recompute ", ""};
    std::unordered_map<std::uint64_t, std::uint32_t> display;  // (name, layer, mb, phase) -> interned
    auto display_name = [&](const TaskMeta& mt) {
      const std::uint64_t key = std::uint64_t{mt.name} << 40 |
                                std::uint64_t(static_cast<std::uint16_t>(mt.layer)) << 24 | std::uint64_t{mt.mb} << 8 |
                                mt.phase;
      auto it = display.find(key);
      if (it != display.end()) return it->second;
      std::string n;
      if (mt.phase != 3) n.append("mb").append(std::to_string(mt.mb)).append(" ");
      if (mt.layer >= 0) n.append("L").append(std::to_string(mt.layer)).append(" ");
      n += kPhase[mt.phase & 3];
      n += tr.str(mt.name);
      const auto id = tr.intern(n);
      display.emplace(key, id);
      return id;
    };
    for (std::uint32_t t = 0; t < b.meta_.size(); ++t) {
      const auto& mt = b.meta_[t];
      const auto& tm = exec.timing(TaskId(t));
      const auto& task = b.graph_.task(TaskId(t));
      TraceEvent e;
      e.lane = lane_of[mt.gpu][mt.stream];
      e.name = display_name(mt);
      e.kind = mt.kind;
      e.start_ps = tm.start.ps;
      e.dur_ps = (tm.end - tm.start).ps;
      e.flops = mt.flops;
      e.bytes = mt.bytes;
      e.group = task.rendezvous.valid() ? task.rendezvous.value : kNoIndex;
      tr.events.push_back(e);
    }
    // Pipeline transfers as arrows from sender to receiver.
    for (std::uint32_t r = 0; r < b.graph_.rendezvous_count(); ++r) {
      const auto& mem = b.graph_.members(RendezvousId(r));
      if (b.calls_[r].op != CollectiveOp::send_recv || mem.size() != 2) continue;
      const auto& a = b.meta_[mem[0].value];
      const auto& z = b.meta_[mem[1].value];
      if (a.stream != 2) continue;  // ring attention's K/V steps are drawn with the collectives
      const bool a_sends = tr.str(a.name).rfind("send", 0) == 0;
      const auto& from = a_sends ? a : z;
      const auto& to = a_sends ? z : a;
      const TaskId from_id = a_sends ? mem[0] : mem[1];
      const TaskId to_id = a_sends ? mem[1] : mem[0];
      tr.arrows.push_back(TraceArrow{lane_of[from.gpu][2], lane_of[to.gpu][2], exec.timing(from_id).start.ps,
                                     exec.timing(to_id).end.ps, display_name(from)});
    }
    // Collectives as arrows around their ring of members (bounded, so huge traces stay light).
    constexpr std::size_t kMaxCollectiveArrows = 200000;
    for (std::uint32_t r = 0; r < b.graph_.rendezvous_count() && tr.arrows.size() < kMaxCollectiveArrows; ++r) {
      const auto& mem = b.graph_.members(RendezvousId(r));
      if (mem.size() < 2 || b.meta_[mem[0].value].stream == 2) continue;  // pipeline transfers: above
      for (std::size_t i = 0; i < mem.size(); ++i) {
        const TaskId from = mem[i], to = mem[(i + 1) % mem.size()];
        const auto& fm = b.meta_[from.value];
        const auto& tm = b.meta_[to.value];
        tr.arrows.push_back(TraceArrow{lane_of[fm.gpu][fm.stream], lane_of[tm.gpu][tm.stream],
                                       exec.timing(from).start.ps, exec.timing(to).end.ps, display_name(fm)});
      }
    }
    // Memory in use per GPU: static state plus the activations of in-flight micro-batches.
    const double static_bytes =
        res.memory.weights + res.memory.grads + res.memory.optimizer + res.memory.comm_buffers + res.memory.overhead;
    const double act = res.memory.activations / std::max(1.0, inflight_microbatches(cfg));
    for (std::uint32_t g = 0; g < n_gpu; ++g) {
      TraceCounterTrack ct;
      ct.process = tr.lanes[lane_of[g][0]].process;
      ct.pid = tr.lanes[lane_of[g][0]].pid;
      ct.name = tr.intern("memory_bytes");
      double cur = static_bytes;
      ct.samples.emplace_back(0, cur);
      for (std::uint32_t t : tasks_of[g]) {
        const auto& mt = b.meta_[t];
        if (mt.activation_delta == 0) continue;
        cur += mt.activation_delta * act;
        const auto when = mt.activation_delta > 0 ? exec.timing(TaskId(t)).start.ps : exec.timing(TaskId(t)).end.ps;
        ct.samples.emplace_back(when, cur);
      }
      std::stable_sort(ct.samples.begin(), ct.samples.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      tr.counters.push_back(std::move(ct));
    }
    canonicalize(tr);
    tr.summary = {{"step_time_s", res.step_time_s},
                  {"mfu", res.mfu},
                  {"compute_s", res.breakdown.compute_s},
                  {"optimizer_s", res.breakdown.optimizer_s},
                  {"exposed_comm_s", res.breakdown.exposed_comm_s()},
                  {"bubble_s", res.breakdown.bubble_s},
                  {"other_s", res.breakdown.other_s}};
  }
  return res;
}

}  // namespace ctwin
