// Bandwidth keys carry their unit: nic_gbit_per_s as NIC datasheets write it, *_gbyte_per_s as
// nccl-tests prints it, a string with its unit in any of them, and the old *_gbps keys (GB/s)
// still read with a deprecation warning.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "tolerance.hpp"
#include "topology/cluster.hpp"
#include "topology/cluster_json.hpp"
#include "topology/collective.hpp"

using namespace ctwin;
using ctwin::test::cli;
using ctwin::test::rel_approx;
using ctwin::test::Run;
using ctwin::test::temp_dir;
using nlohmann::json;

namespace {

// A two-node DGX H100 scenario whose /cluster gets `extra`.
json scenario_with(const json& extra) {
  json j = json::parse(R"({
    "name": "units", "kind": "training",
    "cluster": {"preset": "dgx-h100", "nodes": 2},
    "model": "llama3.2-1b",
    "training": {"micro_batch": 1, "global_batch": 16, "seq_len": 1024,
                 "parallelism": {"tp": 1, "pp": 1, "dp": 16}}
  })");
  j["cluster"].update(extra);
  return j;
}

Scenario load(const json& extra) { return parse_scenario(scenario_with(extra).dump(), "units.json"); }

InputError error_of(const json& extra) {
  try {
    load(extra);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError for " << extra.dump());
  return InputError("", "", "");
}

// As plain JSON (key order aside), for comparing clusters.
json as_json(const ClusterSpec& c) { return json(cluster_to_json(c)); }

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a 200 Gb/s NIC is 25 GB/s however it is written, and only the old key warns") {
  const Scenario gbit = load({{"nic_gbit_per_s", 200}});
  CHECK(gbit.cluster.nic_gbyte_per_s == 25.0);  // ClusterSpec keeps GB/s
  CHECK(gbit.warnings.empty());
  const json want = as_json(gbit.cluster);
  CHECK(want["nic_gbit_per_s"] == 200.0);
  for (const json& same :
       {json{{"nic_gbyte_per_s", 25}}, json{{"nic_gbit_per_s", "200 Gb/s"}}, json{{"nic_gbyte_per_s", "200 Gbit/s"}},
        json{{"nic_gbit_per_s", "25 GB/s"}}, json{{"nic_gbit_per_s", "0.2 Tb/s"}}}) {
    CAPTURE(same.dump());
    const Scenario sc = load(same);
    CHECK(as_json(sc.cluster) == want);
    CHECK(sc.warnings.empty());
  }
  const Scenario old = load({{"nic_gbps", 25}});
  CHECK(as_json(old.cluster) == want);
  REQUIRE(old.warnings.size() == 1);
  CHECK(old.warnings[0] ==
        "/cluster/nic_gbps is deprecated (GB/s, easily mistaken for Gb/s): 25 GB/s = 200 Gb/s; write "
        "\"nic_gbit_per_s\": 200");
}

TEST_CASE("every old *_gbps key keeps its GB/s meaning and names its new key in the warning") {
  const json extra = {{"preset", "h100-pcie"}, {"intra", "pcie"}};
  for (const char* k : {"intra", "pcie_uplink", "inter_socket", "nvlink_pair"}) {
    CAPTURE(k);
    json neu = extra, old = extra;
    neu[std::string(k) + "_gbyte_per_s"] = 12.5;
    old[std::string(k) + "_gbps"] = 12.5;
    const Scenario a = load(neu), b = load(old);
    CHECK(as_json(a.cluster) == as_json(b.cluster));
    CHECK(as_json(a.cluster)[std::string(k) + "_gbyte_per_s"] == 12.5);
    CHECK(a.warnings.empty());
    REQUIRE(b.warnings.size() == 1);
    CHECK(b.warnings[0] == "/cluster/" + std::string(k) +
                               "_gbps is deprecated (GB/s, easily mistaken for Gb/s): 12.5 GB/s = 100 Gb/s; write \"" +
                               k + "_gbyte_per_s\": 12.5");
  }
}

