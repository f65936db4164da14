// Builds a training step's program: each simulated GPU's ops on compute and communication
// streams for the parallelism layout and pipeline schedule (workloads/step_program.hpp).
#include "workloads/step_program.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sim/error.hpp"
#include "sim/huge_pages.hpp"
#include "topology/network.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/memory.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/offload.hpp"
#include "workloads/pipeline_schedule.hpp"
#include "workloads/pipeline_split.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

OpClass class_of(CommGroup g) {
  switch (g) {
    case CommGroup::tp:
      return OpClass::comm_tp;
    case CommGroup::cp:
      return OpClass::comm_cp;
    case CommGroup::ep:
      return OpClass::comm_ep;
    case CommGroup::dp:
    case CommGroup::edp:
    case CommGroup::embedding:  // gradient synchronisation, as the DP reduction
      return OpClass::comm_dp;
    case CommGroup::pp:
      return OpClass::comm_pp;
  }
  return OpClass::comm_tp;
}

// An op's dependencies while it is built: a few, kept inline (no allocation per op).
class OpDeps {
 public:
  OpDeps() = default;
  explicit OpDeps(StepOpId one) { push_back(one); }
  void push_back(StepOpId id) {
    if (n_ == v_.size()) throw std::logic_error("step program: an op with more than 8 dependencies");
    v_[n_++] = id;
  }
  StepOpId back() const { return v_[n_ - 1]; }
  void assign_one(StepOpId id) {
    n_ = 0;
    push_back(id);
  }
  operator std::span<const StepOpId>() const { return {v_.data(), n_}; }

 private:
  std::array<StepOpId, 8> v_{};
  std::size_t n_ = 0;
};

struct Coords {
  int t = 0, c = 0, d = 0, p = 0;
};

// Rank placement from an order string such as "tp-cp-ep-dp-pp", innermost first. EP groups
// are carved from DP ranks: a DP rank d is (d / ep, d % ep), its expert-parallel index d % ep
// placed where "ep" stands in the order and the rest (d / ep, the expert-data-parallel index)
// where "dp" stands. With ep just inside dp (the default) the expert group is ep consecutive
// DP ranks; with ep outside dp its members are dp/ep ranks apart; with ep inside tp or cp they
// are adjacent GPUs (Megatron-LM's RankGenerator orders its expert groups the same way).
struct Placement {
  std::array<int, 5> size{};  // tp, cp, ep, dp / ep, pp
  std::array<int, 5> stride{};
  int ep = 1;
  Placement(const Parallelism& par) {
    // Folded experts (etp 1) draw their groups from whole stages, not from the DP ranks.
    ep = experts_folded(par) ? 1 : std::max(1, par.ep);
    size = {par.tp, par.cp, ep, par.dp / ep, par.pp};
    std::vector<int> order;
    std::stringstream ss(par.order);
    std::string tok;
    while (std::getline(ss, tok, '-')) {
      if (tok == "tp")
        order.push_back(0);
      else if (tok == "cp")
        order.push_back(1);
      else if (tok == "ep")
        order.push_back(2);
      else if (tok == "dp")
        order.push_back(3);
      else if (tok == "pp")
        order.push_back(4);
    }
    // An order without "ep" keeps expert groups just inside dp.
    if (std::find(order.begin(), order.end(), 2) == order.end()) {
      auto dp_at = std::find(order.begin(), order.end(), 3);
      order.insert(dp_at, 2);
    }
    for (int dim = 0; dim < 5; ++dim) {
      if (std::find(order.begin(), order.end(), dim) == order.end()) order.push_back(dim);
    }
    int s = 1;
    for (int dim : order) {
      stride[dim] = s;
      s *= size[dim];
    }
  }
  int rank(const Coords& c) const {
    return c.t * stride[0] + c.c * stride[1] + c.d % ep * stride[2] + c.d / ep * stride[3] + c.p * stride[4];
  }
};

class Builder {
 public:
  // fold_ranks: with opt.fold, one rank of each TP and CP group too (build_training_step checks
  // the result is exact and otherwise builds again without it).
  Builder(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cl, const TrainingOptions& opt, bool fold_ranks)
      : m_(m), cfg_(cfg), opt_(opt), par_(cfg.parallel), place_(cfg.parallel) {
    cm_ = opt.cost_model ? opt.cost_model : default_cost_model(cl.spec.gpu, cfg.precision.compute);
    shape_ = layer_shape(m, cfg);
    if (!m.is_generic()) dims_ = model_dims(m);
    if (m.is_generic()) {
      for (const auto& l : m.generic_layers) generic_.push_back({generic_layer_item(l, cfg)});
    } else {
      dense_layer_ = transformer_layer(m, shape_, false, par_.ep);
      moe_layer_ =
          transformer_layer(m, shape_, true, par_.ep, cfg.moe_load_imbalance, cfg.moe_dispatcher, expert_tp(par_));
      if (m.attention_window > 0) {
        // Sliding-window layers: the same items, attention over the window.
        LayerShape w = shape_;
        w.window = static_cast<double>(m.attention_window);
        dense_window_layer_ = transformer_layer(m, w, false, par_.ep);
        moe_window_layer_ =
            transformer_layer(m, w, true, par_.ep, cfg.moe_load_imbalance, cfg.moe_dispatcher, expert_tp(par_));
      }
      embed_ = embedding_items(m, shape_);
      // Selective recomputation (Korthikanti et al. 2022; Megatron-Core's "selective" checkpoints
      // core attention, checkpoint_core_attention in attention.py): the core's kernels run forward
      // again in backward, unfused QK^T, softmax and PV or a fused kernel (ring attention with
      // its K/V exchange under CP) alike. Sliding-window layers recompute their own window.
      if (cfg.recompute == Recompute::selective) {
        auto core = [](const std::vector<LayerItem>& items) {
          std::vector<LayerItem> out;
          for (const auto& it : items)
            if (it.attention_core) out.push_back(it);
          return out;
        };
        attention_core_ = core(dense_layer_);
        attention_core_window_ = core(dense_window_layer_);
      }
      head_ = head_items(m, shape_);
    }
    layers_ = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
    split_ = pipeline_split(layers_, par_);
    mbs_ = std::max(1, cfg.grad_accum());
    replicas_ = opt.fold ? 1 : par_.dp;
    // Flows and noise tell ranks apart (links shared between groups, per-GPU draws).
    fold_ranks = fold_ranks && opt.fold && !opt.flow_network && !cfg.noise.active();
    fold_tp_ = fold_ranks && par_.tp > 1;
    fold_cp_ = fold_ranks && par_.cp > 1;
    for (int d = 0; d < replicas_; ++d)
      for (int p = 0; p < par_.pp; ++p)
        for (int c = 0; c < (fold_cp_ ? 1 : par_.cp); ++c)
          for (int t = 0; t < (fold_tp_ ? 1 : par_.tp); ++t) gpus_.push_back(Coords{t, c, d, p});
    std::sort(gpus_.begin(), gpus_.end(),
              [&](const Coords& a, const Coords& b) { return place_.rank(a) < place_.rank(b); });
    seq_.assign(gpus_.size(), {});
    p_.folded = opt.fold && par_.dp > 1;
    p_.tp_folded = fold_tp_;
    p_.cp_folded = fold_cp_;
    p_.offload = cfg.offload.active();
    if (p_.offload) rates_ = offload_rates(cl.spec, cfg.offload);
    for (const Coords& c : gpus_) p_.gpus.push_back(StepGpu{c.t, c.c, c.d, c.p, place_.rank(c)});
  }

