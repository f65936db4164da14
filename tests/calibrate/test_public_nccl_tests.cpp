// Issue 16's public-data check: calibrate from a published nccl-tests curve's one size range and
// predict the rest of it. The measured times are the published ones (tests/topology/data/
// nccl-tests/, each file's header gives its source); the errors found are in docs/calibration.md.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "topology/catalog_json.hpp"
#include "topology/network.hpp"

#include "test_paths.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::calibrate;

namespace {

// The data files' "size time_us busbw" rows as an all_reduce over `ranks` GPUs.
std::vector<CollectiveMeasurement> published(const std::string& name, int ranks) {
  std::ifstream in(ctwin::test::source_dir() + "/tests/topology/data/nccl-tests/" + name);
  REQUIRE(in);
  std::vector<CollectiveMeasurement> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    double size = 0, us = 0, busbw = 0;
    ls >> size >> us >> busbw;
    CollectiveMeasurement c;
    c.op = CollectiveOp::all_reduce;
    for (int r = 0; r < ranks; ++r) c.ranks.push_back(r);
    c.bytes = size;
    c.stats = stats_of({us * 1e-6});
    out.push_back(c);
  }
  return out;
}

struct Split {
  std::vector<CollectiveMeasurement> fit, held;
};
Split split_at(const std::vector<CollectiveMeasurement>& all, double lo, double hi, double held_from) {
  Split s;
  for (const auto& c : all) {
    if (c.bytes >= lo && c.bytes <= hi) s.fit.push_back(c);
    if (c.bytes >= held_from) s.held.push_back(c);
  }
  return s;
}

// Mean and max |error| of the profile's analytical times on held-out sizes.
std::pair<double, double> held_out_error(const std::vector<CollectiveMeasurement>& held, const ClusterSpec& spec,
                                         const Profile& p) {
  ClusterSpec s = spec;
  apply_profile(p, s);
  const Cluster cl = build_cluster(s);
  double sum = 0, worst = 0;
  for (const auto& c : held) {
    CollectiveCall call{c.op, {}, c.bytes};
    for (int r : c.ranks) call.ranks.push_back(GpuId(static_cast<std::uint32_t>(r)));
    const double e = std::fabs(analytical_collective_time(cl, call, {}).seconds() / c.stats.median_s - 1);
    sum += e;
    worst = std::max(worst, e);
  }
  return {sum / static_cast<double>(held.size()), worst};
}

}  // namespace

struct Outcome {
  std::pair<double, double> before, after;  // held-out (mean, max) |error|: shipped profile, fitted
};

// Fits the preset's link keys on [lo, hi] bytes of `file` and predicts the sizes from `held`.
Outcome link_experiment(const std::string& file, const char* preset, double lo, double hi, double held) {
  const Split s = split_at(published(file, 8), lo, hi, held);
  ClusterSpec spec;
  REQUIRE(preset_cluster(preset, 1, builtin_gpus(), spec));
  Profile p = builtin_profile(spec.gpu.name);
  Outcome o;
  o.before = held_out_error(s.held, spec, p);
  REQUIRE(fit_links(s.fit, spec, p, "test").size() == 1);
  o.after = held_out_error(s.held, spec, p);
  MESSAGE(file << " fit " << lo << "-" << hi << " B, held-out from " << held << " B: mean |error| "
               << 100 * o.before.first << "% -> " << 100 * o.after.first << "%, max " << 100 * o.before.second
               << "% -> " << 100 * o.after.second << "%");
  return o;
}

TEST_CASE("published HGX B200 all_reduce: link fit on 1 MiB-1 GiB predicts 2-8 GiB") {
  // tests/topology/data/nccl-tests/hgx-b200-all_reduce.txt (Vultr B200 POC summary, section 10).
  const Outcome o = link_experiment("hgx-b200-all_reduce.txt", "dgx-b200", 1 << 20, 1 << 30, 2.0 * (1 << 30));
  CHECK(o.after.second < 0.2);  // 15.1% when written (docs/calibration.md)
  // Fitted on the ramp only (1-64 MiB): NVLS's loops now explain the ramp, so the fitted rate
  // carries to 128 MiB-8 GiB (max 10.3% when written; 41% before the NVLS ramp, docs/calibration.md).
  const Outcome ramp = link_experiment("hgx-b200-all_reduce.txt", "dgx-b200", 1 << 20, 64 << 20, 128 << 20);
  CHECK(ramp.after.second < 0.12);
}

TEST_CASE("published DGX A100 all_reduce: link fit on 1-32 MiB predicts 64-128 MiB") {
  // tests/topology/data/nccl-tests/a100-sxm4-80gb-all_reduce.txt (one process driving 8 GPUs).
  const Outcome o = link_experiment("a100-sxm4-80gb-all_reduce.txt", "dgx-a100", 1 << 20, 32 << 20, 64 << 20);
  CHECK(o.after.second < 0.3);  // 25.6% when written (docs/calibration.md)
}

TEST_CASE("published HGX B200 all_reduce: an alpha-beta fit on 128 MiB-1 GiB predicts 2-8 GiB") {
  const auto all = published("hgx-b200-all_reduce.txt", 8);
  const Split s = split_at(all, 128 << 20, 1 << 30, 2.0 * (1 << 30));
  const auto fits = fit_alpha_beta_groups(s.fit, 8);
  REQUIRE(fits.size() == 1);
  double alpha = 0, bw = 0;
  for (const auto& [k, v] : fits[0].values) {
    if (k == "alpha_us") alpha = v * 1e-6;
    if (k == "algbw_gbyte_per_s") bw = v * 1e9;
  }
  double worst = 0;
  for (const auto& c : s.held) worst = std::max(worst, std::fabs((alpha + c.bytes / bw) / c.stats.median_s - 1));
  MESSAGE("B200 alpha-beta held-out max |error| " << 100 * worst << "%");
  CHECK(worst < 0.25);
}
