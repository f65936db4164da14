// The ctwin subcommands. Each takes the arguments after its name and returns an exit code
// (0 ok, 1 internal error, 2 bad input); InputError thrown from inside becomes exit 2.
#pragma once

#include <string>
#include <vector>

namespace ctwin {

using Args = std::vector<std::string>;

int cmd_run(const Args& args);         // app/cmd_run.cpp
int cmd_collective(const Args& args);  // app/cmd_collective.cpp
int cmd_bench(const Args& args);       // app/cmd_bench.cpp
int cmd_view(const Args& args);        // app/cmd_view.cpp
int cmd_validate(const Args& args);    // app/cmd_validate.cpp
int cmd_cluster(const Args& args);     // app/cmd_cluster.cpp
int cmd_params(const Args& args);      // app/cmd_params.cpp
int cmd_profile(const Args& args);     // app/cmd_profile.cpp
int cmd_realrun(const Args& args);     // app/cmd_realrun.cpp
int cmd_calibrate(const Args& args);   // app/cmd_calibrate.cpp
int cmd_sweep(const Args& args);       // app/cmd_sweep.cpp
int cmd_compare(const Args& args);     // app/cmd_compare.cpp

struct Scenario;
struct ParsedArgs;
// `ctwin run` on a /kind "serving" scenario (app/cmd_run_serving.cpp).
int run_serving_scenario(const Scenario& sc, const ParsedArgs& p);

}  // namespace ctwin
