// The job realrun runs, read from a training or serving scenario: one path for `ctwin realrun` (the CPU
// backend, in process) and ctwin-realrun (the CUDA backend), so both measure the same step,
// the same sweeps and the same collectives, and refuse the same bad input before any device is
// touched.
#pragma once

#include <string>
#include <vector>

#include "realrun/driver.hpp"

namespace ctwin {

struct RealrunRequest {
  std::string scenario_path;
  std::vector<std::string> sets;  // --set /POINTER=VALUE, in order
  std::string backend = "cpu";
  std::string created_by = "ctwin 0.1.0";
  int ranks = 0;         // --ranks; 0: the layout's GPU count
  int repeats = -1;      // --repeats; -1: /realrun/repeats
  int warmup = -1;       // --warmup; -1: /realrun/warmup
  double timeout_s = 0;  // --timeout-s; 0: /realrun/timeout_s
};

struct RealrunSetup {
  realrun::RealrunJob job;
  realrun::RealrunPlan plan;
};

// Loads and checks the scenario (InputError, exit 2, on bad input), and plans what realrun will
// run: a training step, or a serving replica's iterations. --ranks must equal the layout's (or
// the replica's) GPU count.
RealrunSetup prepare_realrun(const RealrunRequest& req);

}  // namespace ctwin
