// The ops of two traces grouped by what they are, for `ctwin compare`: which op's total time
// changed most, and when it first ran in each trace, so a user can jump there in
// `ctwin view A.ctt --compare B.ctt --range ...`.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.hpp"

namespace ctwin {

// One group's events in one trace.
struct OpGroupTimes {
  double total_s = 0;             // summed durations over every lane of the trace
  std::size_t count = 0;          // events
  std::optional<double> first_s;  // start of the earliest event; none when the trace has none
  std::string first_lane;         // where that event is: "gpu 0 compute"
};

// An op group present in either trace, e.g. every micro-batch's and layer's "bwd tp_f".
struct OpDiff {
  std::string name;  // the event name without its "mbN " and "LN " prefixes (by kind: "PROCESS KIND")
  std::string kind;  // the event kind: "all_reduce", "gemm", ...
  OpGroupTimes a, b;
  double delta_s() const { return b.total_s - a.total_s; }
};

// "mb3 L12 bwd tp_f" -> "bwd tp_f": training traces name an op by micro-batch and layer, and
// one instance per micro-batch and layer would drown the difference that matters (the op).
std::string op_group_name(std::string_view event_name);

// How events are grouped: by name (less its prefixes) and kind, for a training step's ops; by
// the lane's process and the kind for a serving run ("replica decode", "requests queued"), whose
// iteration and request names carry counts and ids ("prefill 0 tok + decode 16 seq", "req 155")
// that would make one group per iteration, and whose request lanes reuse the GPU's kinds.
enum class OpGrouping { by_name, by_kind };

// Every op group of either trace, the largest |delta_s| first (ties by name, then kind, so the
// order never depends on hashing); at most `top` of them, and only those whose total changed.
std::vector<OpDiff> op_differences(const Trace& a, const Trace& b, std::size_t top,
                                   OpGrouping grouping = OpGrouping::by_name);

}  // namespace ctwin
