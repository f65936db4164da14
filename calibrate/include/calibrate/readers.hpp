// Readers of measurements people already have (docs/calibration.md, "Readers"): nccl-tests'
// text output and PyTorch profiler (Kineto) Chrome traces, each turned into a Measurements so
// that calibrate fits them like realrun's own files.
#pragma once

#include <string>

#include "calibrate/measurements.hpp"

namespace ctwin::calibrate {

// nccl-tests output (all_reduce_perf, all_gather_perf, ...): one CollectiveMeasurement per size
// and placement (out-of-place and in-place), its time the reported one (us -> s). The ranks
// come from the "#  Rank N ... on HOST device" lines (their hosts give the node count), else
// from nGpus; the collective from the binary's name anywhere in the text (a command line, or
// "Collective test starting: all_reduce_perf"), else from `file`'s name. InputError naming the
// file and line when no table row or no collective is found.
Measurements parse_nccl_tests(const std::string& text, const std::string& file);

// A Kineto Chrome trace ({"traceEvents": [...]}): GPU kernels ("cat": "kernel") by name,
// mapped to op kinds (docs/calibration.md): names with "gemm", "cutlass" or "sm90_xmma" are
// GEMMs (their shape from the CPU op aten::mm / addmm / bmm / linear sharing the "External id"),
// "flash" or "fmha" attention, "nccl" collectives (size from the "In msg nelems" / "Out msg
// nelems" and "dtype" args, group size from "Group size"), the rest elementwise. Kernels of one
// name and shape are one OpMeasurement whose stats are over their durations.
Measurements parse_kineto_trace(const std::string& text, const std::string& file);

// Whichever of the three a file holds, by content: a JSON object with "schema" (realrun's
// measurements), a JSON object with "traceEvents" (Kineto), else nccl-tests text.
Measurements load_any_measurements(const std::string& path);

}  // namespace ctwin::calibrate
