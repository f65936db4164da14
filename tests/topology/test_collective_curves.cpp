// Whole nccl-tests curves (tests/topology/data/nccl-tests/*.txt, each with its source in its
// header) against `ctwin collective`'s analytical model: every size of every curve, one test per
// system. The brief's target is 10% from 1 MiB up and 25% below; each curve is held to what the
// model reaches on it (docs/validation-network.md, "Whole curves", lists each with its mean and
// worst error, and why the ones that miss the target miss it), so a change that moves any size
// further from the published run fails.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"

#include "test_paths.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using ctwin::test::rel_diff;

namespace {

struct Row {
  double bytes, time_us, busbw;
};

struct Curve {
  std::string op, cluster;
  int nodes = 1;
  int gpus_per_node = 0;      // GPUs of each node taking part (0: all of the preset's)
  int gpus_per_thread = 1;    // nccl-tests -g
  std::string algo = "auto";  // the run's NCCL_ALGO
  std::vector<Row> rows;
};

Curve load(const std::string& name) {
  const auto path = std::filesystem::path(ctwin::test::source_dir()) / "tests/topology/data/nccl-tests" / name;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  Curve c;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# op: ", 0) == 0) c.op = line.substr(6);
    if (line.rfind("# cluster: ", 0) == 0) {
      std::istringstream h(line.substr(11));
      std::getline(h, c.cluster, ',');
      std::string key;
      h >> key >> c.nodes;  // "nodes:" N
    }
    if (line.rfind("# gpus_per_thread: ", 0) == 0) c.gpus_per_thread = std::stoi(line.substr(19));
    if (line.rfind("# gpus_per_node: ", 0) == 0) c.gpus_per_node = std::stoi(line.substr(17));
    if (line.rfind("# algo: ", 0) == 0) c.algo = line.substr(8);
    if (line.empty() || line[0] == '#') continue;
    std::istringstream r(line);
    Row row{};
    r >> row.bytes >> row.time_us >> row.busbw;
    REQUIRE_MESSAGE(!r.fail(), name << ": bad row '" << line << "'");
    c.rows.push_back(row);
  }
  REQUIRE(!c.rows.empty());
  return c;
}

// The first gpus_per_node GPUs of every node (all of them when the header does not say), as
// `ctwin collective --gpus-per-node` takes them.
std::vector<GpuId> ranks_of(const Curve& c, const ClusterSpec& s) {
  const int g = c.gpus_per_node > 0 ? c.gpus_per_node : s.gpus_per_node;
  REQUIRE(g <= s.gpus_per_node);
  std::vector<GpuId> ranks;
  for (int n = 0; n < s.nodes; ++n) {
    for (int i = 0; i < g; ++i) ranks.emplace_back(n * s.gpus_per_node + i);
  }
  return ranks;
}

CollectiveOp op_named(const std::string& s) {
  for (CollectiveOp op :
       {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::all_to_all}) {
    if (s == to_string(op)) return op;
  }
  FAIL("unknown op " << s);
  return CollectiveOp::all_reduce;
}

struct Errors {
  double small_worst = 0, small_mean = 0, big_worst = 0, big_mean = 0;  // |model - published| / larger, of the time
  double tail_worst = 0;                                                // from `tail_from` bytes up
  int within = 0, sizes = 0;  // sizes inside issue 15's target (25% below 1 MiB, 10% from it), of all
};

// The preset a curve names, as the run's cluster.
ClusterSpec spec_of(const Curve& c) {
  ClusterSpec s;
  REQUIRE_MESSAGE(preset_cluster(c.cluster, c.nodes, builtin_gpus(), s), "no preset " << c.cluster);
  return s;
}

// The call a curve times on the cluster `s` (its preset, or the preset with coefficients changed):
// the op on the run's ranks, its launches and its forced algorithm; the bytes set per row.
struct CurveCall {
  Cluster cl;
  CollectiveCall call;
  CollectiveOptions opt;
};

CurveCall curve_call(const Curve& c, const ClusterSpec& s) {
  CurveCall k{build_cluster(s), {}, {}};
  k.call.op = op_named(c.op);
  k.call.ranks = ranks_of(c, s);
  k.opt.gpus_per_thread = c.gpus_per_thread;
  REQUIRE(parse_collective_algo(c.algo, k.opt.algo));
  return k;
}

