// ctwin: the ClusterTwin command line.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "commands.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"
#include "sim/time.hpp"

namespace {

constexpr const char* kUsage = R"(ctwin - a simulator and digital twin of distributed AI clusters

usage: ctwin COMMAND [options]

commands:
  run FILE          simulate a scenario: step time, MFU, memory (training)
  sweep FILE        simulate a scenario's variants or every layout, ranked (docs/sweep.md)
  compare A [B]     two runs side by side, the change of each figure explained (docs/compare.md)
  collective        predict nccl-tests figures for a collective on a cluster
  cluster           describe a cluster as JSON (to edit, or load back with /cluster/file)
  params            list every scenario key: type, default, bounds, unit, meaning
  profile NAME      print or --write a shipped calibration profile (docs/profiles.md)
  validate PATH...  compare simulated against published measurements (scenarios/validation/),
                    or a measurements file against a profile (--profile)
  calibrate FILE... fit a calibration profile to measurements (docs/calibration.md)
  realrun FILE      run a scenario's kernels, collectives and steps for real (-o MEASUREMENTS.json)
  view TRACE        open the timeline viewer on a trace
  bench NAME        run a benchmark: engine, network, viewer, training

Run 'ctwin COMMAND --help' for a command's options.
Exit status: 0 success, 1 internal error, 2 bad input.
)";

}  // namespace

// A report that cannot reach stdout (a full disk, a closed pipe) is a failure, never exit 0.
int finish(int status) {
  // errno still holds the failed write's reason when an earlier buffered write failed.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    std::fprintf(stderr, "error: cannot write the output to standard output: %s\n",
                 errno != 0 ? std::strerror(errno) : "write error");
    return ctwin::kExitInternal;
  }
  return status;
}

int run_command(const std::string& cmd, ctwin::Args& args) {
  if (cmd == "run") return ctwin::cmd_run(args);
  if (cmd == "collective") return ctwin::cmd_collective(args);
  if (cmd == "cluster") return ctwin::cmd_cluster(args);
  if (cmd == "params") return ctwin::cmd_params(args);
  if (cmd == "profile") return ctwin::cmd_profile(args);
  if (cmd == "bench") return ctwin::cmd_bench(args);
  if (cmd == "view") return ctwin::cmd_view(args);
  if (cmd == "validate") return ctwin::cmd_validate(args);
  if (cmd == "realrun") return ctwin::cmd_realrun(args);
  if (cmd == "calibrate") return ctwin::cmd_calibrate(args);
  if (cmd == "sweep") return ctwin::cmd_sweep(args);
  if (cmd == "compare") return ctwin::cmd_compare(args);
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return ctwin::kExitBadInput;
  }
  const std::string cmd = argv[1];
  ctwin::Args args(argv + 2, argv + argc);
  try {
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return finish(ctwin::kExitOk);
    }
    if (cmd == "--version") {
      std::puts("ctwin 0.1.0");
      return finish(ctwin::kExitOk);
    }
    if (const int status = run_command(cmd, args); status >= 0) return finish(status);
    std::fprintf(stderr, "ctwin: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return ctwin::kExitBadInput;
  } catch (const ctwin::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return ctwin::kExitBadInput;
  } catch (const ctwin::TimeOverflow& e) {
    // Reached only by inputs in range one by one but out of proportion together.
    std::fprintf(stderr, "error: %s\n", e.what());
    return ctwin::kExitBadInput;
  } catch (const ctwin::OutputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return ctwin::kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return ctwin::kExitInternal;
  }
}
