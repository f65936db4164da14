// `ctwin sweep`: a scenario's variants (docs/sweep.md) simulated and ranked. A /sweep block names
// axes over any scenario key (JSON pointers, value lists or ranges, as a grid or zipped) and the
// objective; "parallelism": "auto" adds every valid training layout of each variant
// (workloads/layout_search.hpp). Layouts that cannot fit in GPU memory are refused before they
// are simulated, each with its reason; with a training objective, a layout whose step-time lower
// bound cannot beat the top K of its variant is skipped (never the true best: a layout outside
// its own variant's top K is outside the sweep's). Results are the same, byte for byte, for any
// number of threads or MPI ranks: candidates go in fixed waves in bound order.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "sim/params.hpp"
#include "workloads/layout_search.hpp"

namespace ctwin {

using OrderedJson = nlohmann::ordered_json;

// One axis: a scenario key and the values it takes.
struct SweepAxis {
  std::string pointer;  // "/training/micro_batch"
  std::string name;     // column name: /sweep/axes/N/name, else the pointer's last token
  std::vector<Json> values;
};

enum class SweepCombine { grid, zip };
inline constexpr auto sweep_combine_names =
    make_names<SweepCombine>({{SweepCombine::grid, "grid"}, {SweepCombine::zip, "zip"}});

// What a sweep ranks by, and which way.
struct SweepObjective {
  std::string_view name;
  bool minimize = true;
  bool training = true;  // read from a training report (else a serving one)
  std::string_view doc;
  bool job = false;  // the whole job's (docs/jobs.md): each configuration also runs its /job
};
inline constexpr SweepObjective sweep_objectives[] = {
    {"step_time_s", true, true, "training step time"},
    {"mfu", false, true, "model FLOPs utilization"},
    {"tokens_per_s_per_gpu", false, true, "training tokens per second per GPU"},
    {"tflops_per_gpu", false, true, "model TFLOP/s per GPU"},
    {"cost_per_million_tokens", true, true, "USD per million training tokens (/sweep/gpu_hour_usd)"},
    {"time_to_train_days", true, true, "whole job: mean time to train, failures and checkpoints included (/job)", true},
    {"effective_training_time_ratio", false, true, "whole job: productive step time over wall time (/job)", true},
    {"goodput_per_gpu", false, false, "serving: requests per second meeting every SLO, per GPU"},
    {"output_tokens_per_s_per_gpu", false, false, "serving: output tokens per second per GPU"},
    {"ttft_p99_s", true, false, "serving: 99th percentile time to first token"},
    {"tpot_p99_s", true, false, "serving: 99th percentile time per output token"},
    {"serving_cost_per_million_tokens", true, false, "serving: USD per million output tokens (/sweep/gpu_hour_usd)"},
};
// The objectives' names, for the /sweep/objective choice key.
inline constexpr auto sweep_objective_choices = [] {
  std::array<std::string_view, std::size(sweep_objectives)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = sweep_objectives[i].name;
  return names;
}();
const SweepObjective& sweep_objective(std::string_view name);

// /sweep/serving_auto: replica shapes for a fixed GPU budget, each with the replica count that
// fills it (vLLM's tensor/pipeline/data-parallel sizes), times the scheduler values listed.
struct ServingSpace {
  bool present = false;
  int gpus = 0;  // 0: the cluster's
  std::vector<int> tp, pp;
  std::vector<int> max_num_seqs;
  std::vector<long long> max_num_batched_tokens;
  std::vector<bool> expert_parallel;  // empty: false and true for an MoE model, else false
  // Also every disaggregated split of the budget: x prefill replicas of one TP and y decode
  // replicas of another (xPyD), x * tp_p + y * tp_d = the budget.
  bool disaggregated = false;
};

struct SweepSpec {
  std::vector<SweepAxis> axes;
  SweepCombine combine = SweepCombine::grid;
  std::string objective;  // empty: step_time_s for training, goodput_per_gpu for serving
  int top = 10;
  double gpu_hour_usd = 0;
  LayoutSpace space;        // /sweep/auto
  ServingSpace serving;     // /sweep/serving_auto
  bool exhaustive = false;  // simulate every layout that fits: no bound pruning
};

inline constexpr ParamDecl sweep_params[] = {
    {.key = "axes",
     .type = ParamType::any,
     .doc = "a list of {\"key\": JSON pointer, \"values\": [...]} or {\"key\", \"from\", \"to\", \"step\" or "
            "\"times\"} (/sweep/axes/N)",
     .computed = "none: only the layouts of \"parallelism\": \"auto\""},
    {.key = "combine",
     .type = ParamType::choice,
     .def_name = "grid",
     .doc = "every combination of the axes' values, or the i-th value of each axis together (equal lengths)",
     .choices = sweep_combine_names.names},
    {.key = "objective",
     .type = ParamType::choice,
     .doc = "what the ranking optimizes (docs/sweep.md lists each)",
     .computed = "time_to_train_days for a training scenario with /job, step_time_s for training, goodput_per_gpu "
                 "for serving",
     .choices = sweep_objective_choices},
    {.key = "top", .type = ParamType::integer, .def = 10, .min = 1, .max = 1000, .doc = "rows of the ranked table"},
    {.key = "gpu_hour_usd",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .unit = "USD",
     .doc = "price of one GPU-hour, for the cost objectives",
     .computed = "required by a cost objective"},
    {.key = "auto",
     .type = ParamType::object,
     .doc = "the values each layout dimension may take for \"parallelism\": \"auto\" (/sweep/auto)",
     .computed = "every valid value"},
    {.key = "serving_auto",
     .type = ParamType::object,
     .doc = "serving: every replica shape for a GPU budget, with the replica count that fills it "
            "(/sweep/serving_auto)"},
    {.key = "exhaustive",
     .type = ParamType::boolean,
     .def = 0,
     .doc = "simulate every layout that fits in memory, even those whose lower bound cannot reach the top"},
};

inline constexpr ParamDecl sweep_axis_params[] = {
    {.key = "key", .type = ParamType::string, .doc = "a JSON pointer into the scenario", .required = true},
    {.key = "name", .type = ParamType::string, .doc = "the column name", .computed = "the pointer's last token"},
    {.key = "values", .type = ParamType::any, .doc = "the values, any JSON", .computed = "from .. to"},
    {.key = "from", .type = ParamType::number, .doc = "a range's first value"},
    {.key = "to", .type = ParamType::number, .doc = "a range's last value (included when reached)"},
    {.key = "step", .type = ParamType::number, .min = 0, .doc = "added each time", .min_exclusive = true},
    {.key = "times", .type = ParamType::number, .min = 1, .doc = "multiplied each time", .min_exclusive = true},
};

inline constexpr ParamDecl sweep_auto_params[] = {
    {.key = "tp", .type = ParamType::any, .doc = "tensor-parallel sizes", .computed = "powers of 2 up to a node"},
    {.key = "pp",
     .type = ParamType::any,
     .doc = "pipeline stages",
     .computed = "divisors of the GPUs up to the layers"},
    {.key = "cp", .type = ParamType::any, .doc = "context-parallel sizes", .computed = "1, 2, 4, 8, 16"},
    {.key = "ep", .type = ParamType::any, .doc = "expert-parallel sizes", .computed = "divisors of the experts"},
    {.key = "virtual_stages",
     .type = ParamType::any,
     .doc = "model chunks per stage (1: 1F1B, more: interleaved)",
     .computed = "1 to 8"},
    {.key = "zero_stage", .type = ParamType::any, .doc = "ZeRO stages (2 and 3 only with pp 1)", .computed = "0 to 3"},
    {.key = "micro_batch", .type = ParamType::any, .doc = "micro-batch sizes", .computed = "1, 2, 4, 8"},
    {.key = "recompute", .type = ParamType::any, .doc = "recomputation modes", .computed = "none, selective, full"},
};

inline constexpr ParamDecl sweep_serving_auto_params[] = {
    {.key = "gpus",
     .type = ParamType::integer,
     .min = 1,
     .doc = "the GPU budget: replicas x tensor x pipeline size",
     .computed = "the cluster's GPUs"},
    {.key = "tensor_parallel_size",
     .type = ParamType::any,
     .doc = "tensor-parallel sizes per replica",
     .computed = "powers of 2 up to a node"},
    {.key = "pipeline_parallel_size", .type = ParamType::any, .doc = "pipeline stages per replica", .computed = "1"},
    {.key = "max_num_seqs", .type = ParamType::any, .doc = "vLLM's max_num_seqs values", .computed = "the scenario's"},
    {.key = "max_num_batched_tokens",
     .type = ParamType::any,
     .doc = "vLLM's max_num_batched_tokens values",
     .computed = "the scenario's"},
    {.key = "enable_expert_parallel",
     .type = ParamType::any,
     .doc = "MoE: experts split over the TP ranks (true) or sharded (false), as vLLM's flag",
     .computed = "both for an MoE model, else false"},
    {.key = "disaggregated",
     .type = ParamType::boolean,
     .def = 0,
     .doc = "also every xPyD split of the budget: x prefill replicas of one tensor-parallel size and y decode "
            "replicas of another (/serving/disaggregation)"},
};

// /sweep of the scenario's JSON (after --set), read and checked. Throws InputError.
SweepSpec read_sweep_spec(const Json& root, const std::string& file);

// invalid: a combination of the axes the scenario cannot take (the reason says which key).
enum class SweepStatus { simulated, out_of_memory, bound_pruned, invalid };
inline constexpr auto sweep_status_names = make_names<SweepStatus>({{SweepStatus::simulated, "simulated"},
                                                                    {SweepStatus::out_of_memory, "out_of_memory"},
                                                                    {SweepStatus::bound_pruned, "pruned"},
                                                                    {SweepStatus::invalid, "invalid"}});

// One configuration of the sweep and what became of it.
struct SweepRow {
  std::size_t index = 0;  // enumeration order
  std::string label;      // "micro_batch=2, TP8 PP4 DP32 ZeRO1 mb2 rc:selective"
  OrderedJson sets;       // JSON pointer -> value, applied to the base scenario
  SweepStatus status = SweepStatus::simulated;
  std::string reason;    // out of memory or pruned: why
  double objective = 0;  // simulated: the objective's value
  double bound_s = -1;   // the step-time lower bound, where one was computed
  OrderedJson report;    // simulated: the run's report (training_report_json, serving_report_json)
};

struct SweepResult {
  std::string scenario;  // the base scenario's name
  SweepObjective objective;
  int top = 10;
  int variants = 1;                    // axes combinations
  std::vector<SweepRow> rows;          // every configuration, in enumeration order
  std::vector<std::size_t> ranking;    // simulated rows, best first (ties: enumeration order)
  std::optional<std::size_t> written;  // the row of the scenario's own layout (--auto on a written layout)
  bool exhaustive = false;
  int bound_violations = 0;  // simulated step times below their bound: a model bug, reported
};

struct SweepRunOptions {
  int threads = 1;
  bool exhaustive = false;  // --exhaustive: as /sweep/exhaustive true
  std::optional<int> top;   // --top: over /sweep/top
  // Called with (done, total) as configurations finish, for a progress line.
  std::function<void(std::size_t, std::size_t)> progress;
  // Runs each wave's simulations where they should run (MPI ranks); null: threads here.
  // It gets the rows to simulate and a function simulating one; it must fill every row.
  std::function<void(std::vector<SweepRow*>&, const std::function<void(SweepRow&)>&)> distribute;
};

// The sweep of a scenario file (with --set overrides applied, and --auto: the written layout
// replaced by "parallelism": "auto" and kept as the reference row). Throws InputError.
SweepResult run_sweep(const std::string& path, const std::vector<Override>& overrides, bool force_auto,
                      const SweepRunOptions& opt);

// Runs `simulate` on every row, on `threads` threads, each row once.
void simulate_rows_on_threads(std::vector<SweepRow*>& rows, const std::function<void(SweepRow&)>& simulate, int threads,
                              const std::function<void()>& on_done = {});

// The base scenario's JSON with a row's values set and /sweep removed: a scenario ready to run.
Json sweep_row_scenario(const std::string& path, const std::vector<Override>& overrides, const SweepRow& row);

}  // namespace ctwin