TEST_CASE("a GPU's bandwidths: new keys, strings with units, and the old keys with a warning") {
  json sc = scenario_with(json::object());
  sc["catalog"]["gpus"]["H100-SXM"] = {{"hbm_gbps", 3000}};  // onto the builtin's hbm_gbyte_per_s
  sc["catalog"]["gpus"]["X1"] = {{"bf16_tflops", 100},
                                 {"hbm_bytes", 1e10},
                                 {"hbm_gbyte_per_s", "2 TB/s"},
                                 {"nvlink_gbyte_per_s", 0},
                                 {"pcie_gbps", 64}};
  const Scenario s = parse_scenario(sc.dump(), "units.json");
  CHECK(s.cluster.gpu.hbm_gbyte_per_s == 3000.0);
  REQUIRE(s.warnings.size() == 2);
  CHECK(mentions(s.warnings[0] + s.warnings[1],
                 "/catalog/gpus/H100-SXM/hbm_gbps is deprecated (GB/s, easily mistaken for Gb/s): 3000 GB/s = 24000 "
                 "Gb/s; write \"hbm_gbyte_per_s\": 3000"));
  CHECK(mentions(s.warnings[0] + s.warnings[1], "/catalog/gpus/X1/pcie_gbps is deprecated"));
  json on_x1 = sc;
  on_x1["cluster"] = {{"gpu", "X1"}, {"gpus_per_node", 2}};
  on_x1["training"]["parallelism"]["dp"] = 2;
  const Scenario x = parse_scenario(on_x1.dump(), "units.json");
  CHECK(x.cluster.gpu.hbm_gbyte_per_s == 2000.0);
  CHECK(x.cluster.gpu.pcie_gbyte_per_s == 64.0);
  CHECK(x.cluster.intra_gbyte_per_s == 64.0);  // no NVLink: the node fabric is PCIe at the GPU's rate
}

TEST_CASE("two spellings of one bandwidth, or garbage in one, are exit-2 errors naming the key") {
  const InputError both = error_of({{"nic_gbit_per_s", 400}, {"nic_gbps", 50}});
  CHECK(both.file == "units.json");
  CHECK(mentions(both.what(), "nic_gbit_per_s"));
  CHECK(mentions(both.what(), "nic_gbps"));
  const InputError two_new = error_of({{"nic_gbit_per_s", 400}, {"nic_gbyte_per_s", 50}});
  CHECK(mentions(two_new.what(), "\"nic_gbit_per_s\" and \"nic_gbyte_per_s\""));
  const InputError junk = error_of({{"nic_gbit_per_s", "fast"}});
  CHECK(junk.path == "/cluster/nic_gbit_per_s");
  CHECK(mentions(junk.what(), "Gb/s as a number, or a bandwidth with its unit"));
  const InputError range = error_of({{"nic_gbyte_per_s", "9000 Tb/s"}});  // 1.125e6 GB/s, above 1e6
  CHECK(mentions(range.what(), "out of range"));
  const InputError zero = error_of({{"nic_gbit_per_s", "0 Gb/s"}});
  CHECK(mentions(zero.what(), "out of range"));
  CHECK(error_of({{"nic_gbit_per_s", 0}}).path == "/cluster/nic_gbit_per_s");

  const auto d = temp_dir();
  std::ofstream(d / "both.json") << scenario_with({{"nic_gbit_per_s", 200}, {"nic_gbps", 25}}).dump();
  const Run r = cli("run " + (d / "both.json").string());
  CHECK(r.status == 2);
  CHECK(mentions(r.err, "both.json"));
  CHECK(mentions(r.err, "/cluster/nic_gbps"));
  CHECK(mentions(r.err, "nic_gbit_per_s"));
}