  void build() {
    if (par_.schedule == PipelineSchedule::zero_bubble) zb_order_ = zero_bubble_order();
    for (std::uint32_t g = 0; g < gpus_.size(); ++g) {
      build_gpu(g);
      if (g == 0 && gpus_.size() > 1) {
        // Every GPU runs about as many ops as the first: room for all of them at once spares
        // the copies (and fresh pages) of growing the arrays by doubling.
        const std::size_t n = gpus_.size() + gpus_.size() / 16;
        reserve_huge(p_.ops, p_.ops.size() * n);
        reserve_huge(p_.deps, p_.deps.size() * n);
      }
    }
  }

  StepProgram take() { return std::move(p_); }

  // Whether every folded-away TP/CP rank's collectives take the time its simulated peer's take:
  // then their timelines are the simulated ones (same kernels, same dependencies), and the
  // folded run is the unfolded one. A peer's group is the simulated group with each rank's TP
  // and CP coordinates rotated; the analytical model prices it from its ranks' placement.
  bool ranks_fold_exactly(const Cluster& cl) const {
    if (!fold_tp_ && !fold_cp_) return true;
    std::vector<std::pair<int, int>> shifts;  // (tp, cp) offsets of the folded-away peers
    for (int c = 0; c < (fold_cp_ ? par_.cp : 1); ++c)
      for (int t = 0; t < (fold_tp_ ? par_.tp : 1); ++t)
        if (t != 0 || c != 0) shifts.emplace_back(t, c);
    auto rotate = [&](int rank, int dt, int dc) {
      const int t = rank / place_.stride[0] % par_.tp, c = rank / place_.stride[1] % par_.cp;
      return rank + ((t + dt) % par_.tp - t) * place_.stride[0] + ((c + dc) % par_.cp - c) * place_.stride[1];
    };
    std::unordered_set<StepCall, StepCallHash> seen;  // each distinct (group, op, bytes) once
    std::vector<GpuId> peer;
    for (const StepCall& call : p_.calls) {
      if (!seen.insert(call).second) continue;
      const std::vector<GpuId>& g = p_.groups[call.group];
      const CollectiveCall base{call.op, g, call.bytes};
      const Time t0 = analytical_collective_time(cl, base, opt_.collectives);
      for (const auto& [dt, dc] : shifts) {
        peer.clear();
        for (GpuId r : g) peer.emplace_back(rotate(static_cast<int>(r.value), dt, dc));
        std::vector<GpuId> a = g, b = peer;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a == b) continue;  // the peer's group is this one (a TP group, or DP over CP ranks)
        if (analytical_collective_time(cl, CollectiveCall{call.op, peer, call.bytes}, opt_.collectives) != t0)
          return false;
      }
    }
    return true;
  }

 private:
  StepProgram p_;
  std::vector<Coords> gpus_;
  const ModelSpec& m_;
  const TrainingConfig& cfg_;
  const TrainingOptions& opt_;
  const Parallelism& par_;
  Placement place_;
  CostModelPtr cm_;
  LayerShape shape_;
  ModelDims dims_;
  std::vector<LayerItem> dense_layer_, moe_layer_, embed_, head_;
  std::vector<LayerItem> dense_window_layer_, moe_window_layer_;  // with m.attention_window
  std::vector<LayerItem> attention_core_;         // recomputed in backward under selective recomputation
  std::vector<LayerItem> attention_core_window_;  // the same for sliding-window layers
  std::vector<std::vector<LayerItem>> generic_;   // one item list per layer of a generic model
  int layers_ = 0;
  PipelineSplit split_;

  const std::vector<LayerItem>& items_for(int layer) const {
    if (!generic_.empty()) return generic_[static_cast<std::size_t>(layer)];
    if (m_.windowed_layer(layer)) return is_moe_layer(layer) ? moe_window_layer_ : dense_window_layer_;
    return is_moe_layer(layer) ? moe_layer_ : dense_layer_;
  }
  int mbs_ = 1, replicas_ = 1;
  OffloadRates rates_;                                               // with cfg.offload active
  bool fold_tp_ = false, fold_cp_ = false;                           // one rank stands for its TP (CP) group
  std::unordered_map<std::uint64_t, std::uint32_t> folded_members_;  // simulated_members, by group
  std::vector<std::array<std::uint32_t, 7>> seq_;                    // collectives issued per group kind, per GPU
  struct Pending {
    StepCallId id;
    std::uint32_t remaining;  // simulated members still to join; the entry is dropped at zero
  };
  std::unordered_map<std::uint64_t, Pending> rendezvous_;
  std::unordered_map<std::uint64_t, std::uint32_t> group_index_;
  std::unordered_map<OpCost, std::uint32_t, OpCostHash> cost_index_;
  std::uint16_t cur_mb_ = 0;
  std::int16_t cur_layer_ = -1;
  StepPhase cur_phase_ = StepPhase::forward;

  // Joins (or opens) the rendezvous named `key` with `members` simulated members.
  StepCallId join(std::uint64_t key, std::uint32_t members, CollectiveOp op, std::uint32_t group, double bytes) {
    if (members == 1) {
      // Its only member: the call opens and closes here (no entry to look up later).
      p_.calls.push_back(StepCall{op, group, bytes});
      return StepCallId(static_cast<std::uint32_t>(p_.calls.size() - 1));
    }
    auto it = rendezvous_.find(key);
    if (it == rendezvous_.end()) {
      const StepCallId r(static_cast<std::uint32_t>(p_.calls.size()));
      p_.calls.push_back(StepCall{op, group, bytes});
      it = rendezvous_.emplace(key, Pending{r, members}).first;
    }
    const StepCallId r = it->second.id;
    if (--it->second.remaining == 0) rendezvous_.erase(it);
    return r;
  }

  // The group named `key`, its ranks listed by `ranks()` the first time it is seen.
  template <class Ranks>
  std::uint32_t intern_group(std::uint64_t key, Ranks&& ranks) {
    auto it = group_index_.find(key);
    if (it != group_index_.end()) return it->second;
    p_.groups.push_back(ranks());
    const auto id = static_cast<std::uint32_t>(p_.groups.size() - 1);
    group_index_.emplace(key, id);
    return id;
  }

  // Appends an op of GPU g after `deps`; `call` is valid for a collective member.
  StepOpId push_op(std::uint32_t g, std::string_view name, const char* kind, OpClass cls, int stream, double flops,
                   double bytes, Time dur, StepCallId call, std::span<const StepOpId> deps) {
    StepOp op;
    op.gpu = g;
    op.name = p_.names.intern(name);
    op.kind = static_cast<std::uint16_t>(p_.names.intern(kind));
    op.layer = cur_layer_;
    op.mb = cur_mb_;
    op.cls = cls;
    op.stream = static_cast<StepStream>(stream);
    op.phase = cur_phase_;
    op.flops = static_cast<float>(flops);
    op.bytes = static_cast<float>(bytes);
    op.duration = dur;
    op.call = call;
    op.deps_begin = static_cast<std::uint32_t>(p_.deps.size());
    p_.deps.insert(p_.deps.end(), deps.begin(), deps.end());
    op.deps_end = static_cast<std::uint32_t>(p_.deps.size());
    p_.ops.push_back(op);
    return StepOpId(static_cast<std::uint32_t>(p_.ops.size() - 1));
  }

  // `after` must also wait for `before` (added once `after` exists).
  void add_dep(StepOpId before, StepOpId after) {
    p_.late_deps.push_back(StepLateDep{static_cast<std::uint32_t>(p_.ops.size()), before, after});
  }

  // A kernel: its shape interned in StepProgram::costs (each distinct OpCost once).
  StepOpId kernel(std::uint32_t g, int stream, const OpCost& c, std::string_view name, OpClass cls,
                  std::span<const StepOpId> deps) {
    const StepOpId id =
        add(g, stream, seconds(op_seconds(cm_, c)), name, to_string(c.kind), cls, c.flops, c.bytes, deps);
    auto [it, fresh] = cost_index_.try_emplace(c, static_cast<std::uint32_t>(p_.costs.size()));
    if (fresh) p_.costs.push_back(c);
    p_.ops[id.value].cost = it->second;
    return id;
  }

  bool is_moe_layer(int layer) const { return m_.moe_layer(layer); }

  StepOpId add(std::uint32_t g, int stream, Time dur, std::string_view name, const char* kind, OpClass cls,
               double flops, double bytes, std::span<const StepOpId> deps) {
    return push_op(g, name, kind, cls, stream, flops, bytes, dur, StepCallId::none(), deps);
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
        if (experts_folded(par_)) {
          for (int l : folded_indices(c, grp)) r.emplace_back(place_.rank(from_stage_index(l, c.p)));
          break;
        }
        const int base = c.d / par_.ep * par_.ep;
        for (x.d = base; x.d < base + par_.ep; ++x.d) r.emplace_back(place_.rank(x));
        break;
      }
      case CommGroup::edp:  // the DP ranks with this rank's expert-parallel index, and their CP ranks
        if (experts_folded(par_)) {
          for (int l : folded_indices(c, grp)) r.emplace_back(place_.rank(from_stage_index(l, c.p)));
          break;
        }
        for (x.d = c.d % par_.ep; x.d < par_.dp; x.d += par_.ep)
          for (x.c = 0; x.c < par_.cp; ++x.c) r.emplace_back(place_.rank(x));
        break;
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

  // MoE parallel folding: a rank's index within its stage, TP fastest, then CP, then DP (the order
  // of Megatron-Core's RankGenerator), and back.
  int stage_index(const Coords& c) const { return c.t + par_.tp * (c.c + par_.cp * c.d); }
  Coords from_stage_index(int l, int p) const {
    return Coords{l % par_.tp, l / par_.tp % par_.cp, l / (par_.tp * par_.cp), p};
  }
  // The stage indices of c's folded expert group: ep consecutive ones (ep), or those ep apart (edp).
  std::vector<int> folded_indices(const Coords& c, CommGroup grp) const {
    const int l = stage_index(c), ranks = par_.tp * par_.cp * par_.dp;
    std::vector<int> r;
    if (grp == CommGroup::ep) {
      for (int i = l / par_.ep * par_.ep; i < l / par_.ep * par_.ep + par_.ep; ++i) r.push_back(i);
    } else {
      for (int i = l % par_.ep; i < ranks; i += par_.ep) r.push_back(i);
    }
    return r;
  }
  // How many of c's folded expert group this build simulates (folded replicas and TP/CP peers
  // are not simulated; the collective prices the whole group from its ranks).
  std::uint32_t simulated_members(const Coords& c, CommGroup grp) {
    const std::uint64_t key = static_cast<std::uint64_t>(grp) << 32 | static_cast<std::uint64_t>(group_first(c, grp));
    auto it = folded_members_.find(key);
    if (it != folded_members_.end()) return it->second;
    std::uint32_t n = 0;
    for (int l : folded_indices(c, grp)) {
      const Coords x = from_stage_index(l, c.p);
      if (x.d < replicas_ && (!fold_tp_ || x.t == 0) && (!fold_cp_ || x.c == 0)) ++n;
    }
    folded_members_.emplace(key, n);
    return n;
  }

  // group_ranks(c, grp).front() and .size(), without listing the group.
  int group_first(const Coords& c, CommGroup grp) const {
    Coords x = c;
    switch (grp) {
      case CommGroup::tp:
        x.t = 0;
        break;
      case CommGroup::cp:
        x.c = 0;
        break;
      case CommGroup::dp:
        x.d = 0;
        x.c = 0;
        break;
      case CommGroup::ep:
      case CommGroup::edp:
        if (experts_folded(par_)) {
          x = from_stage_index(grp == CommGroup::ep ? stage_index(c) / par_.ep * par_.ep : stage_index(c) % par_.ep,
                               c.p);
        } else if (grp == CommGroup::ep) {
          x.d = c.d / par_.ep * par_.ep;
        } else {
          x.d = c.d % par_.ep;
          x.c = 0;
        }
        break;
      case CommGroup::pp:
      case CommGroup::embedding:
        x.p = 0;
        break;
    }
    return place_.rank(x);
  }
  int group_size(CommGroup grp) const {
    switch (grp) {
      case CommGroup::tp:
        return par_.tp;
      case CommGroup::cp:
        return par_.cp;
      case CommGroup::dp:
        return par_.dp * par_.cp;
      case CommGroup::ep:
        return par_.ep;
      case CommGroup::edp:
        return par_.dp * par_.cp * (experts_folded(par_) ? par_.tp : 1) / par_.ep;
      case CommGroup::pp:
        return par_.pp;
      case CommGroup::embedding:
        return 2;
    }
    return 1;
  }

  // A collective member task for GPU g: every member issues its group's collectives in the
  // same order, so (group, sequence number) names the rendezvous.
  StepOpId collective(std::uint32_t g, int stream, CommGroup grp, CollectiveOp op, double bytes, std::string_view name,
                      std::span<const StepOpId> deps) {
    const Coords& c = gpus_[g];
    const std::uint64_t kind = static_cast<std::uint64_t>(grp);
    const std::uint64_t first = static_cast<std::uint64_t>(group_first(c, grp));
    const std::uint64_t seq = seq_[g][static_cast<int>(grp)]++;
    // Members simulated: the whole group, except DP/EP groups folded down to one replica and
    // TP/CP groups folded down to one rank.
    std::uint32_t members = static_cast<std::uint32_t>(group_size(grp));
    if (opt_.fold && grp == CommGroup::ep) members = 1;
    if (opt_.fold && (grp == CommGroup::dp || grp == CommGroup::edp)) {
      members = fold_cp_ ? 1 : static_cast<std::uint32_t>(par_.cp);
    }
    if (experts_folded(par_) && (grp == CommGroup::ep || grp == CommGroup::edp)) members = simulated_members(c, grp);
    if ((fold_tp_ && grp == CommGroup::tp) || (fold_cp_ && grp == CommGroup::cp)) members = 1;
    const std::uint32_t group = intern_group(kind << 32 | first, [&] { return group_ranks(c, grp); });
    const StepCallId r = join(kind << 60 | first << 36 | seq, members, op, group, bytes);
    StepOpId id = push_op(g, name, to_string(op), class_of(grp), stream, 0, bytes, Time{}, r, deps);
    p_.ops.back().group = static_cast<std::uint8_t>(grp);
    return id;
  }

  // A point-to-point transfer between pipeline stages: a two-member rendezvous.
  // `vs` is the receiving virtual stage, so chunks of an interleaved pipeline keep apart.
  StepOpId p2p(std::uint32_t g, const Coords& src, const Coords& dst, bool fwd, int mb, int vs, bool sender,
               std::span<const StepOpId> deps) {
    const double bytes = shape_.tokens * static_cast<double>(m_.hidden) * cfg_.precision.weight_bytes / par_.tp;
    const std::uint64_t s = static_cast<std::uint64_t>(place_.rank(src));
    const std::uint64_t d = static_cast<std::uint64_t>(place_.rank(dst));
    const std::uint32_t group = intern_group(std::uint64_t{7} << 61 | s << 30 | d, [&] {
      return std::vector<GpuId>{GpuId(s), GpuId(d)};
    });
    // Keys 8 and 9 in the top four bits: past every CommGroup's (collective() above).
    const StepCallId r = join(std::uint64_t{8 + (fwd ? 0u : 1u)} << 60 | s << 32 |
                                  static_cast<std::uint64_t>(vs) << 16 | static_cast<std::uint64_t>(mb),
                              2, CollectiveOp::send_recv, group, bytes);
    // Transfers hold no stream: a pipeline stage posts its sends and receives as they come
    // (Megatron batches isend/irecv), so they must not serialise behind one another.
    const char* name =
        fwd ? (sender ? "send_activations" : "recv_activations") : (sender ? "send_grads" : "recv_grads");
    StepOpId id = push_op(g, name, "send_recv", OpClass::comm_pp, 2, 0, bytes, Time{}, r, deps);
    p_.ops.back().group = static_cast<std::uint8_t>(CommGroup::pp);
    return id;
  }

  // Ring attention on GPU g (Liu et al. 2023; Megatron-CP): attention in cp blocks, block i
  // over the K/V chunk that arrived in step i; step i+1 forwards that chunk to the next CP rank
  // while block i computes. Backward passes the chunk and its gradient. After every block but the
  // first, a memory-bound merge of the partial result into the FP32 accumulators (TE's CP). On
  // return deps.back() is the last block (or its merge).
  void ring_attention(std::uint32_t g, const LayerItem& it, const OpCost& whole, std::string_view name, bool fwd,
                      OpDeps& deps, StepOpId& join) {
    if (join.valid()) deps.push_back(join), join = StepOpId::none();
    const int n = it.ring_steps;
    OpCost blk = whole;
    blk.flops /= n;
    blk.bytes /= n;
    const double bytes = it.comm_bytes * (fwd ? 1 : 2);
    const std::string kv_name = it.name + (fwd ? " kv" : " kv+grad");
    StepOpId prev = StepOpId::none(), arrived = StepOpId::none();
    for (int i = 0; i < n; ++i) {
      StepOpId next = StepOpId::none();
      if (i + 1 < n) {
        const StepOpId after[] = {arrived};
        next = collective(g, 4, CommGroup::cp, CollectiveOp::send_recv, bytes, kv_name,
                          i == 0 ? std::span<const StepOpId>(deps) : std::span<const StepOpId>(after));
      }
      OpDeps bdeps = i == 0 ? deps : OpDeps(prev);
      if (arrived.valid()) bdeps.push_back(arrived);
      prev = kernel(g, 0, blk, name, OpClass::compute, bdeps);
      const double merge_bytes = fwd ? it.ring_merge_fwd_bytes : it.ring_merge_bwd_bytes;
      if (i > 0 && merge_bytes > 0) {
        const OpCost merge{OpKind::elementwise, 0, merge_bytes};
        const StepOpId after_block[] = {prev};
        prev = kernel(g, 0, merge, std::string(name) + " merge", OpClass::compute, after_block);
      }
      arrived = next;
    }
    deps.assign_one(prev);
  }

  // Which part of a layer's work a run covers. Zero-bubble schedules split backward into the
  // input gradient (B, on the critical path) and the weight gradient (W, deferrable).
  enum class Pass { forward, backward, backward_input, backward_weight };

  // Runs `items` on GPU g's compute stream after `dep` (and `extra`, if valid); returns the last task.
  StepOpId run_items(std::uint32_t g, const std::vector<LayerItem>& items, Pass pass, StepOpId dep,
                     StepOpId extra = StepOpId::none()) {
    // With TP communication overlap (Megatron's tp_comm_overlap), a TP collective runs on its
    // own stream beside the GEMM that follows it (the GEMM is split into chunks that consume the
    // collective's output as it arrives); the next kernel waits for both.
    const bool overlap_tp = par_.tp_comm_overlap;
    StepOpId join = StepOpId::none();
    auto one = [&](const LayerItem& it) {
      // An item with no work in this pass (the training metrics' backward) issues no kernel.
      if (const OpCost& w = pass == Pass::forward ? it.fwd : it.bwd; !it.is_comm && w.flops == 0 && w.bytes == 0) {
        return;
      }
      OpDeps deps;
      if (dep.valid()) deps.push_back(dep);
      if (extra.valid()) {
        deps.push_back(extra);
        extra = StepOpId::none();
      }
      if (it.is_comm) {
        if (pass == Pass::backward_weight) return;
        auto op = pass == Pass::forward ? it.fwd_comm : it.bwd_comm;
        if (!op) return;
        for (StepOpId* j : {&join, &pending_join_}) {
          if (j->valid()) deps.push_back(*j), *j = StepOpId::none();
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
      const std::string wgrad = pass == Pass::backward_weight ? it.name + " wgrad" : std::string();
      const std::string_view name = pass == Pass::backward_weight ? std::string_view(wgrad) : std::string_view(it.name);
      if (it.ring_steps > 1 && pass != Pass::backward_weight) {
        ring_attention(g, it, c, name, pass == Pass::forward, deps, join);
        dep = deps.back();
        if (pending_join_.valid()) add_dep(pending_join_, dep), pending_join_ = StepOpId::none();
        return;
      }
      // The kernel right after an overlapped collective runs beside it; the one after that joins it.
      const bool beside = join.valid() && gemm;
      if (join.valid() && !beside) deps.push_back(join), join = StepOpId::none();
      dep = kernel(g, 0, c, name, OpClass::compute, deps);
      if (beside) {
        // Carry the collective to the next kernel.
        pending_join_ = join;
        join = StepOpId::none();
      } else if (pending_join_.valid()) {
        add_dep(pending_join_, dep);
        pending_join_ = StepOpId::none();
      }
    };
    if (pass == Pass::forward) {
      for (const auto& it : items) one(it);
    } else {
      for (auto it = items.rbegin(); it != items.rend(); ++it) one(*it);
    }
    if (extra.valid()) add_dep(extra, dep);  // no task ran: still order after extra
    for (StepOpId j : {join, pending_join_}) {
      if (!j.valid()) continue;
      // Nothing followed inside this run: join on a zero-length marker so callers see one task.
      StepOpId deps2[] = {dep, j};
      dep = add(g, 0, Time{}, "tp_overlap_join", "elementwise", OpClass::compute, 0, 0, deps2);
    }
    pending_join_ = StepOpId::none();
    return dep;
  }
  StepOpId pending_join_ = StepOpId::none();

  double layer_grad_bytes(int layer) const {
    if (m_.is_generic()) return m_.generic_layers[static_cast<std::size_t>(layer)].params * cfg_.precision.grad_bytes;
    const double t = par_.tp;
    // Attention and MLP weights split over TP; the two norms (scale, and bias for LayerNorm) and
    // the MoE router replicated.
    double p = dims_.attention_params / t + 2.0 * dims_.norm_params;
    if (is_moe_layer(layer)) {
      p += routed_expert_params(layer) + dims_.expert_params * m_.moe.shared_experts / t + dims_.router_params;
    } else {
      p += dims_.dense_mlp_params / t;
    }
    return p * cfg_.precision.grad_bytes;
  }
  // This GPU's routed experts of a layer: E / ep of them, split over TP (0 outside MoE layers).
  double routed_expert_params(int layer) const {
    if (m_.is_generic() || !is_moe_layer(layer)) return 0;
    return dims_.expert_params * m_.moe.experts / par_.ep / expert_tp(par_);
  }
  // The part of layer_grad_bytes held by the expert-parallel ranks' routed experts, reduced and
  // gathered over the expert-data-parallel group (0 without expert parallelism: one DP group).
  double layer_expert_grad_bytes(int layer) const {
    return par_.ep > 1 ? routed_expert_params(layer) * cfg_.precision.grad_bytes : 0;
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

  // The ZeRO-3 all-gathers of a layer, the rest of the layer over DP first, then its routed
  // experts over the expert-data-parallel group (FSDP2 and DeepSpeed shard experts there; with
  // ep = dp x cp a rank holds its experts whole and gathers nothing for them). FSDP: one
  // all-gather per unit and group (one FlatParameter or fully_shard group per transformer
  // block). DeepSpeed: the tensors of at least stage3_param_persistence_threshold elements (the
  // norms' scales and biases stay gathered), coalesced into buckets of at most
  // stage3_prefetch_bucket_size elements, split evenly.
  struct GatherChunk {
    double bytes;
    CommGroup group;
  };
  std::vector<GatherChunk> gather_chunks(int layer) const {
    const double w = cfg_.precision.weight_bytes;
    const double experts = par_.ep > 1 ? routed_expert_params(layer) * w : 0;
    double bytes = layer_param_bytes(layer) - experts;
    const Sharding& s = par_.sharding;
    std::vector<GatherChunk> chunks;
    auto add_chunks = [&](double b, CommGroup grp) {
      std::size_t k = 1;
      if (s.framework == Sharding::Framework::deepspeed) {
        k = static_cast<std::size_t>(std::max(1.0, std::ceil(b / w / s.prefetch_bucket_elements)));
      }
      for (std::size_t i = 0; i < k; ++i) chunks.push_back({b / static_cast<double>(k), grp});
    };
    if (s.framework == Sharding::Framework::deepspeed && !m_.is_generic() &&
        m_.hidden < s.persistence_threshold_elements) {
      bytes -= 2.0 * dims_.norm_params * w;
    }
    add_chunks(bytes, CommGroup::dp);
    if (experts > 0) add_chunks(experts, CommGroup::edp);
    return chunks;
  }

  // A ZeRO-3 collective as the framework issues it: its host work first (hooks, copy-in, the
  // c10d call, Sharding::collective_overhead_s), then the collective, both on the DP stream.
  StepOpId issue(std::uint32_t g, CommGroup grp, CollectiveOp op, double bytes, std::string_view name,
                 std::span<const StepOpId> deps) {
    const Time host = seconds(par_.sharding.collective_overhead_s);
    if (host <= Time{}) return collective(g, 1, grp, op, bytes, name, deps);
    const StepOpId h[] = {add(g, 1, host, "zero3_host", "host", OpClass::comm_dp, 0, 0, deps)};
    return collective(g, 1, grp, op, bytes, name, h);
  }

  // Offloading (docs/training.md, "Offloading"): a host<->device copy of `bytes` on the GPU's
  // PCIe direction (copy engine), one after another in issue order, at `rate` bytes/s.
  StepOpId pcie(std::uint32_t g, bool h2d, double bytes, double rate, std::string_view name,
                std::span<const StepOpId> deps) {
    const int stream = static_cast<int>(h2d ? StepStream::pcie_h2d : StepStream::pcie_d2h);
    return add(g, stream, seconds(bytes / rate), name, "memcpy", OpClass::offload, 0, bytes, deps);
  }

  // ZeRO-Offload's CPU step for this GPU's shard of `shard_params` parameters, after `deps`:
  // CPU Adam on the host, the updated FP16/BF16 parameters copied up tile by tile as each tile is
  // updated (Ren et al. Algorithm 1, line 15), so the copy overlaps the update. Returns the
  // last op (the last upload, or the last CPU tile where the parameters are not uploaded).
  StepOpId cpu_step(std::uint32_t g, double shard_params, bool upload, std::span<const StepOpId> deps) {
    const auto& pr = cfg_.precision;
    const double cpu_s = cpu_step_seconds(shard_params, pr, cfg_.offload, rates_) / kCpuTiles;
    const double up_bytes = shard_params * pr.weight_bytes / kCpuTiles;
    StepOpId last = StepOpId::none();
    for (int i = 0; i < kCpuTiles; ++i) {
      const StepOpId tile = add(g, static_cast<int>(StepStream::host), seconds(cpu_s), "cpu_adam", "host",
                                OpClass::optimizer, 0, 0, i == 0 ? deps : std::span<const StepOpId>());
      last = tile;
      if (upload) {
        const StepOpId t[] = {tile};
        last = pcie(g, true, up_bytes, rates_.h2d_bytes_per_s, "upload_params", t);
      }
    }
    return last;
  }
  static constexpr int kCpuTiles = 4;

  void build_gpu(std::uint32_t g) {
    const Coords c = gpus_[g];
    const int stage = c.p, pp = par_.pp, v = par_.schedule == PipelineSchedule::interleaved ? par_.virtual_stages : 1;
    const PipelineSplit& split = split_;
    const int zero = par_.zero_stage;
    const bool dp_comm = par_.dp * par_.cp > 1;
    const bool zb = par_.schedule == PipelineSchedule::zero_bubble;
    std::vector<StepOpId> dp_tasks;
    double bucket = 0, expert_bucket = 0;  // gradients to reduce over DP, and over expert DP
    // Offloading: the gradients of each reduced bucket (this GPU's partition of it) go down to
    // the host as soon as they are reduced, beside the rest of backward (ZeRO-Offload Sec. 4.1);
    // ZeRO-Infinity fetches each layer's parameter shard up before its all-gather.
    const Offload& off = cfg_.offload;
    const bool offload_grads = off.optimizer != Offload::Device::none;
    const bool fetch_params = off.params != Offload::Device::none && zero >= 3;
    const double dp_ranks = group_size(CommGroup::dp), edp_ranks = group_size(CommGroup::edp);
    // Gradients are reduced over DP (and CP) ranks, routed experts' over the expert-data-parallel
    // ones: an all-reduce, or a reduce-scatter when ZeRO shards them.
    auto flush_bucket = [&](StepOpId after) {
      const double dense = bucket, experts = expert_bucket;
      bucket = expert_bucket = 0;
      if (dense + experts <= 0 || (!dp_comm && !offload_grads)) return;
      StepOpId reduced = after;
      const CollectiveOp op = zero >= 1 ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce;
      const std::string name = "grad_" + std::string(to_string(op));
      for (const auto& [grp, b] : {std::pair{CommGroup::dp, dense}, std::pair{CommGroup::edp, experts}}) {
        if (b <= 0 || group_size(grp) <= 1) continue;
        StepOpId deps[] = {after};
        dp_tasks.push_back(zero >= 3 ? issue(g, grp, op, b, name, deps) : collective(g, 1, grp, op, b, name, deps));
        reduced = dp_tasks.back();
      }
      if (offload_grads) {
        const StepOpId d[] = {reduced};
        dp_tasks.push_back(
            pcie(g, false, dense / dp_ranks + experts / edp_ranks, rates_.d2h_bytes_per_s, "offload_grads", d));
      }
    };
    // ZeRO-3 gathers each layer's parameters before it runs, as the framework issues them
    // (docs/training.md, "Sharded data parallelism"). recent[1] is the last layer this GPU
    // finished, recent[0] the one before: a gather whose window is one unit ahead waits for
    // recent[0] (the rate limiter: the layer before it has started), one past a DeepSpeed
    // prefetch bucket for recent[1].
    const Sharding& shd = par_.sharding;
    using Framework = Sharding::Framework;
    const bool fsdp1 = shd.framework == Framework::fsdp1, ds = shd.framework == Framework::deepspeed;
    const bool limited = !fsdp1 || shd.limit_all_gathers;
    const bool zero3 = zero >= 3 && dp_comm;
    // FSDP2 without resharding keeps forward's parameters for backward; FSDP1's backward_pre,
    // FSDP2 and DeepSpeed issue the next layer's backward gather before this layer's gradients.
    const bool backward_gathers = shd.framework != Framework::fsdp2 || shd.reshard_after_forward;
    const bool prefetch_backward = !fsdp1 || shd.backward_prefetch == Sharding::BackwardPrefetch::backward_pre;
    std::array<StepOpId, 2> recent{StepOpId::none(), StepOpId::none()};
    // A layer's gathers: all of them, or (a prefetch issued one layer early) the first only, or
    // the rest. `early`: issued before the previous layer's compute, so its window is one
    // layer nearer.
    enum class Part { all, first, rest };
    auto gather = [&](int layer, Part part, bool early = false) -> StepOpId {
      if (!zero3 && !fetch_params) return StepOpId::none();
      StepOpId last = StepOpId::none();
      const std::int16_t issuing = cur_layer_;
      cur_layer_ = static_cast<std::int16_t>(layer);  // the gather names the layer it gathers
      const std::vector<GatherChunk> chunks = gather_chunks(layer);
      for (std::size_t i = part == Part::rest ? 1 : 0; i < (part == Part::first ? 1 : chunks.size()); ++i) {
        OpDeps deps;
        const StepOpId window = i > 0 ? recent[1] : !limited ? StepOpId::none() : early ? recent[1] : recent[0];
        if (window.valid()) deps.push_back(window);
        const double ranks = group_size(chunks[i].group);
        if (fetch_params) {
          // This GPU's shard of the chunk, from host memory or NVMe, before the all-gather.
          const StepOpId up =
              pcie(g, true, chunks[i].bytes / ranks, rates_.param_fetch_bytes_per_s, "fetch_params", deps);
          deps.assign_one(up);
          last = up;
        }
        if (zero3 && ranks > 1) {
          last = issue(g, chunks[i].group, CollectiveOp::all_gather, chunks[i].bytes, "fsdp_all_gather", deps);
        }
      }
      cur_layer_ = issuing;
      return last;
    };
    auto layer_done = [&](StepOpId t) {
      recent[0] = recent[1];
      recent[1] = t;
    };
    const auto plan = schedule(stage);
    std::vector<int> backwards_left(static_cast<std::size_t>(v), mbs_);
    StepOpId last_compute = StepOpId::none();
    for (const PipelineSlot& sl : plan) {
      const int mb = sl.micro_batch, vs = sl.chunk * pp + stage, nvs = pp * v;
      const bool first = vs == 0, last = vs == nvs - 1;
      const bool fwd = sl.pass == PipelineSlot::Pass::forward;
      cur_mb_ = static_cast<std::uint16_t>(mb);
      cur_layer_ = -1;
      cur_phase_ = fwd ? StepPhase::forward : StepPhase::backward;
      StepOpId dep = last_compute;
      // Neighbouring virtual stages: the previous and next chunks' GPUs.
      Coords prev = c, next = c;
      prev.p = (stage + pp - 1) % pp;
      next.p = (stage + 1) % pp;
      const int chunk_layers = split.layers[static_cast<std::size_t>(vs)];
      const int chunk_first = split.first[static_cast<std::size_t>(vs)];
      if (sl.pass == PipelineSlot::Pass::weight) {
        for (int l = chunk_layers - 1; l >= 0; --l) {
          const int layer = chunk_first + l;
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
          const int layer = chunk_first + l;
          cur_layer_ = static_cast<std::int16_t>(layer);
          StepOpId gth = gather(layer, Part::all);
          dep = run_items(g, items_for(layer), Pass::forward, dep, gth);
          layer_done(dep);
        }
        cur_layer_ = -1;
        if (last) dep = run_items(g, head_, Pass::forward, dep);
        p_.ops.back().activation_delta = +1;
        if (!last) {
          StepOpId deps[] = {dep};
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
                    dims_.norm_params * cfg_.precision.grad_bytes;
        }
        StepOpId prefetched = StepOpId::none();
        for (int l = chunk_layers - 1; l >= 0; --l) {
          const int layer = chunk_first + l;
          const auto& items = items_for(layer);
          cur_layer_ = static_cast<std::int16_t>(layer);
          StepOpId gth = StepOpId::none();
          if (backward_gathers && prefetch_backward) {
            // The top layer's first gather now; the others were prefetched a layer early.
            const StepOpId first_gth = l == chunk_layers - 1 ? gather(layer, Part::first) : prefetched;
            const StepOpId rest = gather(layer, Part::rest);
            gth = rest.valid() ? rest : first_gth;
            prefetched = l > 0 ? gather(layer - 1, Part::first, true) : StepOpId::none();
          } else if (backward_gathers) {
            gth = gather(layer, Part::all);
          }
          // Full recomputation reruns the layer's forward (under the block method only the
          // chunk's first recompute_num_layers); selective, the attention core.
          const bool whole = recomputes_layer(cfg_, l);
          if (whole || !attention_core_.empty()) {
            cur_phase_ = StepPhase::recompute;
            const auto& core = m_.windowed_layer(layer) ? attention_core_window_ : attention_core_;
            dep = run_items(g, whole ? items : core, Pass::forward, dep, gth);
            gth = StepOpId::none();
            cur_phase_ = StepPhase::backward;
          }
          dep = run_items(g, items, bp, dep, gth);
          layer_done(dep);
          if (reduce_now) {
            const double experts = layer_expert_grad_bytes(layer);
            bucket += layer_grad_bytes(layer) - experts;
            expert_bucket += experts;
            // FSDP reduce-scatters each unit's gradients, DeepSpeed each reduce_bucket_size of
            // them; ZeRO-0 to 2 fill DDP-style buckets.
            const double filled = bucket + expert_bucket;
            const bool flush = zero >= 3 ? !ds || filled >= shd.reduce_bucket_elements * cfg_.precision.grad_bytes
                                         : cfg_.overlap_grad_reduce && filled >= cfg_.grad_bucket_bytes;
            if (flush) {
              const std::size_t before = dp_tasks.size();
              flush_bucket(dep);
              if (zero3 && ds && !shd.overlap_comm && dp_tasks.size() > before) {
                // Without overlap_comm the reduction runs in line: backward waits for it.
                StepOpId both[] = {dep, dp_tasks.back()};
                dep = add(g, 0, Time{}, "reduce_wait", "elementwise", OpClass::compute, 0, 0, both);
              }
            }
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
        p_.ops.back().activation_delta = -1;
        if (reduce_now) flush_bucket(dep);
        if (!first) {
          StepOpId deps[] = {dep};
          p2p(g, c, prev, false, mb, vs - 1, true, deps);
        }
      }
      last_compute = dep;
    }
    cur_phase_ = StepPhase::step;
    cur_layer_ = -1;
    // A tied word embedding lives on the first stage and, as the LM head, on the last: after the
    // DP reduction the two copies' gradients are all-reduced between them (Megatron's embedding
    // group, finalize_model_grads), so both apply the same update.
    if (m_.tied_embeddings && !m_.is_generic() && pp > 1 && (stage == 0 || stage == pp - 1)) {
      std::vector<StepOpId> deps = dp_tasks;
      deps.push_back(last_compute);
      const double bytes = static_cast<double>(m_.hidden) * m_.vocab / par_.tp * cfg_.precision.grad_bytes;
      dp_tasks.push_back(
          collective(g, 1, CommGroup::embedding, CollectiveOp::all_reduce, bytes, "embedding_grad_all_reduce", deps));
    }
    // Optimizer step on this GPU's shard, once every gradient has been reduced.
    double params = stage_params(m_, cfg_, stage);
    // ZeRO's shard: routed experts over the expert-data-parallel ranks only (workloads/memory.hpp).
    const double experts = stage_expert_params(m_, cfg_, stage);
    const double shard =
        zero >= 1 ? (params - experts) / (par_.dp * par_.cp) + experts / expert_data_parallel(par_) : params;
    const auto& pr = cfg_.precision;
    OpCost opt{OpKind::optimizer, 0,
               shard * (pr.grad_bytes + 2 * pr.master_bytes + pr.optimizer_state_bytes * 2 + pr.weight_bytes)};
    std::vector<StepOpId> deps = dp_tasks;
    deps.push_back(last_compute);
    StepOpId o = StepOpId::none();
    if (offload_grads) {
      // ZeRO-Offload: CPU Adam once this GPU's gradients are on the host, the updated parameters
      // back up (ZeRO-Infinity's offloaded parameters are written where they live, not uploaded).
      // With the delayed parameter update the CPU step is the previous step's, run beside this
      // step's forward and backward (Ren et al. Sec. 5.2): it waits for nothing of this step.
      // A join first: the dependencies may be more than an op holds.
      StepOpId join[] = {add(g, 0, Time{}, "offload_grads_done", "host", OpClass::compute, 0, 0, deps)};
      const std::span<const StepOpId> after = off.delayed_param_update ? std::span<const StepOpId>() : join;
      o = cpu_step(g, shard, !fetch_params, after);
    } else {
      o = kernel(g, 0, opt, "adam_step", OpClass::optimizer, deps);
    }
    if ((zero == 1 || zero == 2) && dp_comm) {
      // The updated shards gathered back: experts within their expert-data-parallel group.
      StepOpId d2[] = {o};
      const double dense = par_.ep > 1 ? params - experts : params;
      // With fp8_param_gather the linear layers' weights travel as FP8, 1 byte each.
      const bool fp8 = pr.fp8_param_gather && pr.compute == Dtype::fp8 && !m_.is_generic();
      const double fp8_dense = fp8 ? stage_linear_params(m_, cfg_, stage) - (par_.ep > 1 ? experts : 0.0) : 0.0;
      collective(g, 1, CommGroup::dp, CollectiveOp::all_gather,
                 dense * pr.weight_bytes - fp8_dense * (pr.weight_bytes - 1), "param_all_gather", d2);
      if (par_.ep > 1 && experts > 0 && edp_ranks > 1) {
        collective(g, 1, CommGroup::edp, CollectiveOp::all_gather, experts * (fp8 ? 1.0 : pr.weight_bytes),
                   "param_all_gather", d2);
      }
    }
  }
};

}  // namespace

StepProgram build_training_step(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                const TrainingOptions& opt) {
  // Ops record their micro-batch in 16 bits and pipeline transfers are keyed by it, among the
  // checks check_training_layout shares with the scenario loader.
  require_simulable_layout(m, cfg, cluster);
  {
    Builder b(m, cfg, cluster, opt, opt.fold_ranks);
    b.build();
    if (b.ranks_fold_exactly(cluster)) return b.take();
  }
  Builder b(m, cfg, cluster, opt, false);
  b.build();
  return b.take();
}

}  // namespace ctwin