// The model's time against the published one at every size (the busbw error is the same ratio).
Errors compare(const std::string& file, double tail_from = 1e300) {
  const Curve c = load(file);
  CurveCall k = curve_call(c, spec_of(c));
  Errors e;
  int big = 0, small = 0, within = 0;  // within: sizes inside issue 15's target (25% below 1 MiB, 10% from it)
  for (const Row& r : c.rows) {
    k.call.bytes = r.bytes;
    const double t = estimate_collective(k.cl, k.call, k.opt).time.micros();
    const double err = rel_diff(t, r.time_us);
    CAPTURE(file);
    CAPTURE(r.bytes);
    CAPTURE(r.time_us);
    CAPTURE(t);
    if (r.bytes >= tail_from) e.tail_worst = std::max(e.tail_worst, err);
    if (err <= (r.bytes >= (1 << 20) ? 0.10 : 0.25)) ++within;
    if (r.bytes >= (1 << 20)) {
      e.big_worst = std::max(e.big_worst, err);
      e.big_mean += err;
      ++big;
    } else {
      e.small_worst = std::max(e.small_worst, err);
      e.small_mean += err;
      ++small;
    }
  }
  e.within = within;
  e.sizes = static_cast<int>(c.rows.size());
  if (big > 0) e.big_mean /= big;
  if (small > 0) e.small_mean /= small;
  MESSAGE(file << ": below 1 MiB worst " << 100 * e.small_worst << "% mean " << 100 * e.small_mean
               << "%, from 1 MiB worst " << 100 * e.big_worst << "% mean " << 100 * e.big_mean << "%; " << within
               << " of " << c.rows.size() << " sizes within target");
  return e;
}

}  // namespace

TEST_CASE("HGX B200 all_gather and reduce_scatter, 1 KiB to 8 GiB: the ring ramp within 11% at every size but one") {
  // Errors are |model - published| / the larger of the two. The brief's target (10% from 1 MiB,
  // 25% below) holds at 45 of the 48 sizes: all_gather's 16 MiB (10.9%) and reduce_scatter's
  // 128 MiB (10.4%) sit just above 10%; reduce_scatter's 8 MiB point (58 us) is slower than its own
  // 16 MiB point (52 us) in the published run, and 25% off the model: held to 26%.
  const Errors ag = compare("hgx-b200-all_gather.txt");
  CHECK(ag.small_worst <= 0.25);
  CHECK(ag.big_worst <= 0.11);
  CHECK(ag.big_mean <= 0.04);
  const Errors rs = compare("hgx-b200-reduce_scatter.txt");
  CHECK(rs.small_worst <= 0.25);
  CHECK(rs.big_worst <= 0.26);
  CHECK(rs.big_mean <= 0.065);
}

TEST_CASE("HGX B200 all_reduce, 1 KiB to 8 GiB: NVLS's loops within 12% at every size, 22 of 24 within target") {
  // From 2 GiB the run reaches NVLS's rate (839 GB/s busbw; NVLS at H100's measured share of line
  // rate times NCCL's Blackwell/Hopper ratio, 0.74/0.85) and the model is within 1%. From 1 MiB
  // NVLS's ramp (collective.cpp: NCCL's chunk by size, a hand-off with every rank a loop, two
  // loops of fill) holds every size within 11.8%, mean 4.5% (before it: worst 44.8%, mean 21.9%);
  // 16 MiB (11.8%) and 32 MiB (10.4%) sit above the 10% target. Below 1 MiB within 11.2%, the
  // ring LL's 1.4 us hops (fitted on all_gather at 1 KiB only).
  const Errors ar = compare("hgx-b200-all_reduce.txt", 2.0 * (1 << 30));
  CHECK(ar.small_worst <= 0.12);
  CHECK(ar.tail_worst <= 0.01);
  CHECK(ar.big_worst <= 0.12);
  CHECK(ar.big_mean <= 0.05);
}

