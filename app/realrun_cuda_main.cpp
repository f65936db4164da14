// ctwin-realrun: realrun on the CUDA backend, a separate binary so that `ctwin` never needs a
// GPU driver (`ctwin realrun --backend cuda` runs it). It reads the scenario through the same
// path as the CPU backend (realrun_job.cpp) and runs realrun's driver (realrun/src/driver.cpp)
// on the GPUs: every distinct kernel of the step and GEMMs swept around them, every collective
// of the layout's communicators over a size sweep, and whole steps replayed on their streams.
// One process over the node's GPUs, or one rank a GPU under mpirun/srun (NCCL bootstrapped
// through MPI, the driver's barriers and statistics over MPI_COMM_WORLD). It also writes the
// discovered node as a /cluster/file description (--cluster-out).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "calibrate/measurements.hpp"
#include "realrun/cpu_mpi.hpp"
#include "realrun/cuda_device.hpp"
#include "realrun/cuda_plan.hpp"
#include "realrun/driver.hpp"
#include "realrun_job.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"

namespace {

using namespace ctwin;
using namespace ctwin::realrun;

constexpr const char* kUsage =
    "usage: ctwin-realrun [--backend cuda] SCENARIO -o MEASUREMENTS.json [options]\n"
    "  --force              replace an existing output file\n"
    "  --ranks N            must equal the layout's GPU count (tp x pp x dp x cp)\n"
    "  --warmup N           untimed runs before each measurement (default /realrun/warmup)\n"
    "  --repeats N          timed runs of each measurement (default /realrun/repeats)\n"
    "  --timeout-s S        a collective or communicator not done in S seconds aborts (default /realrun/timeout_s)\n"
    "  --cluster-out FILE   also write the discovered node as a /cluster/file description\n"
    "  --set /POINTER=VALUE override a scenario key (repeatable)\n"
    "  --quiet              no progress lines\n"
    "The options are `ctwin realrun`'s, which runs this binary for --backend cuda.\n";

struct Options {
  std::string scenario, out, cluster_out;
  std::vector<std::string> sets;
  bool force = false, quiet = false;
  int ranks = 0, warmup = -1, repeats = -1;  // -1: the scenario's /realrun
  double timeout_s = 0;                      // 0: /realrun/timeout_s
};

int parse_int(const std::string& flag, const char* v, int lo, int hi) {
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    throw InputError("", flag, std::string("found '") + v + "'",
                     "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  return static_cast<int>(x);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw InputError("", a, "has no value");
      return argv[++i];
    };
    if (a == "--backend") {
      const std::string b = value();
      if (b != "cuda") throw InputError("", a, "found '" + b + "'", "cuda (the CPU backend is `ctwin realrun`)");
    } else if (a == "-o" || a == "--output") {
      o.out = value();
    } else if (a == "--force") {
      o.force = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--set") {
      o.sets.push_back(value());
    } else if (a == "--ranks") {
      o.ranks = parse_int(a, value(), 1, 4096);
    } else if (a == "--warmup") {
      o.warmup = parse_int(a, value(), 0, 1000);
    } else if (a == "--repeats") {
      o.repeats = parse_int(a, value(), 1, 100000);
    } else if (a == "--timeout-s") {
      const char* v = value();
      o.timeout_s = std::strtod(v, nullptr);
      if (!(o.timeout_s > 0)) throw InputError("", a, std::string("found '") + v + "'", "seconds above 0");
    } else if (a == "--cluster-out") {
      o.cluster_out = value();
    } else if (!a.empty() && a[0] == '-') {
      throw InputError("", a, "unknown option");
    } else if (o.scenario.empty()) {
      o.scenario = a;
    } else {
      throw InputError("", a, "a second scenario", "one SCENARIO");
    }
  }
  if (o.scenario.empty()) throw InputError("", "SCENARIO", "missing");
  if (o.out.empty()) throw InputError("", "-o", "missing", "the measurements file to write");
  return o;
}

// Rank and size under mpirun/srun, and the driver's cross-process calls over MPI_COMM_WORLD.
struct World {
  int rank = 0, size = 1, local = 0;
  bool mpi = false;
};

