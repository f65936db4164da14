// Fits the simulator's coefficients to measurements (docs/calibration.md): the roofline's
// efficiencies and launch cost from single kernels, link efficiencies and hop latencies from
// collectives, an alpha-beta fit per (op, ranks, scope), and the measured tables a profile carries.
// Every fit evaluates the simulator's own formula (op_seconds, analytical_collective_time) and
// minimises the squared log ratio of predicted to measured time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "calibrate/measurements.hpp"
#include "topology/cluster.hpp"
#include "workloads/profile.hpp"

namespace ctwin::calibrate {

// One measurement as a fit saw it.
struct FitPoint {
  std::string label;  // "gemm 4096x4096x4096 fp32", "all_reduce 2 ranks intra 1048576 B"
  double measured_s = 0;
  double predicted_s = 0;
  bool flagged = false;  // the model cannot explain it (flag_outliers)
  double rel_error() const { return (predicted_s - measured_s) / measured_s; }
};

struct FitResult {
  std::string name;                                    // "memory-bound", "gemm", "all_reduce 2 ranks intra", ...
  std::string formula;                                 // what was fitted, in one line
  std::vector<std::pair<std::string, double>> values;  // profile pointer (or a name) -> fitted value
  std::vector<FitPoint> points;
  std::string note;  // why a fit was skipped, or clamped
  bool fitted() const { return !values.empty(); }
  double rms_rel_error() const;
  double max_abs_rel_error() const;
  int flagged() const;
};

// Marks points the model cannot explain: |relative error| above 25%, or above 3x the fit's
// median |relative error| and above 5% (so a near-exact fit flags nothing for noise).
void flag_outliers(FitResult& f);

// Levenberg-Marquardt on residuals r(x) with a central-difference Jacobian; x stays inside
// [lo, hi]. Returns the x of least sum of squares found.
using Vec = std::vector<double>;
Vec levenberg_marquardt(const std::function<Vec(const Vec&)>& residuals, Vec x0, const Vec& lo, const Vec& hi,
                        int max_iterations = 200);

// The compute fits, each over the ops it concerns, in this order (later fits use the earlier
// fits' values): memory-bound ops -> kernel_launch_us, hbm_efficiency; GEMMs (not FP8) ->
// gemm_efficiency, gemm_knee; grouped GEMMs -> grouped_gemm_efficiency; attention ->
// attention_ratio; FP8 GEMMs -> fp8_gemm_efficiency, then fp8_split_accumulator_efficiency.
// `p` starts as the GPU's profile and receives every fitted value with its source; ops price at
// `gpu`'s peaks with `dtype` the compute dtype of ops without their own.
std::vector<FitResult> fit_compute(const std::vector<OpMeasurement>& ops, const GpuSpec& gpu, Dtype dtype, Profile& p,
                                   const std::string& source);

// overlap_slowdown from kernels timed alone and beside collectives: overlapped = alone x
// (1 + overlap_slowdown), least squares on the log ratio (the other fits' criterion). Writes
// /compute/overlap_slowdown into `p`; no measurements, no fit.
FitResult fit_overlap(const std::vector<OverlapMeasurement>& overlaps, Profile& p, const std::string& source);

// Per (op, ranks, scope): an alpha-beta fit (t = alpha + bytes / algbw) over the measured sizes.
// `gpus_per_node` decides the scope of a group (its ranks in one node or more).
std::vector<FitResult> fit_alpha_beta_groups(const std::vector<CollectiveMeasurement>& cs, int gpus_per_node);

// With the measured cluster: the link efficiency and hop latency keys of each scope measured
// (inside a node: nvlink_* on NVSwitch, else pcie_*; across nodes: nic_efficiency,
// net_latency_us) fitted through analytical_collective_time on `cluster` with `p` applied.
std::vector<FitResult> fit_links(const std::vector<CollectiveMeasurement>& cs, const ClusterSpec& cluster, Profile& p,
                                 const std::string& source);

// The measured tables: every (op, ranks, scope) curve (median over repeated sizes) and every
// kernel shape (median over ranks and repeats).
MeasuredTables measured_tables(const Measurements& m, int gpus_per_node);

}  // namespace ctwin::calibrate