TEST_CASE("HGX B200 all_to_all, 1 KiB to 8 GiB: p2p's ramp within 10% from 8 MiB; 1-4 MiB still too fast") {
  // p2p's ramp (collective.cpp, p2p_ramp): a peer's share runs on 1 to 32 of the 32 p2p channels
  // by size, in 512 KiB steps a hop apart, plus one step of fill. From 8 MiB every size within 7%
  // (was 15-55% too fast to 2 GiB); from 1 MiB mean 9.6%. The misses are 1 MiB (16%), 2 MiB (25%)
  // and 4 MiB, which the run shows slower than its own 8 MiB (38.8 against 34.6 us): 41.4%, held
  // to 42%. Below 1 MiB within 11.9% (one hop, as before the ramp).
  const Errors a2a = compare("hgx-b200-all_to_all.txt");
  CHECK(a2a.small_worst <= 0.12);
  CHECK(a2a.big_worst <= 0.42);
  CHECK(a2a.big_mean <= 0.096);
}

TEST_CASE("8 A100 all_reduce, two published runs: within 48% (the LL128 region runs 1.4-1.9x slower than modelled)") {
  // Both runs drive 8 GPUs from one process (-g 8), whose launches set the ~36 us floor below
  // 256 KiB (group_launch_us_per_gpu and _per_channel: within 6% there); from 2 to 16 MiB (NCCL's tuner picks LL128)
  // both runs are 1.4-1.9x the model, from 32 MiB (Simple) 1.1-1.2x; 1 GiB within 1%. docs/validation-network.md.
  const Errors a80 = compare("a100-sxm4-80gb-all_reduce.txt");
  CHECK(a80.small_worst <= 0.30);
  CHECK(a80.small_mean <= 0.074);
  CHECK(a80.big_worst <= 0.37);
  const Errors a40 = compare("a100-sxm4-40gb-all_reduce.txt");
  CHECK(a40.big_worst <= 0.48);
}

TEST_CASE("8 H20 (NVLink 4) all_reduce at 1-4 KiB within 6%: NCCL's 0.6 us NVLink hop holds on Hopper") {
  const Errors h20 = compare("h20-all_reduce.txt");
  CHECK(h20.small_worst <= 0.06);
}

TEST_CASE("8 H100 all_reduce through torch.distributed, 128 B to 16 MiB: every size within target") {
  // Not nccl-tests (h100-all_reduce-torch.txt's header): the framework adds ~4 us at every size,
  // so the model's ring LL sits 21% under the run at 128 B-1 KiB, and its single channel's LL rate
  // puts 32 KiB-512 KiB 15-24% over it. From 1 MiB NVLS's loops (the ramp fitted with the B200 run
  // above and vLLM's 8- and 4-rank figures, docs/validation-network.md "NVLS's ramp") hold every
  // size within 7.3%, mean 4.4%; at NVLS's asymptote rate they were 32-39% too fast at 4-16 MiB.
  const Errors h100 = compare("h100-all_reduce-torch.txt");
  CHECK(h100.small_worst <= 0.25);
  CHECK(h100.big_worst <= 0.10);
  CHECK(h100.big_mean <= 0.05);
}

TEST_CASE("2 x 8 A100 over RoCE all_reduce, 1 KiB to 8 GiB: from 1 GiB within 7%, 2-64 MiB within 11%") {
  // The first multi-node curve with every size (OCI BM.GPU4.8, NCCL 2.19.3; the file's header).
  // From 1 GiB the tree's Simple rate over the nodes' 1.6 Tb/s holds within 6.4% (0.1% at 4 GiB).
  // Below, the run is slower at every size: a 42-50 us floor to 128 KiB where NCCL's tuner latency
  // for a two-node LL tree is 25 us (RoCE, not the preset's InfiniBand), 256 KiB-1 MiB 18-21%,
  // and 128-512 MiB 17-33% (tree Simple). The tree's mid-size correction, LL's ceiling on AMD hosts (22.5 GB/s bus) and
  // LL128's per channel (20 GB/s on each of 8 channels) took the mean from 44.1% to 33.9% below
  // 1 MiB and from 22.1% to 10.3% from it, sizes within target 4 -> 12 of 24.
  // docs/validation-network.md, "The tree at mid sizes".
  const Errors e = compare("a100-sxm4-40gb-2node-roce-all_reduce.txt", 1 << 30);
  CHECK(e.tail_worst <= 0.07);
  CHECK(e.big_worst <= 0.33);
  CHECK(e.big_mean <= 0.104);
  CHECK(e.small_worst <= 0.46);
  CHECK(e.small_mean <= 0.34);
}

