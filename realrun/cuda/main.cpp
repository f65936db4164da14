// ctwin-realrun: realrun on the CUDA backend, a separate binary so that `ctwin` never needs a
// GPU driver. One process over the visible GPUs, or one rank a GPU under mpirun/srun (NCCL
// bootstrapped through MPI). It discovers the node (written with --cluster-out in the
// /cluster/file form) and measures kernels and NCCL collectives into a measurements file
// (docs/measurements.md).
//
// Until realrun's backend-neutral driver (realrun/src/driver.cpp: the scenario's step program,
// its sweeps and whole steps) is joined here, this measures a fixed sweep through the same
// Device seam: GEMMs (BF16, FP8 where the GPU has it, grouped), attention for prefill and paged
// decode, RMSNorm, AdamW and a vector op, and all_reduce/all_gather/reduce_scatter/all_to_all
// over the whole job with nccl-tests' size sweep.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef CTWIN_HAVE_MPI
#include <mpi.h>
#endif

#include "calibrate/measurements.hpp"
#include "realrun/cuda_device.hpp"
#include "realrun/cuda_plan.hpp"
#include "sim/error.hpp"
#include "sim/output_file.hpp"

namespace {

using namespace ctwin;
using namespace ctwin::realrun;

constexpr const char* kUsage =
    "usage: ctwin-realrun [--backend cuda] SCENARIO -o MEASUREMENTS.json [options]\n"
    "  --force              replace an existing output file\n"
    "  --ranks N            GPUs of this process to use (default: all visible; under MPI one a rank)\n"
    "  --warmup N           untimed runs before each measurement (default 3)\n"
    "  --repeats N          timed runs of each measurement (default 10)\n"
    "  --timeout-s S        a collective or communicator not done in S seconds aborts (default 60)\n"
    "  --cluster-out FILE   also write the discovered node as a /cluster/file description\n"
    "  --set /POINTER=VALUE override a scenario key in the recorded scenario (repeatable)\n"
    "  --quiet              no progress lines\n"
    "The options are `ctwin realrun`'s, which runs this binary for --backend cuda.\n";

struct Options {
  std::string scenario, out, cluster_out;
  std::vector<std::string> sets;
  bool force = false, quiet = false;
  int ranks = 0, warmup = 3, repeats = 10;
  double timeout_s = 60;
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

// The job's processes: one under no launcher; MPI's world under mpirun/srun.
struct World {
  int rank = 0, size = 1, local = 0;
  bool mpi = false;
  double max(double x) const {
#ifdef CTWIN_HAVE_MPI
    if (mpi) {
      double m = 0;
      MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return m;
    }
#endif
    return x;
  }
};

// Runs `body` on every device of this process, each from its own thread (NCCL needs every
// rank of a communicator to call at once), and rethrows the first failure.
template <class F>
void on_each(const std::vector<std::unique_ptr<Device>>& devices, F body) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        body(*devices[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
}

// Seconds of each of `repeats` runs of `enqueue` on stream 0, after `warmup` untimed ones.
template <class F>
std::vector<double> time_runs(Device& d, int warmup, int repeats, F enqueue) {
  for (int i = 0; i < warmup; ++i) enqueue();
  d.synchronize();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const EventHandle a = d.record(0);
    enqueue();
    const EventHandle b = d.record(0);
    samples.push_back(d.elapsed_s(a, b));
  }
  return samples;
}

std::vector<OpCost> sweep_ops(int sm) {
  std::vector<OpCost> ops;
  const auto gemm = [&](double m, double n, double k, Dtype d, bool split = false) {
    OpCost op{OpKind::gemm, 2 * m * n * k, 2 * (m * k + k * n + m * n)};
    op.m = m;
    op.n = n;
    op.k = k;
    op.dtype = d;
    op.split_accumulator = split;
    ops.push_back(op);
  };
  for (double s : {1024.0, 2048.0, 4096.0, 8192.0}) gemm(s, s, s, Dtype::bf16);
  gemm(4096, 11008, 4096, Dtype::bf16);
  gemm(4096, 4096, 11008, Dtype::bf16);
  if (gpu_has_fp8(sm)) {
    gemm(8192, 8192, 8192, Dtype::fp8);
    gemm(8192, 8192, 8192, Dtype::fp8, true);
  }
  OpCost grouped{OpKind::grouped_gemm, 2.0 * 8192 * 1408 * 2048, 0};
  grouped.m = 8192;
  grouped.n = 1408;
  grouped.k = 2048;
  grouped.groups = 8;
  grouped.dtype = Dtype::bf16;
  ops.push_back(grouped);
  // Attention: 2 sequences of 4096 (training geometry), 32 heads of 128; decode: 64 sequences
  // at context 2048.
  OpCost prefill{OpKind::attention, 2 * 32 * 4096.0 * 4096 * 256, 2.0 * 8192 * 4 * 4096};
  prefill.query_tokens = 8192;
  prefill.attended_pairs = 8192.0 * 4096 / 2;
  prefill.kv_tokens = 8192;
  prefill.dtype = Dtype::bf16;
  ops.push_back(prefill);
  OpCost decode{OpKind::attention, 4 * 64 * 2048.0 * 32 * 128, 2.0 * 64 * 2048 * 2 * 4096};
  decode.query_tokens = 64;
  decode.attended_pairs = decode.kv_tokens = 64 * 2048;
  decode.dtype = Dtype::bf16;
  ops.push_back(decode);
  for (double bytes : {1e6, 1e8, 1e9}) {
    for (OpKind k : {OpKind::norm, OpKind::optimizer, OpKind::elementwise}) {
      OpCost op{k, 0, bytes};
      op.dtype = Dtype::bf16;
      ops.push_back(op);
    }
  }
  return ops;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  check_output_path(o.out, o.force, "-o");
  // The scenario as run (--set applied), read before any GPU is touched: bad input exits 2 first.
  nlohmann::json scenario;
  {
    std::ifstream in(o.scenario);
    if (!in) throw InputError(o.scenario, "", "cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    scenario = nlohmann::json::parse(text.str(), nullptr, false);
    if (scenario.is_discarded()) throw InputError(o.scenario, "", "is not JSON");
    // --set /pointer=value as ctwin's: the value as JSON where it parses, else as a string.
    for (const std::string& set : o.sets) {
      const auto eq = set.find('=');
      if (set.empty() || set[0] != '/' || eq == std::string::npos) {
        throw InputError("", "--set", "'" + set + "'", "/POINTER=VALUE");
      }
      nlohmann::json v = nlohmann::json::parse(set.substr(eq + 1), nullptr, false);
      if (v.is_discarded()) v = set.substr(eq + 1);
      try {
        scenario[nlohmann::json::json_pointer(set.substr(0, eq))] = v;
      } catch (const nlohmann::json::exception& e) {
        throw InputError(o.scenario, set.substr(0, eq), std::string("cannot be set: ") + e.what());
      }
    }
  }
  World w;
  const LaunchEnv env = launch_env([](const char* n) { return std::getenv(n); });
#ifdef CTWIN_HAVE_MPI
  if (env.launched && env.size > 1) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    w.local = env.local_rank;
    w.mpi = true;
  }
#else
  if (env.launched && env.size > 1) {
    throw InputError("", "mpirun", "ctwin-realrun was built without MPI", "one process (it drives every visible GPU)");
  }
#endif
  BackendOptions bo;
  bo.timeout_s = o.timeout_s;
  CudaOptions co;
  if (w.mpi && w.size > 1) {  // a lone process (sbatch without srun) drives every visible GPU
    co.world_rank = w.rank;
    co.world_size = w.size;
    co.local_gpu = w.local;
  }
  bo.ranks = o.ranks > 0 ? o.ranks : cuda_device_count();
  const std::vector<std::unique_ptr<Device>> devices = make_cuda_devices(bo, co);
  const DiscoveredNode node = discover_node();
  const int sm = node.gpus.empty() ? 0 : node.gpus.front().sm;
  if (w.size == 1) w.mpi = false;
  const int world = w.mpi ? w.size : static_cast<int>(devices.size());

  calibrate::Measurements m;
  m.backend = "cuda";
  m.created_by = "ctwin-realrun 0.1.0";
  m.scenario_file = o.scenario;
  m.scenario = std::move(scenario);
  m.host.hostname = node.hostname;
  m.host.ranks = world;
  m.host.nodes = w.mpi ? std::max(1, w.size / std::max<int>(1, static_cast<int>(node.gpus.size()))) : 1;
  m.host.cores = static_cast<int>(std::thread::hardware_concurrency());
  for (const DiscoveredGpu& g : node.gpus)
    m.host.gpus.push_back({{"name", g.name}, {"uuid", g.uuid}, {"driver", node.driver}});
  m.host.versions = cuda_versions();
  const nlohmann::ordered_json cluster = cluster_json_from_discovery(node, m.host.nodes);
  m.cluster = nlohmann::json::parse(cluster.dump());
  m.warmup = o.warmup;
  m.repeats = o.repeats;

  // Kernels, on the first device of this process.
  Device& d0 = *devices.front();
  for (const OpCost& op : sweep_ops(sm)) {
    calibrate::OpMeasurement om;
    om.op = op;
    om.rank = d0.rank();
    om.stats = calibrate::stats_of(time_runs(d0, o.warmup, o.repeats, [&] { d0.launch(0, op); }));
    m.ops.push_back(om);
    if (w.rank == 0 && !o.quiet) std::fprintf(stderr, "  %-12s %.3e s\n", to_string(op.kind), om.stats.median_s);
  }

  // Collectives over the whole job, nccl-tests' sweep from 1 KiB to 256 MiB by 4.
  if (world > 1) {
    CommSpec spec;
    spec.id = 0;
    spec.label = "world";
    for (int r = 0; r < world; ++r) spec.ranks.push_back(r);
    on_each(devices, [&](Device& d) { d.create_comm(spec, o.timeout_s); });
    for (CollectiveOp op :
         {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::all_to_all}) {
      for (double bytes = 1024; bytes <= 256.0 * 1024 * 1024; bytes *= 4) {
        CollectiveRequest req;
        req.op = op;
        req.bytes = bytes;
        std::vector<std::vector<double>> per(devices.size());
        std::vector<Device*> ds;
        for (const auto& d : devices) ds.push_back(d.get());
        on_each(devices, [&](Device& d) {
          const auto i = static_cast<std::size_t>(std::find(ds.begin(), ds.end(), &d) - ds.begin());
          per[i] = time_runs(d, o.warmup, o.repeats, [&] { d.collective(0, req); });
        });
        // The slowest rank's time each repeat, as nccl-tests reports.
        std::vector<double> slowest(static_cast<std::size_t>(o.repeats), 0.0);
        for (const auto& p : per) {
          for (std::size_t i = 0; i < p.size(); ++i) slowest[i] = std::max(slowest[i], p[i]);
        }
        for (double& s : slowest) s = w.max(s);
        calibrate::CollectiveMeasurement cm;
        cm.op = op;
        cm.group = spec.label;
        cm.ranks = spec.ranks;
        cm.algorithm = "nccl";  // NCCL's own choice (NCCL_ALGO forces one)
        cm.bytes = plan_nccl(op, bytes, world).bytes;
        cm.stats = calibrate::stats_of(slowest);
        cm.algbw_gbyte_per_s = cm.bytes / cm.stats.median_s / 1e9;
        cm.busbw_gbyte_per_s = cm.algbw_gbyte_per_s * bus_factor(op, world);
        m.collectives.push_back(cm);
      }
    }
  }

  if (w.rank == 0) {
    calibrate::write_measurements(m, o.out, o.force, "-o");
    if (!o.cluster_out.empty()) {
      write_file_atomically(o.cluster_out, o.force, "--cluster-out",
                            [&](std::ostream& out) { out << cluster.dump(2) << "\n"; });
    }
    if (!o.quiet)
      std::fprintf(stderr, "ctwin-realrun: %zu ops, %zu collectives on %d GPU(s) -> %s\n", m.ops.size(),
                   m.collectives.size(), world, o.out.c_str());
  }
#ifdef CTWIN_HAVE_MPI
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Finalize();
#endif
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
#ifdef CTWIN_HAVE_MPI
    // The other ranks may be waiting in a collective or in MPI: end the whole job, not this rank.
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, kExitInternal);
#endif
    return kExitInternal;
  }
}
