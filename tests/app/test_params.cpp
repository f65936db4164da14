// The parameter tables: docs/scenarios.md carries `ctwin params --markdown`, the declared
// defaults are the structs' own, and every enum name parses back to its value.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scenario.hpp"
#include "sim/error.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/training_params.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ParamDecl& decl(std::span<const ParamDecl> table, std::string_view key) {
  for (const auto& d : table) {
    if (d.key == key) return d;
  }
  FAIL("no key " << std::string(key));
  return table.front();
}

template <class E, std::size_t N>
void check_round_trip(const NameTable<E, N>& t) {
  for (std::size_t i = 0; i < N; ++i) {
    CAPTURE(std::string(t.names[i]));
    REQUIRE(t.parse(t.names[i]).has_value());
    CHECK(std::string(t.name(*t.parse(t.names[i]))) == std::string(t.names[i]));
  }
  CHECK_FALSE(t.parse("no such name").has_value());
}

}  // namespace

TEST_CASE("docs/scenarios.md carries `ctwin params --markdown` between its markers") {
  const std::string doc = slurp(ctwin::test::source_dir() + "/docs/scenarios.md");
  const std::string begin = "<!-- BEGIN ctwin params --markdown -->\n";
  const std::string end = "<!-- END ctwin params --markdown -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string section = doc.substr(b + begin.size(), e - b - begin.size());
  // Regenerate with: build/ctwin params --markdown, pasted between the markers.
  CHECK(section == params_markdown(scenario_param_tables()));
}

TEST_CASE("the declared defaults are the structs' defaults") {
  const TrainingConfig t;
  CHECK(decl(training_params, "micro_batch").def == t.micro_batch);
  CHECK(decl(training_params, "overlap_grad_reduce").def == (t.overlap_grad_reduce ? 1 : 0));
  CHECK(decl(training_params, "dropout").def == (t.dropout ? 1 : 0));
  CHECK(decl(training_params, "grad_bucket_mb").def * 1024 * 1024 == t.grad_bucket_bytes);
  CHECK(decl(training_params, "framework_overhead_gb").def * 1024 * 1024 * 1024 == t.framework_overhead_bytes);
  CHECK(decl(training_params, "comm_buffer_gb").def * 1024 * 1024 * 1024 == t.comm_buffer_bytes);
  CHECK(decl(training_params, "allocator_reserve_fraction").def == t.allocator_reserve_fraction);
  CHECK(decl(training_params, "overlap_slowdown").def == t.overlap_slowdown);
  CHECK(decl(training_params, "moe_load_imbalance").def == t.moe_load_imbalance);
  CHECK(moe_dispatcher_names.parse(decl(training_params, "moe_dispatcher").def_name) == t.moe_dispatcher);
  CHECK(recompute_names.parse(decl(training_params, "recompute").def_name) == t.recompute);
  CHECK(attention_names.parse(decl(training_params, "attention").def_name) == t.attention);
  CHECK(cross_entropy_names.parse(decl(training_params, "cross_entropy").def_name) == t.cross_entropy);
  CHECK(decl(training_params, "logit_metric_passes").def == t.logit_metric_passes);
  const Parallelism p;
  for (const char* k : {"tp", "pp", "cp", "ep", "virtual_stages"}) CHECK(decl(parallelism_params, k).def == 1);
  CHECK(decl(parallelism_params, "zero_stage").def == p.zero_stage);
  CHECK(schedule_names.parse(decl(parallelism_params, "schedule").def_name) == p.schedule);
  CHECK(cp_comm_names.parse(decl(parallelism_params, "cp_comm").def_name) == p.cp_comm);
  CHECK(decl(parallelism_params, "order").def_name == p.order);
  const Sharding sh;
  CHECK(sharding_framework_names.parse(decl(sharding_params, "framework").def_name) == sh.framework);
  CHECK(backward_prefetch_names.parse(decl(sharding_params, "backward_prefetch").def_name) == sh.backward_prefetch);
  CHECK(decl(sharding_params, "limit_all_gathers").def == (sh.limit_all_gathers ? 1 : 0));
  CHECK(decl(sharding_params, "reshard_after_forward").def == (sh.reshard_after_forward ? 1 : 0));
  CHECK(decl(sharding_params, "stage3_prefetch_bucket_size").def == sh.prefetch_bucket_elements);
  CHECK(decl(sharding_params, "stage3_param_persistence_threshold").def == sh.persistence_threshold_elements);
  CHECK(decl(sharding_params, "reduce_bucket_size").def == sh.reduce_bucket_elements);
  CHECK(decl(sharding_params, "overlap_comm").def == (sh.overlap_comm ? 1 : 0));
  CHECK(decl(sharding_params, "collective_overhead_us").def * 1e-6 == rel_approx(sh.collective_overhead_s, 1e-12));
  const Precision pr;
  CHECK(dtype_names.parse(decl(precision_params, "compute").def_name) == pr.compute);
  CHECK(decl(precision_params, "weight_bytes").def == pr.weight_bytes);
  CHECK(decl(precision_params, "grad_bytes").def == pr.grad_bytes);
  CHECK(decl(precision_params, "master_bytes").def == pr.master_bytes);
  CHECK(decl(precision_params, "optimizer_state_bytes").def == pr.optimizer_state_bytes);
  const NoiseSpec n;
  CHECK(decl(noise_params, "steps").def == n.steps);
  CHECK(decl(noise_params, "straggler_slowdown").def == n.straggler_slowdown);
  const ClusterSpec c;
  CHECK(decl(cluster_params, "nodes_per_pod").def == c.nodes_per_pod);
  CHECK(decl(cluster_params, "spines").def == c.spines);
  CHECK(decl(cluster_params, "core_switches").def == c.core_switches);
  CHECK(decl(cluster_params, "oversubscription").def == c.oversubscription);
  CHECK(decl(cluster_params, "nic_efficiency").def == c.nic_efficiency);
  CHECK(decl(cluster_params, "net_overhead_us").def == c.net_overhead_us);
  CHECK(decl(cluster_params, "sockets").def == c.sockets);
  CHECK(decl(cluster_params, "gpus_per_pcie_switch").def == c.gpus_per_pcie_switch);
}