TEST_CASE(
    "8 H100, one thread for 8 GPUs (-g 8), NCCL 2.26: ring all_reduce, all_gather, reduce_scatter and NVLS "
    "all_reduce") {
  // One node of a Together AI cluster (each file's header), run as all_reduce_perf -g 8: below
  // about 2 MiB the iteration is the host's eight group launches, 35.6 us on one channel and 0.26
  // us more for each further channel the size runs on (NcclModel::group_launch_us_per_gpu and
  // group_launch_us_per_channel, fitted together on these four curves' and the A100 80GB run's
  // rows from 1 KiB to 4 MiB). The channels took the 512 KiB-2 MiB rows, 41-46 us where a flat
  // floor had 35.7, from 11-14% to within 4.5%: NVLS's all_reduce and all_gather now hold every
  // size within target. From 4 MiB the ring's ramp and NVLS's loops hold every size within 15%
  // (NVLS within 6.2%, the ring at 8 GiB within 5%). The misses left: the ring all_reduce's 2 and
  // 4 MiB (18% and 15%, LL128 above the run), 64 MiB (12%, the tuner's switch to Simple),
  // reduce_scatter's 32 MiB (12%), and the ring all_reduce's 512 KiB row, 69 us out of place
  // against 44 us in place in the same run (43%).
  const Errors ring = compare("h100-all_reduce-ring-g8.txt", 4 << 20);
  CHECK(ring.small_worst <= 0.43);
  CHECK(ring.small_mean <= 0.047);
  CHECK(ring.big_worst <= 0.19);
  CHECK(ring.big_mean <= 0.06);
  CHECK(ring.tail_worst <= 0.15);
  CHECK(ring.within >= 26);
  const Errors nvls = compare("h100-all_reduce-nvls-g8.txt", 2 << 20);
  CHECK(nvls.small_worst <= 0.026);
  CHECK(nvls.big_worst <= 0.063);
  CHECK(nvls.big_mean <= 0.033);
  CHECK(nvls.tail_worst <= 0.063);
  CHECK(nvls.within == nvls.sizes);
  const Errors ag = compare("h100-all_gather-ring-g8.txt", 4 << 20);
  CHECK(ag.small_worst <= 0.128);  // 16 KiB: 40.8 us between 35.3 and 35.3 at 8 and 32 KiB
  CHECK(ag.big_worst <= 0.073);
  CHECK(ag.big_mean <= 0.023);
  CHECK(ag.tail_worst <= 0.073);
  CHECK(ag.within == ag.sizes);
  const Errors rs = compare("h100-reduce_scatter-ring-g8.txt", 4 << 20);
  CHECK(rs.small_worst <= 0.151);  // 8 KiB: 40.0 us between 34.5 and 36.1 at 4 and 16 KiB
  CHECK(rs.big_worst <= 0.122);
  CHECK(rs.big_mean <= 0.028);
  CHECK(rs.tail_worst <= 0.122);
  CHECK(rs.within >= rs.sizes - 1);
}

namespace {

// Mean error over the rows from 1 KiB to 4 MiB of the five -g 8 curves, the rows the launches can
// bind, with the launch costs given.
double launch_rows_mean_error(double per_gpu_us, double per_channel_us) {
  double sum = 0;
  int rows = 0;
  for (const char* file :
       {"h100-all_reduce-ring-g8.txt", "h100-all_gather-ring-g8.txt", "h100-reduce_scatter-ring-g8.txt",
        "h100-all_reduce-nvls-g8.txt", "a100-sxm4-80gb-all_reduce.txt"}) {
    const Curve c = load(file);
    REQUIRE(c.gpus_per_thread == 8);
    ClusterSpec s = spec_of(c);
    s.nccl.group_launch_us_per_gpu = per_gpu_us;
    s.nccl.group_launch_us_per_channel = per_channel_us;
    CurveCall k = curve_call(c, s);
    for (const Row& r : c.rows) {
      if (r.bytes < 1024 || r.bytes > (4 << 20)) continue;
      k.call.bytes = r.bytes;
      sum += rel_diff(estimate_collective(k.cl, k.call, k.opt).time.micros(), r.time_us);
      ++rows;
    }
  }
  REQUIRE(rows == 65);
  return sum / rows;
}

}  // namespace