TEST_CASE("an all-to-all across 200 Gb/s NICs moves 3/4 of the buffer at 25 GB/s x nic_efficiency") {
  // Each GPU sends 3/4 of its buffer to the other three nodes through its own NIC: 200 Gb/s is
  // 25 GB/s, at NCCL's 0.96 of line rate, after the plan's latency (as in test_collective).
  json extra = {{"nic_gbit_per_s", "200 Gb/s"}};
  json sc = scenario_with(extra);
  sc["cluster"]["nodes"] = 4;
  sc["training"]["parallelism"]["dp"] = 32;
  sc["training"]["global_batch"] = 32;
  const Scenario s = parse_scenario(sc.dump(), "units.json");
  REQUIRE(s.cluster.nic_efficiency == 0.96);
  const Cluster cl = build_cluster(s.cluster);
  CollectiveCall call;
  call.op = CollectiveOp::all_to_all;
  for (int i = 0; i < 32; ++i) call.ranks.emplace_back(i);
  call.bytes = 4.0 * (1 << 30);
  const double t = plan_collective(cl, call).latency_s + 0.75 * call.bytes / (200e9 / 8 * 0.96);
  CHECK(estimate_collective(cl, call).time.seconds() == rel_approx(t, 1e-9));
}

TEST_CASE("ctwin cluster --write writes the new keys, and they load back to the same cluster") {
  const auto d = temp_dir();
  const std::string desc = (d / "units_cluster.json").string();
  std::filesystem::remove(desc);
  REQUIRE(cli("cluster --cluster dgx-a100 --nodes 2 --write " + desc).status == 0);
  const std::string text = ctwin::test::slurp(desc);
  CHECK(!mentions(text, "_gbps"));
  const json written = json::parse(text);
  CHECK(written["nic_gbit_per_s"] == 200.0);  // DGX A100: HDR, 200 Gb/s per GPU
  CHECK(written["gpu"]["hbm_gbyte_per_s"].is_number());
  // Loaded through /cluster/file, then written again: the same JSON.
  const JsonObject o(written, "", desc);
  std::vector<std::string> warnings;
  const ClusterSpec back = cluster_from_json(o, {}, {}, &warnings);
  CHECK(as_json(back) == written);
  CHECK(warnings.empty());
  // An old key beside /cluster/file replaces the file's new one (with the warning), not a conflict.
  std::ofstream(d / "units_sc.json") << R"({"name": "f", "kind": "training",
    "cluster": {"file": "units_cluster.json", "nic_gbps": 50}, "model": "llama3.2-1b",
    "training": {"global_batch": 16, "seq_len": 1024, "parallelism": {"dp": 16}}})";
  const Run r = cli("run " + (d / "units_sc.json").string() + " --json");
  REQUIRE(r.status == 0);
  CHECK(mentions(r.err, "ctwin: warning: /cluster/nic_gbps is deprecated"));
  const json report = json::parse(r.out);
  REQUIRE(report["warnings"].is_array());
  REQUIRE(!report["warnings"].empty());
  CHECK(report["warnings"][0] ==
        "/cluster/nic_gbps is deprecated (GB/s, easily mistaken for Gb/s): 50 GB/s = 400 Gb/s; write "
        "\"nic_gbit_per_s\": 400");
}

TEST_CASE("every bandwidth key names its unit: _gbit_per_s is Gb/s, _gbyte_per_s GB/s, _gbps only deprecated") {
  auto ends_with = [](std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
  };
  int bandwidths = 0;
  for (const ParamTable& t : scenario_param_tables()) {
    for (const ParamDecl& d : t.params) {
      CAPTURE(d.key);
      if (ends_with(d.key, "_gbit_per_s")) CHECK(d.unit == "Gb/s");
      if (ends_with(d.key, "_gbyte_per_s")) CHECK(d.unit == "GB/s");
      if (ends_with(d.key, "_gbps")) {
        CHECK(d.deprecated);
        CHECK(d.unit == "GB/s");
      }
      if (d.unit == "GB/s" || d.unit == "Gb/s") {
        ++bandwidths;
        CHECK((ends_with(d.key, "_gbit_per_s") || ends_with(d.key, "_gbyte_per_s") || d.deprecated));
        CHECK(mentions(param_type_text(d), "or a string with its unit"));
      }
      if (d.deprecated) {
        CHECK(!d.same_as.empty());
        CHECK(mentions(std::string(d.doc), std::string(d.same_as)));
      }
    }
  }
  // cluster: 6 + 5 deprecated; GPU: 3 + 3 deprecated; /serving/disaggregation: 2; /serving:
  // lora_load_gbyte_per_s; /serving/autoscaling: 1; /training/offload: nvme_gbyte_per_s;
  // /job/storage: 3; /job/data_loader: 1
  CHECK(bandwidths == 26);
}

