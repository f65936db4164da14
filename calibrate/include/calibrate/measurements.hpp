// What realrun measured (docs/measurements.md): single kernels at the simulator's shapes, NCCL
// (or CPU) collectives per communicator over a size sweep, and whole steps. realrun writes it,
// calibrate fits profiles from it, validate compares the simulator against it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/serving_iteration.hpp"

namespace ctwin::calibrate {

// Order statistics of `repeats` timed runs (after warm-up), seconds.
struct Stats {
  double median_s = 0, min_s = 0, max_s = 0, p10_s = 0, p90_s = 0;
  int repeats = 0;
};
// From raw samples (at least one); p10/p90 by nearest rank on the sorted samples.
Stats stats_of(std::vector<double> samples_s);

struct OpMeasurement {
  OpCost op;                     // kind, dtype (always set), shape, FLOPs, bytes, attention geometry
  std::string origin = "sweep";  // "step": a shape of the scenario's step; "sweep": around it
  std::string name;              // "qkv", "fc1" (origin step)
  std::string phase;             // "forward", "backward", ... (origin step)
  int rank = 0;
  Stats stats;
};

struct CollectiveMeasurement {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::string group;       // "tp", "dp", "pp", "cp", "ep", "world"
  std::vector<int> ranks;  // global ranks, in ring order
  std::string algorithm;   // what ran: "ring", "tree", NCCL's choice
  std::string protocol;    // "simple", "ll", "ll128", "" where not applicable
  double bytes = 0;        // nccl-tests size
  Stats stats;             // the slowest rank's time per call
  // nccl-tests' figures from stats.median_s: algbw = bytes / t, busbw = algbw * bus_factor.
  double algbw_gbyte_per_s = 0, busbw_gbyte_per_s = 0;
};

// A kernel timed while `calls` back-to-back collectives run beside it on another stream of the
// same ranks (enough of them to outlast it), and the same kernel alone: what the simulator's
// overlap_slowdown prices (a kernel that starts while a collective is in flight takes
// 1 + overlap_slowdown times as long). Both statistics are the slowest rank's per repeat.
struct OverlapMeasurement {
  OpCost op;
  CollectiveOp collective = CollectiveOp::all_reduce;
  std::string group;  // the communicator's label
  double bytes = 0;   // each call's nccl-tests size
  int calls = 1;
  Stats alone, overlapped;
};

struct StepMeasurement {
  std::string kind;  // "training_step"; a serving iteration's "prefill", "decode" or "mixed"
  // {"tp":1,"pp":1,"dp":2,"cp":1,"ep":1}; a serving iteration's replica {"tp":2,"pp":1}
  nlohmann::json layout = nlohmann::json::object();
  // A serving iteration's composition ("prefill" and "decode" in the file); none in a training
  // step, or in a file from before serving iterations were replayed (validate skips it).
  std::optional<IterationShape> shape;
  Stats stats;
  std::vector<double> per_rank_median_s;
};

struct HostInfo {
  std::string hostname, cpu;
  int cores = 0, ranks = 0, nodes = 1;
  int processes = 1;  // OS processes the ranks ran in (an MPI job: one per rank); 1: threads
  nlohmann::json gpus = nlohmann::json::array();       // [{"name","uuid","driver"}]
  nlohmann::json versions = nlohmann::json::object();  // {"cuda","nccl","cublas","eigen","mpi"}
};

struct Measurements {
  std::string backend = "cpu";  // "cpu" | "cuda"
  std::string created_by;
  std::string scenario_file;
  nlohmann::json scenario = nlohmann::json::object();  // the scenario as run (--set applied)
  HostInfo host;
  nlohmann::json cluster = nlohmann::json::object();  // discovered topology, /cluster/file form
  int warmup = 0, repeats = 0;
  std::vector<OpMeasurement> ops;
  std::vector<CollectiveMeasurement> collectives;
  std::vector<StepMeasurement> steps;
  std::vector<OverlapMeasurement> overlaps;
};

inline constexpr const char* kMeasurementsSchema = "ctwin-measurements/1";

// Reads a measurements file; every error is an InputError naming `file` and the JSON pointer.
Measurements parse_measurements(const std::string& text, const std::string& file);
Measurements load_measurements(const std::string& path);
// Writes the JSON (deterministic key order); write_measurements writes atomically (a temporary
// file beside `path`, then rename).
std::string measurements_to_json(const Measurements& m);
// `replace` and `flag` as write_file_atomically (sim/output_file.hpp): an existing file is
// replaced only when asked.
void write_measurements(const Measurements& m, const std::string& path, bool replace, const std::string& flag);

}  // namespace ctwin::calibrate
