// Measured tables a calibration profile may carry (docs/profiles.md, "Measured tables"): kernel
// times by exact OpCost shape, and collective times per (op, ranks, scope) over a size sweep.
// The models consult them first: a kernel of a measured shape takes its measured median, and a
// collective inside a measured size range takes the log-log interpolation of its neighbours;
// everything else falls back to the fitted models.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "sim/time.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"

namespace ctwin {

// One collective's measured curve: `points` are (bytes, seconds) with bytes strictly increasing.
struct MeasuredCollective {
  CollectiveOp op = CollectiveOp::all_reduce;
  int ranks = 2;
  bool inter_node = false;  // the group spans nodes ("inter"), else one node ("intra")
  std::vector<std::pair<double, double>> points;
};

// One kernel's measured median at an exact shape (op.dtype always set).
struct MeasuredKernel {
  OpCost op;
  double seconds = 0;
};

struct MeasuredTables {
  std::vector<MeasuredCollective> collectives;
  std::vector<MeasuredKernel> kernels;
  bool empty() const { return collectives.empty() && kernels.empty(); }
};

// Linear interpolation of ln(seconds) in ln(bytes) between the two measured sizes around
// `bytes`; the measured time at a measured size; nullopt outside [first, last] bytes or with no
// curve for (op, ranks, scope).
std::optional<double> measured_collective_s(const std::vector<MeasuredCollective>& tables, CollectiveOp op, int ranks,
                                            bool inter_node, double bytes);

// Whether a call's ranks sit in more than one node of the cluster.
bool spans_nodes(const Cluster& cluster, const CollectiveCall& call);

// The training simulation's analytical time for a call: the measured table's where it covers
// the call (tables may be null), else analytical_collective_time.
Time table_or_analytical_time(const Cluster& cluster, const CollectiveCall& call, const CollectiveOptions& options,
                              const std::vector<MeasuredCollective>* tables);

// The shape key TableCostModel matches on: every OpCost field, the dtype resolved.
using KernelShapeKey = std::array<double, 12>;
KernelShapeKey kernel_shape_key(const OpCost& op, Dtype default_dtype);

// A CostModel that answers from measured kernels at their exact shapes and asks `fallback`
// (the fitted roofline) for every other shape.
class TableCostModel final : public CostModel {
 public:
  TableCostModel(CostModelPtr fallback, const std::vector<MeasuredKernel>& kernels, Dtype default_dtype);
  double op_seconds(const OpCost& op) const override;
  // The measured time at op's exact shape, if any.
  std::optional<double> measured(const OpCost& op) const;

 private:
  CostModelPtr fallback_;
  std::map<KernelShapeKey, double> table_;
  Dtype dtype_;
};

}  // namespace ctwin