TEST_CASE("ctwin params shows each bandwidth key with its unit") {
  const Run r = cli("params");
  REQUIRE(r.status == 0);
  CHECK(mentions(r.out, "nic_gbit_per_s"));
  CHECK(mentions(r.out, "default the preset's, else 400; Gb/s"));
  CHECK(mentions(r.out, "default nic_gbit_per_s / 8; GB/s"));
  CHECK(mentions(r.out, "deprecated: write nic_gbit_per_s"));
}

TEST_CASE("--set in one spelling replaces the file's other spelling of the same bandwidth") {
  // The file says 400 Gb/s; a what-if in GB/s (or the old key) replaces it, not a conflict.
  const std::string text = scenario_with({{"nic_gbit_per_s", 400}}).dump();
  const Scenario in_bytes = parse_scenario(text, "units.json", {Override{"/cluster/nic_gbyte_per_s", "25"}});
  const Scenario in_bits = parse_scenario(text, "units.json", {Override{"/cluster/nic_gbit_per_s", "200"}});
  const Scenario old_key = parse_scenario(text, "units.json", {Override{"/cluster/nic_gbps", "25"}});
  CHECK(in_bytes.cluster.nic_gbyte_per_s == rel_approx(25, 1e-12));
  CHECK(as_json(in_bits.cluster) == as_json(in_bytes.cluster));
  CHECK(as_json(old_key.cluster) == as_json(in_bytes.cluster));
  // The same for a GPU's bandwidth under /catalog/gpus.
  json j = scenario_with(json::object());
  j["catalog"]["gpus"]["H100-SXM"] = {{"hbm_gbyte_per_s", 3000}};
  const Scenario gpu = parse_scenario(j.dump(), "units.json", {Override{"/catalog/gpus/H100-SXM/hbm_gbps", "2000"}});
  CHECK(gpu.cluster.gpu.hbm_gbyte_per_s == rel_approx(2000, 1e-12));
}

TEST_CASE("/cluster/host_cpu: NCCL's network overhead follows it unless net_overhead_us is written") {
  // tuning.cc getNetOverhead: 2 us on AMD hosts, 1 us on the rest.
  const Scenario amd = load({{"host_cpu", "amd"}});
  CHECK(amd.cluster.host_cpu == HostCpu::amd);
  CHECK(amd.cluster.net_overhead_us == 2.0);
  CHECK(load({{"host_cpu", "arm"}}).cluster.net_overhead_us == 1.0);
  const Scenario both = load({{"host_cpu", "amd"}, {"net_overhead_us", 1.5}});
  CHECK(both.cluster.host_cpu == HostCpu::amd);
  CHECK(both.cluster.net_overhead_us == 1.5);
  json a100 = scenario_with({{"host_cpu", "intel"}});
  a100["cluster"]["preset"] = "dgx-a100";
  const Scenario intel = parse_scenario(a100.dump(), "units.json");
  CHECK(intel.cluster.host_cpu == HostCpu::intel);
  CHECK(intel.cluster.net_overhead_us == 1.0);
  const InputError bad = error_of({{"host_cpu", "epyc"}});
  CHECK(bad.path == "/cluster/host_cpu");
  CHECK(mentions(bad.what(), "amd"));
  // Written out and read back as the preset's.
  CHECK(as_json(amd.cluster)["host_cpu"] == "amd");
}
