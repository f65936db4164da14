// One training step as a program: for every simulated GPU, the ops it runs (kernels with
// their modelled durations, collective and pipeline-transfer members with their calls), on
// which stream, after which other ops. Built from the model, the layout and the cluster
// (build_training_step); run by lowering onto the event engine (workloads/step_run.hpp), and
// readable as plain data by tests, sweeps and anything else that wants the step's structure.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/id.hpp"
#include "sim/time.hpp"
#include "sim/trace.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

struct TrainingOptions;

struct StepOpTag;
struct StepCallTag;
using StepOpId = Id<StepOpTag>;      // index into StepProgram::ops
using StepCallId = Id<StepCallTag>;  // index into StepProgram::calls

// What an op is, for the breakdown and the trace.
// offload: host<->device copies over PCIe (ZeRO-Offload / ZeRO-Infinity, workloads/offload.hpp).
enum class OpClass : std::uint8_t { compute, optimizer, comm_tp, comm_cp, comm_ep, comm_dp, comm_pp, offload };

// Where an op runs on its GPU. Pipeline transfers hold no stream (a stage posts its sends and
// receives as they come); the others run in order on their stream. Offloading adds a GPU's two
// PCIe directions (copy engines) and its share of the host's CPU (CPU Adam).
enum class StepStream : std::uint8_t {
  compute = 0,
  dp_comm = 1,
  pp_transfer = 2,
  tp_comm = 3,
  cp_comm = 4,
  pcie_h2d = 5,
  pcie_d2h = 6,
  host = 7
};
inline constexpr int kStepStreams = 8;

// The phase an op belongs to (StepCollective::Phase has the same order).
enum class StepPhase : std::uint8_t { forward = 0, backward = 1, recompute = 2, step = 3 };

// A simulated GPU: its coordinates in the layout and its global rank.
struct StepGpu {
  int tp = 0, cp = 0, dp = 0, pp = 0;  // pp: the pipeline stage
  int rank = 0;
};

// StepOp::cost of an op that is no kernel (a collective member, a join, host time).
inline constexpr std::uint32_t kNoStepCost = 0xffffffffu;

// One op. Kept small: an unfolded 16,384-GPU step has tens of millions of them (the 8-byte
// duration first, so the small fields pack without padding). Display names are composed from
// these fields only when a trace is written.
struct StepOp {
  Time duration{};          // kernels; a member's time comes from its call
  std::uint32_t gpu = 0;    // index into StepProgram::gpus
  std::uint32_t name = 0;   // interned in StepProgram::names ("qkv", "grad_all_reduce")
  std::uint16_t kind = 0;   // interned kind ("gemm", "all_reduce")
  std::int16_t layer = -1;  // -1: not a layer op
  std::uint16_t mb = 0;     // micro-batch
  OpClass cls = OpClass::compute;
  StepStream stream = StepStream::compute;
  std::int8_t activation_delta = 0;  // +1 after a forward micro-batch, -1 after a backward one
  StepPhase phase = StepPhase::forward;
  std::uint8_t group = 0;  // a collective's CommGroup
  float flops = 0;
  float bytes = 0;
  StepCallId call;                             // valid for a member of a collective or pipeline transfer
  std::uint32_t cost = kNoStepCost;            // a kernel's shape: index into StepProgram::costs
  std::uint32_t deps_begin = 0, deps_end = 0;  // its dependencies: StepProgram::deps[begin, end)
};

// A collective call (or pipeline send/receive): every member op names it.
struct StepCall {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::uint32_t group = 0;  // index into StepProgram::groups
  double bytes = 0;         // nccl-tests size (send_recv: the message)
  bool operator==(const StepCall&) const = default;
};

// Calls equal in (op, group, bytes) take the same analytical time: folding's exactness check and
// the memo of analytical times key on it.
struct StepCallHash {
  std::size_t operator()(const StepCall& c) const;
};

// A dependency added after `after` was created (an op that must also wait for an overlapped
// collective). `position` is the number of ops that existed then; lowering replays it there.
struct StepLateDep {
  std::uint32_t position = 0;
  StepOpId before, after;
};

struct StepProgram {
  std::vector<StepGpu> gpus;  // in rank order
  std::vector<StepOp> ops;    // in issue order; each GPU's ops on one stream run in this order
  std::vector<StepOpId> deps;
  std::vector<StepLateDep> late_deps;
  std::vector<StepCall> calls;
  std::vector<OpCost> costs;               // each distinct kernel shape once (StepOp::cost), for realrun to execute
  std::vector<std::vector<GpuId>> groups;  // interned rank lists, in group order
  Trace names;                             // string table of op names and kinds
  bool folded = false;                     // one data-parallel replica stands for all
  bool tp_folded = false;                  // one rank stands for each TP group
  bool cp_folded = false;                  // one rank stands for each CP group
  bool offload = false;                    // has PCIe and host ops (the three offload streams)
};

// The most micro-batches per data-parallel replica a step program holds (StepOp::mb is 16 bits).
inline constexpr int kMaxMicroBatches = 65535;

// Builds the step's program. Throws InputError for more than kMaxMicroBatches micro-batches. With opt.fold, one
// data-parallel replica (DP and EP collectives have one simulated member) and, where that is exact, one rank of
// each TP and CP group (their collectives have one simulated member; docs/training.md, "Folding"); otherwise
// every GPU of the layout.
StepProgram build_training_step(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                const TrainingOptions& opt);

}  // namespace ctwin
