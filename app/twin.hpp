// The digital twin's commands' shared pieces (issue 16): the scenario a measurements file was
// taken on, and `ctwin validate MEASUREMENTS --profile P` (app/validate_measurements.cpp).
#pragma once

#include <string>

#include "calibrate/measurements.hpp"
#include "scenario.hpp"

namespace ctwin {

struct ParsedArgs;

// The scenario a measurements file was taken on (its /scenario), assembled as a scenario file
// at `file` would be; with `profile_path`, that profile replaces the scenario's /profile.
// InputError naming `file` and /scenario when there is none.
Scenario measured_scenario(const calibrate::Measurements& m, const std::string& file,
                           const std::string& profile_path = "");

// The dtype a scenario's kernels compute in when they carry none: training's compute
// precision, BF16 for serving.
Dtype compute_dtype(const Scenario& sc);

// Whether `path` is a measurements file (its text names the ctwin-measurements schema).
bool is_measurements_file(const std::string& path);

// ctwin validate MEASUREMENTS [--profile P] [--json]: predicted against measured per op, per
// collective and per step.
int validate_measurements(const ParsedArgs& p);

}  // namespace ctwin
