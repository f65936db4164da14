// Scenario defaults, units and range checks the mutation run (scripts/mutate.sh) found
// unguarded; each is documented in docs/scenarios.md.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

json base() {
  return json::parse(R"({
    "name": "t", "kind": "training",
    "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b",
    "training": {"micro_batch": 1, "global_batch": 16, "seq_len": 4096,
                 "parallelism": {"tp": 2, "pp": 1, "dp": 4}}
  })");
}

}  // namespace

TEST_CASE("training defaults: gradient reduction overlaps, 1 GiB framework overhead, 0.5 GiB comm buffers") {
  const Scenario s = parse_scenario(base().dump(), "defaults.json");
  CHECK(training_job(s).training.overlap_grad_reduce);
  CHECK(training_job(s).training.grad_bucket_bytes == 25 * 1024.0 * 1024.0);
  CHECK(training_job(s).training.framework_overhead_bytes == 1.0 * kGiB);
  CHECK(training_job(s).training.comm_buffer_bytes == 0.5 * kGiB);
}

TEST_CASE("the *_gb and *_mb training keys are binary units (GiB, MiB)") {
  json j = base();
  j["training"]["framework_overhead_gb"] = 2.5;
  j["training"]["comm_buffer_gb"] = 3;
  j["training"]["grad_bucket_mb"] = 40;
  const Scenario s = parse_scenario(j.dump(), "units.json");
  CHECK(training_job(s).training.framework_overhead_bytes == 2.5 * kGiB);
  CHECK(training_job(s).training.comm_buffer_bytes == 3 * kGiB);
  CHECK(training_job(s).training.grad_bucket_bytes == 40 * 1024.0 * 1024.0);
}

TEST_CASE("byte sizes on the command line are powers of 1024, as nccl-tests reads them") {
  CHECK(parse_bytes("8", "--bytes") == 8);
  CHECK(parse_bytes("64K", "--bytes") == 64 * 1024.0);
  CHECK(parse_bytes("4M", "--bytes") == 4 * 1024.0 * 1024.0);
  CHECK(parse_bytes("16MB", "--bytes") == 16 * 1024.0 * 1024.0);
  CHECK(parse_bytes("1MiB", "--bytes") == 1024.0 * 1024.0);
  CHECK(parse_bytes("8G", "--bytes") == 8 * kGiB);
  CHECK(parse_bytes("1T", "--bytes") == 1024 * kGiB);
  CHECK_THROWS_AS(parse_bytes("4Q", "--bytes"), InputError);
}

TEST_CASE("a cluster without a preset gets NDR NICs and NCCL's NVLink figures") {
  json j = base();
  j["cluster"] = json::parse(R"({"gpu": "H100-SXM", "gpus_per_node": 8, "nodes": 1})");
  const Scenario s = parse_scenario(j.dump(), "custom.json");
  CHECK(s.cluster.name == "custom");
  CHECK(s.cluster.intra == IntraNodeFabric::nvswitch);
  CHECK(s.cluster.intra_gbyte_per_s == 450);
  CHECK(s.cluster.nic_gbyte_per_s == 50);  // NDR InfiniBand, 400 Gb/s
  CHECK(s.cluster.intra_latency_us == 0.6);
}

// NCCL's per-generation figures, listed by hand (as docs/profiles.md cites them): effective
// NVLink rate per link over line rate in src/graph/topo.h (SM80_NVLINK_BW 20.0 of 25 GB/s,
// SM90_NVLINK_BW 20.6 of 25), PCI_BW 12 of 16 GB/s; LL hop latencies in src/graph/tuning.cc
// hwLat (NVLink 0.6 us, PCI 1.0, NET 2.7); NVLS ~275 of 450 GB/s on NVSwitch 3 (nccl-tests #212),
// none before; NIC transport 48 of 50 GB/s (nccl-tests #290).
TEST_CASE("a cluster without a preset takes its GPU generation's NCCL link figures") {
  struct Case {
    const char* gpu;
    IntraNodeFabric intra;
    double intra_eff, intra_lat, nvls;
  };
  const Case cases[] = {
      {"A100-SXM-80GB", IntraNodeFabric::nvswitch, 20.0 / 25, 0.6, 0.0},
      {"H100-SXM", IntraNodeFabric::nvswitch, 20.6 / 25, 0.6, 275.0 / 450},
      {"L40S", IntraNodeFabric::pcie, 12.0 / 16, 1.0, 0.0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.gpu);
    json j = base();
    j["cluster"] = {{"gpu", c.gpu}, {"gpus_per_node", 8}, {"nodes", 2}};
    j["training"]["parallelism"]["dp"] = 8;
    j["training"]["global_batch"] = 32;
    const Scenario s = parse_scenario(j.dump(), "custom.json");
    CHECK(s.cluster.intra == c.intra);
    CHECK(s.cluster.intra_efficiency == rel_approx(c.intra_eff, 1e-15));
    CHECK(s.cluster.intra_latency_us == rel_approx(c.intra_lat, 1e-15));
    CHECK(s.cluster.nvls_efficiency == rel_approx(c.nvls, 1e-15));
    CHECK(s.cluster.inter_latency_us == rel_approx(2.7, 1e-15));
    CHECK(s.cluster.nic_efficiency == rel_approx(48.0 / 50, 1e-15));
  }
}

