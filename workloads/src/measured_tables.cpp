#include "workloads/measured_tables.hpp"

#include <algorithm>
#include <cmath>

#include "topology/network.hpp"

namespace ctwin {

std::optional<double> measured_collective_s(const std::vector<MeasuredCollective>& tables, CollectiveOp op, int ranks,
                                            bool inter_node, double bytes) {
  for (const MeasuredCollective& t : tables) {
    if (t.op != op || t.ranks != ranks || t.inter_node != inter_node || t.points.empty()) continue;
    const auto& pts = t.points;
    if (bytes < pts.front().first || bytes > pts.back().first) return std::nullopt;
    // The first measured size at or above `bytes`.
    const auto hi = std::lower_bound(pts.begin(), pts.end(), bytes,
                                     [](const std::pair<double, double>& p, double b) { return p.first < b; });
    if (hi->first == bytes) return hi->second;
    const auto lo = hi - 1;
    const double f = std::log(bytes / lo->first) / std::log(hi->first / lo->first);
    return std::exp(std::log(lo->second) + f * std::log(hi->second / lo->second));
  }
  return std::nullopt;
}

bool spans_nodes(const Cluster& cluster, const CollectiveCall& call) {
  for (GpuId g : call.ranks) {
    if (cluster.node_of(g) != cluster.node_of(call.ranks.front())) return true;
  }
  return false;
}

Time table_or_analytical_time(const Cluster& cluster, const CollectiveCall& call, const CollectiveOptions& options,
                              const std::vector<MeasuredCollective>* tables) {
  if (tables != nullptr && !tables->empty() && !call.ranks.empty()) {
    const auto t = measured_collective_s(*tables, call.op, static_cast<int>(call.ranks.size()),
                                         spans_nodes(cluster, call), call.bytes);
    if (t) return seconds(*t);
  }
  return analytical_collective_time(cluster, call, options);
}

// The attention implementation is left out on purpose: a measured kernel is the one that ran on
// the measured stack, and it prices the op whichever kernel the scenario names.
KernelShapeKey kernel_shape_key(const OpCost& op, Dtype default_dtype) {
  return {static_cast<double>(op.kind),
          static_cast<double>(op.dtype.value_or(default_dtype)),
          op.m,
          op.n,
          op.k,
          op.groups,
          op.split_accumulator ? 1.0 : 0.0,
          op.flops,
          op.bytes,
          op.query_tokens,
          op.attended_pairs,
          op.kv_tokens};
}

TableCostModel::TableCostModel(CostModelPtr fallback, const std::vector<MeasuredKernel>& kernels, Dtype default_dtype)
    : fallback_(std::move(fallback)), dtype_(default_dtype) {
  for (const MeasuredKernel& k : kernels) table_[kernel_shape_key(k.op, default_dtype)] = k.seconds;
}

std::optional<double> TableCostModel::measured(const OpCost& op) const {
  const auto it = table_.find(kernel_shape_key(op, dtype_));
  if (it == table_.end()) return std::nullopt;
  return it->second;
}

double TableCostModel::op_seconds(const OpCost& op) const {
  if (const auto t = measured(op)) return *t;
  return fallback_->op_seconds(op);
}

}  // namespace ctwin
