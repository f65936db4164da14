// A scenario's /realrun block: how realrun measures (repeats, warm-up, the collective size sweep,
// the GEMM sweep, the timeout), declared once for the loader and `ctwin params`.
#pragma once

#include <vector>

#include "sim/params.hpp"
#include "workloads/serving_iteration.hpp"

namespace ctwin::realrun {

// A scenario's /realrun block.
struct RealrunConfig {
  int ranks = 0;  // 0: the layout's GPU count
  int warmup = 2;
  int repeats = 5;
  double collective_min_bytes = 1024;
  double collective_max_bytes = 64.0 * 1024 * 1024;
  double collective_size_factor = 4;
  bool sweep = true;
  double sweep_max_scale = 4;
  double timeout_s = 60;
  // Serving: the iterations to replay (empty: default_serving_iterations).
  std::vector<IterationShape> iterations;
};

inline constexpr ParamDecl realrun_params[] = {
    {.key = "ranks",
     .type = ParamType::integer,
     .min = 1,
     .max = 4096,
     .unit = "ranks",
     .doc = "devices to run on; must equal the layout's GPUs (tp x pp x dp x cp)",
     .computed = "the layout's GPU count"},
    {.key = "warmup",
     .type = ParamType::integer,
     .def = 2,
     .min = 0,
     .max = 1000,
     .doc = "untimed runs of each measurement before the timed ones"},
    {.key = "repeats",
     .type = ParamType::integer,
     .def = 5,
     .min = 1,
     .max = 100000,
     .doc = "timed runs of each measurement; the file keeps their median, spread and percentiles"},
    {.key = "collective_min_bytes",
     .type = ParamType::number,
     .def = 1024,
     .min = 4,
     .max = 1e12,
     .unit = "bytes",
     .doc = "smallest size of the collective sweep (nccl-tests' -b)"},
    {.key = "collective_max_bytes",
     .type = ParamType::number,
     .def = 67108864,
     .min = 4,
     .max = 1e12,
     .unit = "bytes",
     .doc = "largest size of the collective sweep (nccl-tests' -e)"},
    {.key = "collective_size_factor",
     .type = ParamType::number,
     .def = 4,
     .min = 1.0001,
     .max = 1024,
     .doc = "each size of the sweep is this times the one before (nccl-tests' -f)"},
    {.key = "sweep",
     .type = ParamType::boolean,
     .def = 1,
     .doc = "also time GEMMs around the step's shapes (each of m, n, k scaled), so a profile covers other shapes"},
    {.key = "sweep_max_scale",
     .type = ParamType::number,
     .def = 4,
     .min = 2,
     .max = 64,
     .doc = "the GEMM sweep scales one dimension at a time by powers of 2 from 1/this to this"},
    {.key = "timeout_s",
     .type = ParamType::number,
     .def = 60,
     .min = 0,
     .max = 86400,
     .unit = "s",
     .doc = "a rank that does not join a collective within this fails the run with its name",
     .min_exclusive = true},
    {.key = "iterations",
     .type = ParamType::any,
     .doc = "serving: the iterations to replay, an array of {\"prefill\": {\"seqs\", \"tokens\", \"context\"}, "
            "\"decode\": {\"batch\", \"context\"}} (either or both); each within the scheduler's limits and "
            "the KV cache",
     .computed = "prefill chunks, decode batches and mixed iterations from /serving's limits (docs/realrun.md)"},
};

// Reads /realrun (`o`) through realrun_params; InputError naming the file and pointer.
RealrunConfig read_realrun_config(const JsonObject& o);

}  // namespace ctwin::realrun
