// ctwin compare: the change of each figure is B's minus A's, the breakdown terms' changes add up
// to the step time's, the figures agree with runs simulated on their own, and bad input exits 2.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "compare_ops.hpp"
#include "compare_report.hpp"
#include "ctwin_cli.hpp"
#include "scenario.hpp"
#include "tolerance.hpp"
#include "topology/cluster.hpp"
#include "workloads/training_sim.hpp"

using ctwin::test::abs_approx;
using ctwin::test::cli;
using ctwin::test::rel_approx;
using nlohmann::json;

namespace {

const std::string kQuickstart = "scenarios/quickstart.json";
const std::string kNvls = "scenarios/compare-nvls-vs-ring.json";

json compare_json(const std::string& args) {
  const auto r = cli("compare " + args + " --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return json::parse(r.out);
}

double delta(const json& j, const std::string& pointer) { return j.at("diff").at(pointer).at("delta").get<double>(); }
double side(const json& j, const std::string& pointer, const char* ab) {
  return j.at("diff").at(pointer).at(ab).get<double>();
}

// The scenario simulated on its own, as `ctwin run` does.
ctwin::TrainingResult simulate(const std::string& file, const std::vector<ctwin::Override>& overrides) {
  const ctwin::Scenario sc = ctwin::load_scenario(ctwin::test::source_dir() + "/" + file, overrides);
  const auto& job = ctwin::training_job(sc);
  return ctwin::simulate_training(job.model, job.training, ctwin::build_cluster(sc.cluster),
                                  ctwin::training_options(sc));
}

void check_terms_add_up(const json& j) {
  double sum = 0;
  for (const auto p : ctwin::breakdown_term_pointers) {
    CAPTURE(p);
    REQUIRE(j.at("diff").contains(std::string(p)));
    sum += delta(j, std::string(p));
  }
  const double step = delta(j, "/step_time_s");
  CHECK(step != 0);
  CHECK(sum == rel_approx(step, 1e-9));
  // And each side's terms add up to its own step time (step_breakdown_ps splits [0, makespan)).
  for (const char* ab : {"a", "b"}) {
    double terms = 0;
    for (const auto p : ctwin::breakdown_term_pointers) terms += side(j, std::string(p), ab);
    CHECK(terms == rel_approx(side(j, "/step_time_s", ab), 1e-9));
  }
}

}  // namespace

TEST_CASE("a scenario compared with itself: every figure's change is zero and nothing is explained as changed") {
  const json j = compare_json(kQuickstart + " " + kQuickstart);
  CHECK(j.at("kind") == "training");
  REQUIRE(j.at("diff").size() >= 20);
  for (const auto& item : j.at("diff").items()) {
    const std::string pointer = item.key();  // a named copy: clang 14 cannot capture a binding
    const auto& d = item.value();
    CAPTURE(pointer);
    CHECK(d.at("delta").get<double>() == 0);
    CHECK(d.at("a") == d.at("b"));
  }
  // The reports are ctwin run's, whole.
  CHECK(j.at("a").at("step_time_s") == j.at("b").at("step_time_s"));
  REQUIRE(!j.at("explanation").empty());
  CHECK(j.at("explanation")[0].get<std::string>().find("the step time is the same") == 0);
}

TEST_CASE("compare: the breakdown terms' changes add up to the step time's change (TP, pipeline, fabric)") {
  SUBCASE("NVLS against ring: only exposed TP comm moves") {
    const json j = compare_json(kNvls + " --set-b /network/algo=ring");
    check_terms_add_up(j);
    CHECK(delta(j, "/breakdown_s/compute") == 0);
    CHECK(delta(j, "/breakdown_s/exposed_comm_by_group/tp") == rel_approx(delta(j, "/step_time_s"), 1e-12));
  }
  SUBCASE("DP8 against PP2 x DP4: compute, bubble, PP and DP comm all move") {
    const json j = compare_json(kQuickstart + " --set-b /training/parallelism/pp=2 --set-b /training/parallelism/dp=4");
    check_terms_add_up(j);
    CHECK(side(j, "/breakdown_s/bubble", "a") == 0);
    CHECK(side(j, "/breakdown_s/bubble", "b") > 0);
  }
  SUBCASE("the shipped 1:1 against 2:1 fabric pair") {
    const json j = compare_json("scenarios/compare-fabric-1to1.json scenarios/compare-fabric-2to1.json");
    check_terms_add_up(j);
    CHECK(delta(j, "/breakdown_s/exposed_comm_by_group/dp") > 0);
  }
}

TEST_CASE("compare: doubling global_batch on a data-parallel model doubles compute and tokens per step") {
  // quickstart: DP8, micro-batch 2, global batch 64 -> 4 micro-batches per replica; 128 -> 8.
  // Each micro-batch runs the same kernels, so compute doubles exactly (whole picoseconds), the
  // optimizer step stays, and model FLOPs per step double (6 N tokens + attention, per token).
  const json j = compare_json(kQuickstart + " --set-b /training/global_batch=128");
  const double compute_a = side(j, "/breakdown_s/compute", "a");
  CHECK(compute_a > 0);
  CHECK(side(j, "/breakdown_s/compute", "b") == rel_approx(2 * compute_a, 1e-9));
  CHECK(delta(j, "/breakdown_s/optimizer") == 0);
  CHECK(j.at("b").at("tokens_per_step").get<double>() == rel_approx(128.0 * 4096, 1e-12));
  CHECK(j.at("a").at("tokens_per_step").get<double>() == rel_approx(64.0 * 4096, 1e-12));
  // delta_pct is the change over A: (b - a) / a.
  const auto& st = j.at("diff").at("/step_time_s");
  CHECK(st.at("delta_pct").get<double>() ==
        rel_approx(100 * (st.at("b").get<double>() - st.at("a").get<double>()) / st.at("a").get<double>(), 1e-12));
  // Memory per GPU does not depend on the number of micro-batches.
  CHECK(delta(j, "/memory/peak_bytes") == 0);
}

TEST_CASE("compare NVLS against ring: the TP term's change is the difference of the two runs simulated alone") {
  const json j = compare_json(kNvls + " --set-b /network/algo=ring");
  const auto nvls = simulate(kNvls, {});
  const auto ring = simulate(kNvls, {{"/network/algo", "ring"}});
  const double expected = ring.breakdown.exposed_tp_s - nvls.breakdown.exposed_tp_s;
  // NVLS all-reduces in the switch: at 64 MiB on one node it is faster than a ring, so ring
  // exposes more.
  CHECK(expected > 0);
  CHECK(delta(j, "/breakdown_s/exposed_comm_by_group/tp") == rel_approx(expected, 1e-12));
  CHECK(delta(j, "/step_time_s") == rel_approx(ring.step_time_s - nvls.step_time_s, 1e-12));
  CHECK(side(j, "/mfu", "a") == rel_approx(nvls.mfu, 1e-12));
  CHECK(side(j, "/mfu", "b") == rel_approx(ring.mfu, 1e-12));
  // The explanation names the term in words, with its share of each step.
  const std::string first = j.at("explanation")[1].get<std::string>();
  CHECK(first.find("exposed TP comm grew by") == 0);
  CHECK(first.find("of the step") != std::string::npos);
}

TEST_CASE("compare --ops: the all-reduce ops' change adds up to the exposed TP change when TP blocks compute") {
  // Without tp_comm_overlap the TP all-reduces run on the compute stream, one GPU of the folded TP
  // group is traced and nothing else overlaps them: exposed TP comm is their summed duration.
  const json j = compare_json(kNvls + " --set-b /network/algo=ring --ops --top 50");
  REQUIRE(j.contains("ops"));
  double all_reduce = 0;
  for (const auto& op : j.at("ops")) {
    if (op.at("kind") == "all_reduce") all_reduce += op.at("delta_s").get<double>();
    // Every op listed has a first occurrence in both traces, for the viewer.
    CHECK(op.at("a").at("first_s").is_number());
    CHECK(op.at("b").at("first_s").is_number());
  }
  CHECK(all_reduce == rel_approx(delta(j, "/breakdown_s/exposed_comm_by_group/tp"), 1e-9));
}

TEST_CASE("op groups: micro-batch and layer prefixes are dropped, totals and first times summed by hand") {
  CHECK(ctwin::op_group_name("mb3 L12 bwd tp_f") == "bwd tp_f");
  CHECK(ctwin::op_group_name("mb0 param_all_gather") == "param_all_gather");
  CHECK(ctwin::op_group_name("L7 recompute qkv") == "recompute qkv");
  CHECK(ctwin::op_group_name("mbx L1") == "mbx L1");  // not a prefix: kept whole
  CHECK(ctwin::op_group_name("optimizer") == "optimizer");

  auto trace = [](std::int64_t d0, std::int64_t d1, std::int64_t gemm) {
    ctwin::Trace t;
    const auto lane = t.add_lane("gpu 0", "compute", "node 0", 0, 0);
    const auto ar = t.intern("all_reduce"), gk = t.intern("gemm");
    t.events.push_back(
        {.start_ps = 5'000'000, .dur_ps = d1, .lane = lane, .name = t.intern("mb1 L0 tp_f"), .kind = ar});
    t.events.push_back(
        {.start_ps = 2'000'000, .dur_ps = d0, .lane = lane, .name = t.intern("mb0 L0 tp_f"), .kind = ar});
    t.events.push_back({.start_ps = 0, .dur_ps = gemm, .lane = lane, .name = t.intern("mb0 L0 qkv"), .kind = gk});
    return t;
  };
  // A: tp_f 2 + 3 us, B: 4 + 6 us; the GEMM changes by 1 us.
  const auto d =
      ctwin::op_differences(trace(2'000'000, 3'000'000, 7'000'000), trace(4'000'000, 6'000'000, 8'000'000), 8);
  REQUIRE(d.size() == 2);
  CHECK(d[0].name == "tp_f");
  CHECK(d[0].kind == "all_reduce");
  CHECK(d[0].a.total_s == rel_approx(5e-6, 1e-12));
  CHECK(d[0].b.total_s == rel_approx(10e-6, 1e-12));
  CHECK(d[0].a.count == 2);
  CHECK(*d[0].a.first_s == rel_approx(2e-6, 1e-12));  // the earlier of the two, not the first listed
  CHECK(d[0].a.first_lane == "gpu 0 compute");
  CHECK(d[1].name == "qkv");
  CHECK(d[1].delta_s() == rel_approx(1e-6, 1e-9));
  CHECK(ctwin::op_differences(trace(1, 2, 3), trace(1, 2, 3), 8).empty());  // nothing changed
  CHECK(
      ctwin::op_differences(trace(2'000'000, 3'000'000, 7'000'000), trace(4'000'000, 6'000'000, 8'000'000), 1).size() ==
      1);
}

TEST_CASE("op groups of a serving trace: by the lane's process and the kind, whatever the names") {
  // A replica's iterations and a request's phases share kinds ("decode") but not processes.
  auto trace = [](std::int64_t gpu_decode, std::int64_t req_decode) {
    ctwin::Trace t;
    const auto gpu = t.add_lane("replica", "gpu 0", "replica", 0, 0);
    const auto req = t.add_lane("requests", "slot 3", "requests", 1, 0);
    const auto decode = t.intern("decode");
    t.events.push_back({.start_ps = 10,
                        .dur_ps = gpu_decode,
                        .lane = gpu,
                        .name = t.intern("prefill 0 tok + decode 4 seq"),
                        .kind = decode});
    t.events.push_back({.start_ps = 30,
                        .dur_ps = gpu_decode,
                        .lane = gpu,
                        .name = t.intern("prefill 0 tok + decode 5 seq"),
                        .kind = decode});
    t.events.push_back({.start_ps = 20, .dur_ps = req_decode, .lane = req, .name = t.intern("req 7"), .kind = decode});
    return t;
  };
  const auto d = ctwin::op_differences(trace(100, 1000), trace(150, 1200), 8, ctwin::OpGrouping::by_kind);
  REQUIRE(d.size() == 2);
  CHECK(d[0].name == "requests decode");  // +200 ps against the replica's 2 x 50
  CHECK(d[0].delta_s() == rel_approx(200e-12, 1e-9));
  CHECK(d[0].a.first_lane == "requests slot 3");
  CHECK(d[1].name == "replica decode");
  CHECK(d[1].a.count == 2);
  CHECK(d[1].b.total_s == rel_approx(300e-12, 1e-9));
  CHECK(*d[1].b.first_s == rel_approx(10e-12, 1e-9));
}

TEST_CASE("compare on serving scenarios: the changes are B's figures minus A's, and a run against itself is zero") {
  const std::string file = "scenarios/serving-llama3-8b-h100.json";
  const std::string shorter = " --set /traffic/duration_s=30";
  const json same = compare_json(file + " " + file + shorter);
  CHECK(same.at("kind") == "serving");
  for (const auto& item : same.at("diff").items()) {
    const std::string pointer = item.key();
    const auto& d = item.value();
    CAPTURE(pointer);
    CHECK(d.at("delta").get<double>() == 0);
  }
  // 16 sequences at a time instead of 256: each figure is what `ctwin run` reports for each alone.
  const json j = compare_json(file + shorter + " --set-b /serving/max_num_seqs=16");
  auto run = [&](const std::string& extra) {
    const auto r = cli("run " + file + shorter + extra + " --json");
    REQUIRE(r.status == 0);
    return json::parse(r.out);
  };
  const json a = run(""), b = run(" --set /serving/max_num_seqs=16");
  for (const char* p : {"/ttft_s/p99", "/tpot_s/p50", "/e2e_s/p99", "/throughput/output_tokens_per_s",
                        "/goodput_requests_per_s", "/kv_cache/peak_utilization", "/gpu_time_s/decode"}) {
    CAPTURE(p);
    const double va = a.at(json::json_pointer(p)).get<double>(), vb = b.at(json::json_pointer(p)).get<double>();
    CHECK(side(j, p, "a") == va);
    CHECK(side(j, p, "b") == vb);
    CHECK(delta(j, p) == rel_approx(vb - va, 1e-12));
  }
  // Fewer sequences at once: requests queue, so TTFT p99 rises.
  CHECK(delta(j, "/ttft_s/p99") > 0);
}

TEST_CASE("compare refuses bad input with exit 2, naming the file and the key") {
  SUBCASE("training against serving") {
    const auto r = cli("compare " + kQuickstart + " scenarios/serving-llama3-8b-h100.json");
    CHECK(r.status == 2);
    CHECK(r.err.find("scenarios/serving-llama3-8b-h100.json") != std::string::npos);
    CHECK(r.err.find("/kind") != std::string::npos);
    CHECK(r.err.find("training") != std::string::npos);
  }
  SUBCASE("a missing file") {
    const auto r = cli("compare " + kQuickstart + " scenarios/no-such-scenario.json");
    CHECK(r.status == 2);
    CHECK(r.err.find("no-such-scenario.json") != std::string::npos);
  }
  SUBCASE("a bad override names its pointer") {
    const auto r = cli("compare " + kQuickstart + " --set-b /training/parallelism/dp=-3");
    CHECK(r.status == 2);
    CHECK(r.err.find("/training/parallelism/dp") != std::string::npos);
  }
  SUBCASE("one file and nothing to tell B from A") {
    const auto r = cli("compare " + kQuickstart);
    CHECK(r.status == 2);
    CHECK(r.err.find("--set-b") != std::string::npos);
  }
  SUBCASE("three files") { CHECK(cli("compare " + kQuickstart + " " + kQuickstart + " " + kQuickstart).status == 2); }
  SUBCASE("the same trace file for both runs") {
    const auto t = (ctwin::test::temp_dir() / "same.ctt").string();
    const auto r = cli("compare " + kNvls + " --set-b /network/algo=ring --trace-a " + t + " --trace-b " + t);
    CHECK(r.status == 2);
    CHECK(r.err.find("--trace-b") != std::string::npos);
  }
}
