// ctwin realrun: run a training scenario's kernels, collectives and whole steps (or a serving
// replica's iterations) for real and write what was measured (docs/realrun.md,
// docs/measurements.md). The CPU backend runs in this process; the CUDA backend is the
// ctwin-realrun binary beside ctwin, so ctwin itself never needs a GPU driver.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "host_resources.hpp"
#include "realrun/cpu_collectives.hpp"
#include "realrun/cpu_device.hpp"
#include "realrun/cpu_mpi.hpp"
#include "realrun/driver.hpp"
#include "realrun_job.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"

namespace ctwin {

namespace {

std::string shape_of(const OpCost& op) {
  char buf[128];
  if (op.kind == OpKind::gemm || op.kind == OpKind::grouped_gemm) {
    std::snprintf(buf, sizeof buf, "%gx%gx%g", op.m, op.n, op.k);
  } else if (op.kind == OpKind::attention) {
    std::snprintf(buf, sizeof buf, "q %g, pairs %g", op.query_tokens, op.attended_pairs);
  } else {
    return human_bytes(op.bytes);
  }
  return buf;
}

// The ctwin-realrun binary next to this ctwin, or "" when there is none.
std::string cuda_binary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const auto bin = self.parent_path() / "ctwin-realrun";
  return std::filesystem::exists(bin, ec) ? bin.string() : std::string();
}

int exec_cuda(const Args& args) {
  const std::string bin = cuda_binary();
  if (bin.empty()) {
    std::fprintf(stderr,
                 "error: --backend cuda: this ctwin was built without CUDA (no ctwin-realrun beside it); build on a "
                 "machine with the CUDA Toolkit, or use --backend cpu\n");
    return kExitBadInput;
  }
  std::vector<std::string> owned{bin};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(bin.c_str(), argv.data());
  std::fprintf(stderr, "error: cannot run %s: %s\n", bin.c_str(), std::strerror(errno));
  return kExitInternal;
}

void print_summary(const calibrate::Measurements& m, const std::string& out) {
  std::printf("realrun (%s, %d ranks on %s): %zu ops, %zu collective sizes, %zu %s -> %s\n\n", m.backend.c_str(),
              m.host.ranks, m.host.cpu.c_str(), m.ops.size(), m.collectives.size(), m.steps.size(),
              m.steps.size() == 1 ? "step" : "steps", out.c_str());
  std::printf("%-13s %-6s %-24s %12s %10s\n", "op", "origin", "shape", "median ms", "GFLOP/s");
  for (const auto& o : m.ops) {
    if (o.origin != "step") continue;
    const double t = o.stats.median_s;
    std::printf("%-13s %-6s %-24s %12.4f %10.2f\n", to_string(o.op.kind), o.origin.c_str(), shape_of(o.op).c_str(),
                t * 1e3, t > 0 ? o.op.flops / t / 1e9 : 0.0);
  }
  std::size_t swept = 0;
  for (const auto& o : m.ops) swept += o.origin == "sweep";
  if (swept > 0) std::printf("(and %zu swept GEMM shapes)\n", swept);
  std::printf("\n%-6s %-15s %12s %12s %14s\n", "group", "collective", "bytes", "median ms", "busbw GB/s");
  for (const auto& c : m.collectives) {
    std::printf("%-6s %-15s %12.0f %12.4f %14.3f\n", c.group.c_str(), to_string(c.op), c.bytes, c.stats.median_s * 1e3,
                c.busbw_gbyte_per_s);
  }
  if (!m.steps.empty()) std::printf("\n");
  for (const auto& s : m.steps) {
    const std::string what = s.shape ? iteration_label(*s.shape) : s.kind;
    std::printf("step (%s): median %.2f ms, p10 %.2f ms, p90 %.2f ms over %d repeats\n", what.c_str(),
                s.stats.median_s * 1e3, s.stats.p10_s * 1e3, s.stats.p90_s * 1e3, s.stats.repeats);
  }
}

int positive_int(const ParsedArgs& p, const std::string& flag, int fallback, int min) {
  if (!p.has(flag)) return fallback;
  const double v = p.number(flag, fallback);
  if (v < min || v != static_cast<double>(static_cast<int>(v))) {
    throw InputError("", flag, "'" + *p.get(flag) + "' is not an integer >= " + std::to_string(min),
                     "an integer >= " + std::to_string(min));
  }
  return static_cast<int>(v);
}

}  // namespace