TEST_CASE("a custom cluster's link keys the user wrote win over its generation's figures") {
  json j = base();
  j["cluster"] = json::parse(R"({"gpu": "H100-SXM", "gpus_per_node": 8, "nodes": 1,
      "intra_efficiency": 0.9, "inter_latency_us": 3.0, "intra_latency_us": 0.7,
      "nvls_efficiency": 0.5, "nic_efficiency": 0.9})");
  const Scenario s = parse_scenario(j.dump(), "custom.json");
  CHECK(s.cluster.intra_efficiency == 0.9);
  CHECK(s.cluster.inter_latency_us == 3.0);
  CHECK(s.cluster.intra_latency_us == 0.7);
  CHECK(s.cluster.nvls_efficiency == 0.5);
  CHECK(s.cluster.nic_efficiency == 0.9);
  // A fabric the user names picks that fabric's figures: PCIe on an NVLink GPU.
  j["cluster"] = json::parse(R"({"gpu": "H100-SXM", "gpus_per_node": 8, "nodes": 1, "intra": "pcie"})");
  const Scenario p = parse_scenario(j.dump(), "custom.json");
  CHECK(p.cluster.intra_efficiency == rel_approx(12.0 / 16, 1e-15));
  CHECK(p.cluster.intra_latency_us == rel_approx(1.0, 1e-15));
  CHECK(p.cluster.nvls_efficiency == 0.0);
}

TEST_CASE("context parallelism needs seq_len in 2*cp load-balanced chunks") {
  json j = base();
  j["training"]["parallelism"] = json::parse(R"({"tp": 2, "cp": 2, "dp": 2})");
  j["training"]["seq_len"] = 4096;
  CHECK_NOTHROW(parse_scenario(j.dump(), "cp.json"));
  j["training"]["seq_len"] = 4098;  // divisible by cp = 2, not by 2*cp = 4
  try {
    parse_scenario(j.dump(), "cp.json");
    FAIL("seq_len 4098 with cp 2 was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/training/parallelism/cp") != std::string::npos);
  }
}

TEST_CASE("/profile sets a preset cluster's link figures; keys written under /cluster still win") {
  json j = base();
  j["profile"] = "A100";  // on a DGX H100: NCCL's SM80 NVLink rate (topo.h 20.0 of 25 GB/s), no NVLS
  Scenario s = parse_scenario(j.dump(), "profile.json");
  REQUIRE(s.profile.has_value());
  CHECK(s.profile->name == "A100");
  CHECK(s.cluster.intra_efficiency == rel_approx(20.0 / 25, 1e-15));
  CHECK(s.cluster.nvls_efficiency == 0.0);
  j["cluster"]["intra_efficiency"] = 0.9;
  s = parse_scenario(j.dump(), "profile.json");
  CHECK(s.cluster.intra_efficiency == 0.9);
  j.erase("profile");
  s = parse_scenario(j.dump(), "profile.json");
  CHECK_FALSE(s.profile.has_value());
}

TEST_CASE("/training/overlap_slowdown defaults to the profile's measured value; the scenario's own wins") {
  // No profile key: the built-in profiles carry 0 (no interference measured).
  CHECK(training_job(parse_scenario(base().dump(), "p.json")).training.overlap_slowdown == 0);
  const auto dir = std::filesystem::temp_directory_path() / ("ctwin_overlap_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "measured.json") << R"({"name": "measured", "compute": {"overlap_slowdown": 0.25}})";
  json j = base();
  j["profile"] = {{"file", (dir / "measured.json").string()}};
  CHECK(training_job(parse_scenario(j.dump(), "p.json")).training.overlap_slowdown == 0.25);
  j["training"]["overlap_slowdown"] = 0.1;
  CHECK(training_job(parse_scenario(j.dump(), "p.json")).training.overlap_slowdown == 0.1);
  std::filesystem::remove_all(dir);
}