TEST_CASE("every enum name table parses each of its names back to the value it names") {
  check_round_trip(recompute_names);
  check_round_trip(schedule_names);
  check_round_trip(attention_names);
  check_round_trip(cross_entropy_names);
  check_round_trip(cp_comm_names);
  check_round_trip(dtype_names);
  check_round_trip(intra_fabric_names);
  check_round_trip(inter_fabric_names);
  check_round_trip(activation_names);
  check_round_trip(norm_names);
  check_round_trip(position_names);
  check_round_trip(fidelity_names);
  check_round_trip(job_kind_names);
  CHECK(std::string(to_string(PipelineSchedule::one_f_one_b)) == "1f1b");
  CHECK(std::string(to_string(InterNodeFabric::fat_tree3)) == "fat_tree3");
}

TEST_CASE("a key's bounds and default come from its table") {
  const std::string base = R"({"name": "t", "cluster": {"preset": "dgx-h100"}, "model": "llama3-8b",
    "training": {"global_batch": 8, "seq_len": 1024)";
  // No /kind: training. No micro_batch: the table's default.
  const Scenario s = parse_scenario(base + "}}", "t.json");
  CHECK(s.kind == JobKind::training);
  CHECK(training_job(s).training.micro_batch == decl(training_params, "micro_batch").def);
  try {
    parse_scenario(base + R"(, "parallelism": {"virtual_stages": 1025}}})", "t.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.path == "/training/parallelism/virtual_stages");
    CHECK(e.expected == "an integer >= 1 and <= " +
                            std::to_string(static_cast<long long>(decl(parallelism_params, "virtual_stages").max)));
  }
}

TEST_CASE("bandwidths with units: bits and bytes exactly, decimal prefixes as datasheets write them") {
  // Hand conversions: 400 Gb/s = 400e9 bits/s / 8 = 50e9 bytes/s = 50 GB/s.
  CHECK(parse_bandwidth("400 Gb/s").value() == rel_approx(50e9, 1e-15));
  CHECK(parse_bandwidth("400 Gbit/s").value() == rel_approx(50e9, 1e-15));
  CHECK(parse_bandwidth("50 GB/s").value() == rel_approx(50e9, 1e-15));
  CHECK(parse_bandwidth("50 GByte/s").value() == rel_approx(50e9, 1e-15));
  CHECK(parse_bandwidth("50GB/s").value() == rel_approx(50e9, 1e-15));
  CHECK(parse_bandwidth("200 Gb/s").value() == rel_approx(25e9, 1e-15));    // a ConnectX-7 port at HDR
  CHECK(parse_bandwidth("1.8 TB/s").value() == rel_approx(1.8e12, 1e-15));  // NVLink 5 per GPU
  CHECK(parse_bandwidth("100 Mb/s").value() == rel_approx(12.5e6, 1e-15));
  CHECK(parse_bandwidth("8 kbit/s").value() == rel_approx(1e3, 1e-15));
  for (const char* bad : {"400", "400 Gbps", "400 GiB/s", "400 gb/s", "Gb/s", "-1 GB/s", "400 Gb/h"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_bandwidth(bad).has_value());
  }
}

TEST_CASE("a GB/s key takes a bandwidth with its unit, the same as the number in GB/s") {
  const auto cluster = [](const std::string& nic) {
    const std::string text = R"({"name": "t", "cluster": {"preset": "dgx-h100", "nic_gbyte_per_s": )" + nic +
                             R"(}, "model": "llama3-8b", "training": {"global_batch": 8, "seq_len": 1024}})";
    return parse_scenario(text, "t.json").cluster;
  };

  CHECK(cluster("\"400 Gb/s\"").nic_gbyte_per_s == rel_approx(50, 1e-15));
  CHECK(cluster("\"25 GB/s\"").nic_gbyte_per_s == rel_approx(25, 1e-15));
  CHECK(cluster("12.5").nic_gbyte_per_s == rel_approx(12.5, 1e-15));  // a number stays GB/s
  CHECK(cluster("\"3.2 Tb/s\"").nic_gbyte_per_s == rel_approx(400, 1e-15));
  try {
    (void)cluster("\"400 Gbps\"");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.path == "/cluster/nic_gbyte_per_s");
    CHECK(std::string(e.what()).find("400 Gb/s") != std::string::npos);
  }
  CHECK_THROWS_AS((void)cluster("\"0 GB/s\""), InputError);  // bounds as for the number
}