int cmd_realrun(const Args& args_in) {
  const std::string usage =
      "usage: ctwin realrun [--backend cpu|cuda] SCENARIO.json -o MEASUREMENTS.json [--ranks N] [--repeats R]\n"
      "                     [--warmup W] [--set /pointer=value]... [--force] [--quiet]\n\n"
      "Runs a training scenario for real and writes what was measured (docs/realrun.md): every distinct\n"
      "kernel of its step and GEMMs swept around them, every collective of its communicators over a size\n"
      "sweep, and whole steps. A serving scenario: the same for a set of iterations of its replica (prefill\n"
      "chunks, decode batches, mixed; /realrun/iterations, else planned from /serving's limits).\n"
      "`ctwin calibrate` fits a profile from the file; `ctwin validate` compares.\n"
      "The CPU backend runs ranks as threads of this process (Eigen GEMMs, shared-memory collectives), or\n"
      "under mpirun/srun one rank per process (collectives over MPI: mpirun -np RANKS ctwin realrun ...);\n"
      "the CUDA backend is the ctwin-realrun binary beside ctwin. /realrun in the scenario sets repeats,\n"
      "warm-up and the sweeps; the flags here win.\n"
      "Exit status: 0 done, 1 a run that failed (a rank that never joined a collective), 2 bad input.";
  // -o is the one short option: the parser takes -- flags only.
  Args args;
  for (const auto& a : args_in) args.push_back(a == "-o" ? "--output" : a);
  auto p = parse_args(args, usage,
                      {{"--backend", "cpu|cuda", "where to run (default cpu)"},
                       {"--output", "FILE", "-o: the measurements file to write (atomically)"},
                       {"--ranks", "N", "ranks to run (must equal the layout's GPUs; default /realrun/ranks)"},
                       {"--repeats", "R", "timed runs per measurement (default /realrun/repeats)"},
                       {"--warmup", "W", "untimed runs before them (default /realrun/warmup)"},
                       {"--set", "/POINTER=VALUE", "override a scenario key", true},
                       {"--force", "", "overwrite an existing measurements file"},
                       {"--quiet", "", "no progress line and no summary"}});
  if (!p) return kExitOk;
  const std::string backend = p->get("--backend").value_or("cpu");
  if (backend != "cpu" && backend != "cuda") {
    throw InputError("", "--backend", "'" + backend + "' is no backend", "cpu or cuda");
  }
  if (backend == "cuda") return exec_cuda(args_in);
  if (p->positional.size() != 1) {
    throw InputError("", "SCENARIO", "expected exactly one scenario file", "ctwin realrun SCENARIO.json -o OUT.json");
  }
  const auto out = p->get("--output");
  if (!out) throw InputError("", "-o", "missing", "-o MEASUREMENTS.json, the file to write");
  const bool force = p->has("--force");
  check_output_path(*out, force, "-o");

  RealrunRequest req;
  req.scenario_path = p->positional[0];
  req.sets = p->all("--set");
  req.backend = "cpu";
  req.ranks = positive_int(*p, "--ranks", 0, 1);
  req.repeats = positive_int(*p, "--repeats", -1, 1);
  req.warmup = positive_int(*p, "--warmup", -1, 0);
  const RealrunSetup setup = prepare_realrun(req);
  const realrun::RealrunJob& job = setup.job;
  const realrun::RealrunPlan& plan = setup.plan;
  const std::string& path = req.scenario_path;
  realrun::BackendOptions bo;
  bo.ranks = plan.ranks;
  bo.timeout_s = job.config.timeout_s;

  // Under mpirun/srun: one rank per process, collectives over MPI; rank 0 reports and writes.
  const bool mpi = realrun::launched_by_mpi();
  if (mpi && !realrun::cpu_mpi_built()) {
    throw InputError("", "mpirun", "this ctwin was built without MPI",
                     "one process, its ranks as threads (run it without mpirun)");
  }
  struct Finalize {
    bool on;
    ~Finalize() {
      if (on) realrun::mpi_finalize();
    }
  } finalize{mpi};  // after the devices (declared below) are gone
  std::optional<realrun::MpiWorld> world;
  if (mpi) {
    world = realrun::mpi_init_world();
    if (world->size != plan.ranks) {
      // Printed here, by rank 0, before any process finalizes: the launcher ends the job as
      // soon as one process exits non-zero, so an error left to main() could go unprinted.
      if (world->rank == 0) {
        const InputError e(path, "/training/parallelism",
                           "a layout of " + std::to_string(plan.ranks) + " ranks over " + std::to_string(world->size) +
                               " MPI processes",
                           "one process per rank: mpirun -np " + std::to_string(plan.ranks));
        std::fprintf(stderr, "error: %s\n", e.what());
        std::fflush(stderr);
      }
      world->group.barrier();
      return kExitBadInput;
    }
  }
  const bool lead = !world || world->rank == 0;
  std::vector<std::unique_ptr<realrun::Device>> devices;
  if (world) {
    devices.push_back(realrun::make_cpu_mpi_device(bo, world->rank));
  } else {
    devices = realrun::make_cpu_devices(bo);
  }
  std::vector<realrun::Device*> devs;
  for (auto& d : devices) devs.push_back(d.get());

  const bool quiet = p->has("--quiet") || !lead;
  ProgressLine progress("realrun");
  calibrate::Measurements m;
  try {
    m = realrun::run_realrun(
        job, plan, devs,
        [&](const std::string&, double f) {
          if (!quiet) progress.update(f);
        },
        world ? &world->group : nullptr);
  } catch (const realrun::CollectiveTimeout& e) {
    progress.clear();
    std::fprintf(stderr, "error: realrun failed: %s\n", e.what());
    // The other processes may wait in a collective: end the whole job, not this rank.
    if (world) realrun::mpi_abort_if_running(kExitInternal);
    return kExitInternal;
  } catch (const std::invalid_argument& e) {
    // A kernel too large for this backend's memory: the scenario, not the program, is at fault.
    progress.clear();
    std::fprintf(stderr, "error: %s: %s\n", path.c_str(), e.what());
    if (world) realrun::mpi_abort_if_running(kExitBadInput);
    return kExitBadInput;
  }
  progress.clear();
  if (world) {
    m.host.versions["mpi"] = realrun::mpi_library_version();
    m.host.processes = world->size;
  }
  if (lead) {
    calibrate::write_measurements(m, *out, force, "-o");
    if (!quiet) print_summary(m, *out);
  }
  return kExitOk;
}

}  // namespace ctwin
