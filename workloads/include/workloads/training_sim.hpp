// Simulates one training step: builds the step's program (workloads/step_program.hpp), runs it
// on the event engine (workloads/step_run.hpp), and reports step time, throughput, MFU, memory,
// where the time went (workloads/step_breakdown.hpp) and, on request, the trace
// (workloads/training_trace.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "topology/link_load.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/measured_tables.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/step_breakdown.hpp"
#include "workloads/training.hpp"

namespace ctwin {

struct TrainingOptions {
  // Simulate one data-parallel replica and scale up: exact when replicas are identical.
  bool fold = true;
  // With fold, also simulate one rank of each TP and CP group where that is exact (their
  // collectives' peers take the same time; docs/training.md, "Folding").
  bool fold_ranks = true;
  // With fold, simulate a long run of micro-batches as three short ones and extrapolate the
  // steady state's period, where that is exact (micro_batch_fold; docs/training.md, "Folding").
  bool fold_micro_batches = true;
  // The micro-batch counts to fold from instead of micro_batch_fold's (tests: a plan inside the
  // warm-up must be refused by the even-growth check). Used where folding is allowed at all.
  std::optional<std::pair<int, int>> micro_batch_fold_plan;  // (first, stride)
  bool trace = false;                                        // record every op of every simulated GPU
  // Collectives as flows sharing the cluster's links (congestion between TP, DP, PP and EP
  // traffic shows); implies simulating every replica. Else the analytical alpha-beta model.
  bool flow_network = false;
  // At flow fidelity, how many of the most loaded links the result names (busiest_links).
  int busiest_links = 8;
  // Algorithm and protocol choices for every collective of the step (NCCL_ALGO, NCCL_PROTO);
  // by default NCCL's tuner decides per call.
  CollectiveOptions collectives;
  // Prices every kernel of the step; null: the roofline from the GPU's profile
  // (default_cost_model(cluster.spec.gpu, cfg.precision.compute)).
  CostModelPtr cost_model;
  // Measured collective curves (a calibrated profile's /tables/collectives) the analytical
  // fidelity interpolates inside their measured range; null or empty: the model alone.
  std::shared_ptr<const std::vector<MeasuredCollective>> measured_collectives;
  // Called now and then with the fraction of work done (0..1), for a progress line.
  std::function<void(double)> progress;
  // The compute and optimizer kernels of pipeline stage i take stage_slowdown[i] times longer: a
  // slow GPU (thermal or power capping), which gates its TP and CP peers at every collective and
  // so sets its whole stage's pace (the whole job's straggler, app/job_step_model.hpp). Stages
  // past the end, or an empty vector: 1. In every replica that is simulated (folded: the one).
  std::vector<double> stage_slowdown;
};

// One collective (or pipeline send/receive) as one simulated GPU issued it during the step:
// the structured record behind the trace's communication events.
struct StepCollective {
  enum class Phase : std::uint8_t { forward, backward, recompute, step };
  int rank = 0;   // the issuing GPU's global rank
  int stage = 0;  // its pipeline stage
  CommGroup group = CommGroup::tp;
  CollectiveOp op = CollectiveOp::all_reduce;
  double bytes = 0;      // nccl-tests size (send_recv: the message)
  int group_size = 0;    // ranks taking part
  int micro_batch = -1;  // -1 for step-level calls (after the last backward)
  int layer = -1;        // -1 when not a transformer layer's
  Phase phase = Phase::forward;
  std::string name;  // the op: "tp_f", "grad_all_reduce", "send_activations", ...
};

struct TrainingResult {
  double step_time_s = 0;            // the first step's; with noise, see step_time_p50_s / p99
  std::vector<double> step_times_s;  // every simulated step
  double step_time_p50_s = 0;
  double step_time_p99_s = 0;
  bool folded = false;     // one data-parallel replica stood for all
  bool tp_folded = false;  // one rank stood for each TP group
  bool cp_folded = false;  // one rank stood for each CP group
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double model_flops_per_step = 0;     // 6*N*tokens + attention (non-causal, as Megatron and PaLM count)
  double hardware_flops_per_step = 0;  // model FLOPs plus recomputation
  double tflops_per_gpu = 0;           // model TFLOP/s per GPU
  double hw_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double peak_tflops = 0;
  int gpus = 0;
  int simulated_gpus = 0;
  int grad_accum = 0;
  // The micro-batch counts simulated when the steady state was extrapolated (three, a stride
  // apart; micro_batch_fold); empty when all grad_accum were simulated.
  std::vector<int> simulated_micro_batches;
  std::uint64_t events = 0;                   // over every simulated run
  std::uint64_t tasks = 0;                    // over every simulated run
  StepBreakdown breakdown;                    // for GPU 0 (first stage, first TP rank)
  std::vector<double> stage_utilization;      // compute busy fraction of each pipeline stage
  MemoryBreakdown memory;                     // the worst stage's (estimate_memory)
  std::vector<MemoryBreakdown> stage_memory;  // each pipeline stage's (estimate_stage_memory)
  Trace trace;
  // With TrainingOptions::trace: every collective each simulated GPU issued, in issue order.
  std::vector<StepCollective> collectives;
  // At flow fidelity: the links the first step loaded most, busiest first (where a rank order
  // puts the traffic). Empty at the analytical fidelity, which prices collectives without links.
  std::vector<LinkLoad> busiest_links;
};

// Micro-batch folding. After the pipeline's warm-up, each further micro-batch of a deterministic
// step adds one period: the same ops at the same offsets. So a step of m micro-batches is
// simulated at first, first + stride and first + 2 * stride; when the step time, the breakdown
// and every stage's busy time grow by exactly the same amount between the three, the step at m is
// the last one plus (m - last) / stride periods. If not (no steady state yet, a period that
// alternates), the whole step is simulated. stride is 2 (a steady state may alternate between
// two periods), or pp for the interleaved schedule (its micro-batches go in groups of pp; 2 pp
// for odd pp); first is (chunks + 1) x pp, at least 4, congruent to m modulo stride.
struct MicroBatchFold {
  int first = 0;
  int stride = 0;  // 0: not folded
  bool active() const { return stride > 0; }
  int at(int i) const { return first + i * stride; }  // the i-th simulated count, i = 0..2
};
// Whether (and how) simulate_training folds cfg's micro-batches: with opt.fold and
// opt.fold_micro_batches, no trace, no noise, the analytical network, not the zero-bubble
// schedule (its order is built for the whole count), and only where the three short runs hold
// fewer micro-batches than the step.
MicroBatchFold micro_batch_fold(const TrainingConfig& cfg, const TrainingOptions& opt);

// Model FLOPs per step by the Megatron/PaLM convention: 6 N tokens + 12 L s h_q tokens.
double model_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg);

// FLOPs spent again on recomputation per step (full: every layer's forward; selective: the
// attention core), so hardware FLOPs = model FLOPs + this, as Megatron-LM's papers count.
double recompute_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg);

TrainingResult simulate_training(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                 const TrainingOptions& opt = {});

}  // namespace ctwin
