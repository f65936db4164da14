// `ctwin bench sweep` (app/bench_sweep.cpp): in app/, beside the sweep it measures.
#pragma once

#include <nlohmann/json.hpp>

#include "bench.hpp"

namespace ctwin {

nlohmann::ordered_json bench_sweep(const BenchOptions& o);

}  // namespace ctwin
