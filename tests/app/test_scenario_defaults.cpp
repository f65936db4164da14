// Scenario defaults, units and range checks the mutation run (scripts/mutate.sh) found
// unguarded; each is documented in docs/scenarios.md.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"

using namespace ctwin;
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
  CHECK(s.cluster.intra_gbps == 450);
  CHECK(s.cluster.nic_gbps == 50);  // NDR InfiniBand, 400 Gb/s
  CHECK(s.cluster.intra_latency_us == 0.6);
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