TEST_CASE("-g 8 launches: a cost per channel fits the five curves better than any flat floor") {
  // docs/validation-network.md, "One thread, eight GPUs": the shipped pair (4.42 us a launch,
  // 0.033 us a channel) against every flat floor from 3.5 to 5 us a launch by 0.01 us.
  const NcclModel nm;
  const double fitted = launch_rows_mean_error(nm.group_launch_us_per_gpu, nm.group_launch_us_per_channel);
  double best_flat = 1;
  int best_flat_cus = 0;  // hundredths of a microsecond
  for (int cus = 350; cus <= 500; ++cus) {
    const double e = launch_rows_mean_error(cus / 100.0, 0);
    if (e < best_flat) {
      best_flat = e;
      best_flat_cus = cus;
    }
  }
  MESSAGE("mean error " << 100 * fitted << "% fitted; best flat floor " << best_flat_cus / 100.0
                        << " us a launch: " << 100 * best_flat << "%");
  CHECK(fitted <= 0.055);
  CHECK(best_flat >= 0.074);
  CHECK(best_flat_cus == 456);
}

TEST_CASE("2 and 4 x 8 H100 over 400G InfiniBand all_reduce, NCCL 2.26: NVLSTree with NVLS's loops in the node") {
  // NVIDIA/nccl-tests #309 (each file's header), one GPU a process. NVLSTree's node part runs NVLS's
  // loops (collective.cpp, nvls_loops): 2 nodes from 8 MiB within 17%, mean 8.4% (was 26-33% too
  // fast at 8-256 MiB with NVLS at its large-call rate), 4 nodes within 18% from 32 MiB and within
  // 1.5% from 1 GiB. From 2 GiB the 2-node run is 8.8% slower than modelled (the thread's NCCL
  // maintainer calls two-node results a flattering special case). The LL/LL128 tree below
  // NVLSTree's sizes runs at NCCL's mid-size correction of its bandwidth, LL at most at its
  // host-CPU ceiling (39 GB/s bus on 2 Intel-hosted nodes, 20.4 on more) and LL128 at most at
  // 36.7 / 29.0 GB/s on each of its 8 channels: 2 nodes from 1 MiB 11.1% -> 8.3% mean, 4 nodes
  // 17.2% -> 12.7% (below 1 MiB 24.8% -> 17.0%). Still too fast: 2 nodes 4-32 KiB by 15-20% (a
  // 5-8 us step over the 25 us latency that the run's 128 B rows do not have; its 512 KiB row,
  // slower than its own 1 MiB, 30%), 4 nodes 4-8 MiB by 27-33% (its 2 MiB row, slower than its own
  // 4 MiB, 50%); below 1 MiB the 8 B and 256 B rows are 3x their neighbours in both runs.
  const Errors two = compare("h100-2node-ib-all_reduce.txt", 2.0 * (1 << 30));
  CHECK(two.tail_worst <= 0.09);
  CHECK(two.big_worst <= 0.17);
  CHECK(two.big_mean <= 0.083);
  CHECK(two.small_mean <= 0.181);
  const Errors four = compare("h100-4node-ib-all_reduce.txt", 1 << 30);
  CHECK(four.tail_worst <= 0.015);
  CHECK(four.big_worst <= 0.51);
  CHECK(four.big_mean <= 0.127);
  CHECK(four.small_mean <= 0.171);
}

