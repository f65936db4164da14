// Benchmarks behind `ctwin bench NAME`. Each runs its subject and a baseline in the same
// process and reports figures as an ordered JSON object (printed as a table, or with --json).
#pragma once

#include <nlohmann/json.hpp>

namespace ctwin {

// CPU seconds (user and system, every thread) this process has used: on a machine shared with
// other work the wall time says more about the others than about the run.
double bench_cpu_s();

struct BenchOptions {
  bool quick = false;     // smaller sizes, for tests of the benchmark itself
  bool progress = false;  // print progress on stderr (a terminal)
};

nlohmann::ordered_json bench_engine(const BenchOptions& o);    // bench/bench_engine.cpp
nlohmann::ordered_json bench_network(const BenchOptions& o);   // bench/bench_network.cpp
nlohmann::ordered_json bench_viewer(const BenchOptions& o);    // bench/bench_viewer.cpp
nlohmann::ordered_json bench_training(const BenchOptions& o);  // bench/bench_training.cpp
nlohmann::ordered_json bench_serving(const BenchOptions& o);   // bench/bench_serving.cpp
// The 1,024-GPU fleet case of bench_serving (bench/bench_serving_fleet.cpp), reported as its "fleet".
nlohmann::ordered_json bench_serving_fleet(const BenchOptions& o);
nlohmann::ordered_json bench_job(const BenchOptions& o);  // bench/bench_job.cpp

}  // namespace ctwin