// The attention kernels take heads of 64 or 128 (kernels.cu); other widths run at the nearer.
int kernel_head_dim(const ModelSpec& m) { return m.heads > 0 && m.effective_head_dim() <= 96 ? 64 : 128; }

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  check_output_path(o.out, o.force, "-o");
  // The scenario read, checked and planned before any GPU is touched: bad input exits 2 first.
  RealrunRequest req;
  req.scenario_path = o.scenario;
  req.sets = o.sets;
  req.backend = "cuda";
  req.created_by = "ctwin-realrun 0.1.0";
  req.ranks = o.ranks;
  req.repeats = o.repeats;
  req.warmup = o.warmup;
  req.timeout_s = o.timeout_s;
  RealrunSetup setup = prepare_realrun(req);
  const RealrunJob& job = setup.job;
  const RealrunPlan& plan = setup.plan;

  World w;
  ProcessGroup group;
  const LaunchEnv env = launch_env([](const char* n) { return std::getenv(n); });
  if (launched_by_mpi()) {
    if (!cpu_mpi_built()) {
      throw InputError("", "mpirun", "ctwin-realrun was built without MPI",
                       "one process (it drives every visible GPU)");
    }
    const MpiWorld mw = mpi_init_world(false);
    w.rank = mw.rank;
    w.size = mw.size;
    w.local = env.local_rank;
    w.mpi = true;
    group = mw.group;
  }
  BackendOptions bo;
  bo.timeout_s = job.config.timeout_s;
  CudaOptions co;
  co.step_dtype = job.training.precision.compute;
  co.head_dim = kernel_head_dim(job.model);
  if (job.serving) co.kv_block_size = static_cast<int>(job.serving->scheduler.block_size);  // vLLM's --block-size
  // Prefill attention on the mma.sync kernel (the default), or on the WMMA one or the first,
  // scalar one (fallbacks and baselines).
  if (const char* a = std::getenv("CTWIN_REALRUN_ATTENTION"); a != nullptr) {
    co.simple_attention = std::string(a) == "simple";
    co.mma_attention = !co.simple_attention && std::string(a) != "wmma";
  }
  if (w.mpi) {
    if (plan.ranks % w.size != 0) {
      throw InputError(
          o.scenario, job.serving ? "/serving/tensor_parallel_size" : "/training/parallelism",
          "a layout of " + std::to_string(plan.ranks) + " GPUs over " + std::to_string(w.size) + " MPI processes",
          "as many processes as the layout has GPUs (one a GPU), or one process a node");
    }
    co.world_rank = w.rank;
    co.world_size = w.size;
    co.local_gpu = w.local;
    bo.ranks = plan.ranks / w.size;
  } else {
    const int visible = cuda_device_count();
    if (visible < plan.ranks) {
      throw InputError(
          o.scenario, job.serving ? "/serving/tensor_parallel_size" : "/training/parallelism",
          "a layout of " + std::to_string(plan.ranks) + " GPUs; this process sees " + std::to_string(visible),
          "a layout that fits this node's GPUs, or mpirun/srun with one process a GPU");
    }
    bo.ranks = plan.ranks;
  }
  const std::vector<std::unique_ptr<Device>> devices = make_cuda_devices(bo, co);
  std::vector<Device*> devs;
  for (const auto& d : devices) devs.push_back(d.get());
  const DiscoveredNode node = discover_node();

  const bool talk = w.rank == 0 && !o.quiet;
  int last_pct = -1;
  const RealrunProgress progress = [&](const std::string& phase, double f) {
    const int pct = static_cast<int>(f * 100);
    if (!talk || pct == last_pct) return;
    last_pct = pct;
    std::fprintf(stderr, "\rctwin-realrun: %-12s %3d%%", phase.c_str(), pct);
    if (pct >= 100) std::fputc('\n', stderr);
  };
  calibrate::Measurements m = run_realrun(job, plan, devs, progress, w.mpi ? &group : nullptr);

  // What ran where: the GPUs and libraries, and the node as discovered.
  m.host.hostname = node.hostname;
  m.host.ranks = plan.ranks;
  m.host.processes = w.mpi ? w.size : 1;
  m.host.nodes = w.mpi ? std::max(1, w.size / std::max<int>(1, static_cast<int>(node.gpus.size()))) : 1;
  m.host.gpus = nlohmann::json::array();
  for (const DiscoveredGpu& g : node.gpus)
    m.host.gpus.push_back({{"name", g.name}, {"uuid", g.uuid}, {"driver", node.driver}});
  m.host.versions = cuda_versions();
  const nlohmann::ordered_json cluster = cluster_json_from_discovery(node, m.host.nodes);
  m.cluster = nlohmann::json::parse(cluster.dump());
  for (calibrate::CollectiveMeasurement& c : m.collectives) {
    c.algorithm = "nccl";  // NCCL's own choice (NCCL_ALGO / NCCL_PROTO force one)
    c.protocol = "";
  }

  if (w.rank == 0) {
    calibrate::write_measurements(m, o.out, o.force, "-o");
    if (!o.cluster_out.empty()) {
      write_file_atomically(o.cluster_out, o.force, "--cluster-out",
                            [&](std::ostream& out) { out << cluster.dump(2) << "\n"; });
    }
    if (!o.quiet) {
      std::fprintf(stderr, "ctwin-realrun: %zu ops, %zu collectives, %zu step(s) on %d GPU(s) -> %s\n", m.ops.size(),
                   m.collectives.size(), m.steps.size(), plan.ranks, o.out.c_str());
      for (const auto& st : m.steps) {
        std::fprintf(stderr, "  step median %.3f ms (p10 %.3f, p90 %.3f) over %d repeats\n", st.stats.median_s * 1e3,
                     st.stats.p10_s * 1e3, st.stats.p90_s * 1e3, st.stats.repeats);
      }
    }
  }
  mpi_finalize();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctwin-realrun: %s\n", e.what());
    // The other ranks may be waiting in a collective or in MPI: end the whole job, not this rank.
    mpi_abort_if_running(kExitInternal);
    return kExitInternal;
  }
}