TEST_CASE("8 and 4 H100 of one node, NCCL 2.29, one GPU a process: all four ops, 32 MiB to 16 GiB") {
  // xxrjun/nccl-tests-cluster (each file's header): one run of all five nccl-tests binaries on
  // ten nodes of one cluster, one file per node and GPU count; cnode3-002's, transcribed whole.
  // The first single-node H100 all_to_all curve found: p2p's ramp (fitted on B200) holds every
  // size within 7% on 8 GPUs and 6% on 4. On 8 GPUs the rings are within 2.5% from 1 GiB; the
  // misses are NVLS's all_reduce at 32 MiB (14%, the together run's NVLS at -g 8 is 8% faster
  // than the model there) and reduce_scatter's 32 MiB (17%: the Simple ring's second slice a
  // step, a hop each, as in the together run's 32 MiB). On 4 GPUs the rings are 8-15% too fast
  // from 64 to 512 MiB. NVLS's all_reduce on 4 GPUs holds every size within 8.3% (was 11-12% too
  // fast from 512 MiB): each GPU moves S (1 + 1/n) each way through the switch, so 4 GPUs run at
  // 0.9 of the 8-GPU rate, and the pipeline's fill, like its hand-offs, is so much a rank.
  // Each held to its mean and worst error, its worst from `from` bytes up (tail), and the sizes
  // within 10% it keeps.
  struct Held {
    const char* file;
    double from, mean, worst, tail;
    int misses;  // sizes outside 10% at most
  };
  const Held held[] = {
      {"1x8-all_reduce", 1 << 30, 0.05, 0.142, 0.007, 1},      {"1x8-all_gather", 1 << 30, 0.028, 0.087, 0.025, 0},
      {"1x8-reduce_scatter", 1 << 30, 0.043, 0.173, 0.033, 1}, {"1x8-all_to_all", 1 << 30, 0.039, 0.069, 0.044, 0},
      {"1x4-all_reduce", 512 << 20, 0.035, 0.083, 0.039, 0},   {"1x4-all_gather", 1 << 30, 0.078, 0.139, 0.07, 3},
      {"1x4-reduce_scatter", 1 << 30, 0.08, 0.153, 0.078, 4},  {"1x4-all_to_all", 1 << 30, 0.016, 0.061, 0.013, 0}};
  for (const Held& h : held) {
    const Errors e = compare(std::string("h100-xxrjun-") + h.file + ".txt", h.from);
    CHECK(e.big_mean <= h.mean);
    CHECK(e.big_worst <= h.worst);
    CHECK(e.tail_worst <= h.tail);
    CHECK(e.within >= e.sizes - h.misses);
  }
}

TEST_CASE("NVLS's traffic: 4 GPUs of a switch all-reduce at 0.9 of the 8-GPU rate, as the published runs do") {
  // Each GPU moves S (1 + 1/n) each way through the switch: 1.125 S on 8 GPUs, 1.25 S on 4. The
  // same cluster's 16 GiB all_reduce (h100-xxrjun-1x8 and -1x4): 62,340.7 us on 8, 70,128.7 on 4,
  // a ratio of 1.1249; the model's 1.111 (1.25 / 1.125, its fill and hand-offs aside).
  const Curve eight = load("h100-xxrjun-1x8-all_reduce.txt"), four = load("h100-xxrjun-1x4-all_reduce.txt");
  const double published = four.rows.back().time_us / eight.rows.back().time_us;
  CHECK(published == rel_approx(1.1249, 1e-4));
  // Each run's time on its own ranks (the curve files' presets and GPUs), NVLS as the tuner picks.
  auto model_us = [](const Curve& c) {
    CurveCall k = curve_call(c, spec_of(c));
    k.call.bytes = c.rows.back().bytes;
    k.opt.algo = CollectiveAlgo::nvls;
    return estimate_collective(k.cl, k.call, k.opt).time.micros();
  };
  const double t8 = model_us(eight), t4 = model_us(four);
  MESSAGE("16 GiB on 4 GPUs over 8: published " << published << ", model " << t4 / t8);
  CHECK(t4 / t8 == rel_approx(published, 0.015));
  CHECK(t4 / t8 == rel_approx(1.25 / 1.125, 0.005));
}

TEST_CASE("10 nodes of 1, 2, 4 and 8 H100, NCCL 2.29: rings on the NICs within 10% at 1 and 2 GPUs a node") {
  // The same run on ten nodes (each file's header). The fabric is not stated; with one GPU a node
  // every ring step crosses the network and all_reduce reaches 48.9 GB/s busbw, one 400 Gb/s NIC
  // at nic_efficiency 0.96 (48.0): the dgx-h100 preset's. There all_reduce, all_gather and
  // reduce_scatter hold every size within 10%; all_to_all is 7-8% too fast from 256 MiB (44.1-44.8
  // against 48.0 GB/s) and 18% at 32 MiB. On 80 ranks from 1 GiB all_gather and reduce_scatter
  // are within 9.3%, all_to_all within 5.4% from 256 MiB and NVLSTree's all_reduce 16% too fast (the run peaks
  // at 345 GB/s at 1 GiB and settles at 314-321, under the 4-node #309 run's 366); below 1 GiB all
  // four run 1.3-2.4x the model (all_gather's 32 MiB takes 682 us on 80 GPUs and 722 on 10), a
  // floor that no modelled latency reaches. With 2 and 4 GPUs a node the rings scale with the NICs
  // (97.8 and 195.6 GB/s busbw at 16 GiB, 2 and 4 x 48.9), 2-5% above the model's 0.96 of line rate.
  // One and two GPUs a node: every size of the three rings within 10%.
  for (const char* g : {"10x1", "10x2"}) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
      const Errors e = compare(std::string("h100-xxrjun-") + g + "-" + op + ".txt");
      CHECK(e.big_worst <= 0.0992);
      CHECK(e.big_mean <= 0.049);
      CHECK(e.within == e.sizes);
    }
  }
  // The rest, each held to its worst error from `from` bytes up (tail) and from 32 MiB: all_to_all
  // on 1 and 2 GPUs a node within 7.2% and 6.4% from 256 MiB and 1 GiB; four a node within 6.6%
  // from 1 GiB (the model's NICs at 0.96 of 50 GB/s, the run's at 0.98), 19-33% too fast at 32
  // MiB; 80 ranks as above.
  struct Held {
    const char* file;
    double from, tail, worst;
  };
  const Held held[] = {{"10x1-all_to_all", 256 << 20, 0.072, 0.178},   {"10x2-all_to_all", 1 << 30, 0.064, 0.197},
                       {"10x4-all_reduce", 1 << 30, 0.066, 0.341},     {"10x4-all_gather", 1 << 30, 0.066, 0.194},
                       {"10x4-reduce_scatter", 1 << 30, 0.066, 0.265}, {"10x4-all_to_all", 1 << 30, 0.066, 0.332},
                       {"10x8-all_reduce", 1 << 30, 0.163, 0.56},      {"10x8-all_gather", 1 << 30, 0.093, 0.59},
                       {"10x8-reduce_scatter", 1 << 30, 0.091, 0.594}, {"10x8-all_to_all", 256 << 20, 0.054, 0.329}};
  for (const Held& h : held) {
    const Errors e = compare(std::string("h100-xxrjun-") + h.file + ".txt", h.from);
    CHECK(e.tail_worst <= h.tail);
    CHECK(e.big_worst <= h.worst);
  }
}

TEST_CASE("10-node all_to_all runs: a fixed cost plus the remote bytes at one rate fits each curve within 5%") {
  // What docs/validation-network.md says of these runs, reproduced from the files: each GPU sends
  // (n - g) / n of its buffer off its node; least squares on the relative error of t = a + remote /
  // rate over the ten sizes. The runs give a = 114-337 us and 45-46.4 GB/s a GPU; the model has a
  // multi-node all_to_all latency of about 22 us and moves 48 GB/s (nic_efficiency 0.96 of 50).
  struct Expect {
    int g;
    double a_lo_us, a_hi_us;
  };
  for (const Expect x : {Expect{1, 100, 130}, Expect{2, 120, 150}, Expect{4, 320, 350}, Expect{8, 310, 340}}) {
    const Curve c = load("h100-xxrjun-10x" + std::to_string(x.g) + "-all_to_all.txt");
    const double n = 10.0 * x.g;
    // Normal equations of min sum ((a + b r_i) / t_i - 1)^2, b the seconds per byte.
    double s11 = 0, s12 = 0, s22 = 0, y1 = 0, y2 = 0;
    for (const Row& r : c.rows) {
      const double t = r.time_us * 1e-6, rem = r.bytes * (n - x.g) / n;
      s11 += 1 / (t * t);
      s12 += rem / (t * t);
      s22 += rem * rem / (t * t);
      y1 += 1 / t;
      y2 += rem / t;
    }
    const double det = s11 * s22 - s12 * s12;
    const double a = (y1 * s22 - y2 * s12) / det, b = (s11 * y2 - s12 * y1) / det;
    double worst = 0;
    for (const Row& r : c.rows) {
      const double t = r.time_us * 1e-6;
      worst = std::max(worst, std::fabs((a + b * r.bytes * (n - x.g) / n) / t - 1));
    }
    MESSAGE("10x" << x.g << " all_to_all: a " << a * 1e6 << " us, " << 1e-9 / b << " GB/s a GPU, worst " << worst);
    CAPTURE(x.g);
    CHECK(worst <= 0.05);
    CHECK(a * 1e6 >= x.a_lo_us);
    CHECK(a * 1e6 <= x.a_hi_us);
    CHECK(1e-9 / b >= 44.5);
    CHECK(1e-9 / b <= 46.5);
  }
}
