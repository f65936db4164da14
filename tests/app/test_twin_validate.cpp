// ctwin validate MEASUREMENTS --profile P and ctwin calibrate on a synthetic measurements file:
// its kernel, collective and step times are the simulator's own at a chosen profile, so that
// profile predicts them with ~0% error, a profile whose compute is off by 2x with 100% on every
// kernel, and calibrate's fit (tables left out) recovers them.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "calibrate/measurements.hpp"
#include "topology/network.hpp"
#include "twin.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_iteration.hpp"
#include "workloads/training_sim.hpp"

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::calibrate;
using ctwin::test::abs_approx;
using ctwin::test::cli;
using ctwin::test::temp_dir;

namespace {

// Two CPU "ranks" in one node, training a small catalog model (in BF16: /training/precision
// takes no fp32 on main yet; the CPU rank's BF16 peak is its nominal FP32 peak here).
nlohmann::json twin_scenario() {
  return nlohmann::json::parse(R"({
    "name": "twin-test", "kind": "training",
    "catalog": {"gpus": {"cpu-rank": {
      "bf16_tflops": 0.2, "fp16_tflops": 0.2, "fp8_tflops": 0, "int8_tops": 0.4, "tf32_tflops": 0.2,
      "hbm_bytes": 1e12, "hbm_gbyte_per_s": 20, "nvlink_gen": 0, "nvlink_gbyte_per_s": 0,
      "pcie_gen": 4, "pcie_gbyte_per_s": 5, "gemm_efficiency": 0.75, "fp8_gemm_efficiency": 0.75,
      "hbm_efficiency": 0.85, "kernel_launch_us": 2}}},
    "cluster": {"gpu": "cpu-rank", "nodes": 1, "gpus_per_node": 2, "intra": "pcie"},
    "model": "llama3.2-1b",
    "training": {"micro_batch": 1, "global_batch": 2, "seq_len": 128,
                 "parallelism": {"tp": 1, "pp": 1, "dp": 2}}
  })");
}

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string profile_text(double gemm_eff, double hbm_eff, double launch_us) {
  nlohmann::json p = {{"name", "chosen"},
                      {"compute",
                       {{"gemm_efficiency", gemm_eff},
                        {"gemm_knee", 32},
                        {"hbm_efficiency", hbm_eff},
                        {"kernel_launch_us", launch_us}}},
                      {"links", {{"pcie_efficiency", 0.4}, {"pcie_latency_us", 5}}}};
  return p.dump();
}

OpCost gemm(double m, double n, double k) {
  OpCost op;
  op.kind = OpKind::gemm;
  op.dtype = Dtype::bf16;
  op.m = m, op.n = n, op.k = k;
  op.flops = 2 * m * n * k;
  op.bytes = 2 * (m * k + k * n + m * n);
  return op;
}

// The measurements the chosen profile predicts exactly.
std::filesystem::path synthetic_measurements() {
  const auto dir = temp_dir();
  const auto truth = dir / "truth.json";
  write(truth, profile_text(0.5, 0.6, 20));
  Measurements m;
  m.scenario = twin_scenario();
  m.host.ranks = 2;
  m.repeats = 1;
  const Scenario sc = measured_scenario(m, (dir / "meas.json").string(), truth.string());
  const CostModelPtr cost = profile_cost_model(*sc.profile, sc.cluster.gpu, Dtype::bf16);
  for (double s : {16.0, 64.0, 256.0, 1024.0}) {
    for (double k : {32.0, 512.0}) {
      OpMeasurement o;
      o.op = gemm(s, 2 * s, k);
      o.stats = stats_of({cost->op_seconds(o.op)});
      m.ops.push_back(o);
    }
    OpMeasurement e;
    e.op.kind = OpKind::elementwise;
    e.op.dtype = Dtype::bf16;
    e.op.bytes = s * s * 64;
    e.op.flops = s * s * 8;
    e.stats = stats_of({cost->op_seconds(e.op)});
    m.ops.push_back(e);
  }
  const Cluster cl = build_cluster(sc.cluster);
  for (double b = 4096; b <= 1 << 26; b *= 8) {
    CollectiveMeasurement c;
    c.op = CollectiveOp::all_reduce;
    c.ranks = {0, 1};
    c.bytes = b;
    c.stats = stats_of({analytical_collective_time(cl, {c.op, {GpuId(0), GpuId(1)}, b}, {}).seconds()});
    m.collectives.push_back(c);
  }
  StepMeasurement st;
  st.kind = "training_step";
  st.layout = {{"tp", 1}, {"pp", 1}, {"dp", 2}};
  const TrainingResult r =
      simulate_training(training_job(sc).model, training_job(sc).training, cl, training_options(sc));
  st.stats = stats_of({r.step_time_s});
  m.steps.push_back(st);
  const auto path = dir / "meas.json";
  write_measurements(m, path.string(), true, "-o");
  return path;
}

nlohmann::json validate_json(const std::filesystem::path& meas, const std::filesystem::path& profile) {
  const auto r = cli("validate " + meas.string() + " --profile " + profile.string() + " --json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("validate MEASUREMENTS --profile: the generating profile ~0%, compute off by 2x 100% per kernel") {
  const auto meas = synthetic_measurements();
  const auto dir = temp_dir();
  const auto j = validate_json(meas, dir / "truth.json");
  CHECK(j["op"]["count"] == 12);
  CHECK(j["collective"]["count"] == 5);  // 4 KiB to 16 MiB by 8x
  CHECK(j["step"]["count"] == 1);
  for (const char* level : {"op", "collective", "step"}) {
    CAPTURE(level);
    CHECK(j[level]["mean_abs_error_pct"].get<double>() == abs_approx(0, 1e-6));  // percent
    CHECK(j[level]["max_abs_error_pct"].get<double>() == abs_approx(0, 1e-6));
  }
  // Half the GEMM and HBM efficiency and twice the launch cost: every kernel takes exactly twice
  // max(compute, memory) + launch, +100%.
  write(dir / "slow.json", profile_text(0.25, 0.3, 40));
  const auto s = validate_json(meas, dir / "slow.json");
  CHECK(s["op"]["mean_abs_error_pct"].get<double>() == abs_approx(100, 1e-6));
  CHECK(s["op"]["max_abs_error_pct"].get<double>() == abs_approx(100, 1e-6));
  CHECK(s["collective"]["max_abs_error_pct"].get<double>() == abs_approx(0, 1e-6));  // links unchanged
  const double step = s["step"]["mean_abs_error_pct"].get<double>();
  CHECK(step > 10);  // the step's kernels doubled, its communication not
  CHECK(step < 100);
}

TEST_CASE("calibrate fits the synthetic measurements back: validate with the fit (no tables) within 1%") {
  const auto meas = synthetic_measurements();
  const auto dir = temp_dir();
  const auto fit = dir / "fit.json";
  std::filesystem::remove(fit);
  const auto r = cli("calibrate " + meas.string() + " --no-tables -o " + fit.string());
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("gemm") != std::string::npos);
  const auto j = validate_json(meas, fit);
  for (const char* level : {"op", "collective", "step"}) {
    CAPTURE(level);
    CHECK(j[level]["max_abs_error_pct"].get<double>() < 1.0);
  }
  // Never over an existing profile without --force.
  const auto again = cli("calibrate " + meas.string() + " -o " + fit.string());
  CHECK(again.status == 2);
  CHECK(again.err.find("--force") != std::string::npos);
  CHECK(cli("calibrate " + meas.string() + " -o " + fit.string() + " --force").status == 0);
  // With its tables the measured kernels and collectives are answered from them: 0% in sample.
  const auto t = validate_json(meas, fit);
  CHECK(t["op"]["max_abs_error_pct"].get<double>() == abs_approx(0, 1e-6));
  CHECK(t["collective"]["max_abs_error_pct"].get<double>() == abs_approx(0, 1e-6));
}

TEST_CASE("twin commands on bad input: missing file, bad JSON path, no scenario; exit 2 naming the place") {
  const auto dir = temp_dir();
  const auto meas = synthetic_measurements();
  const auto r = cli("validate " + meas.string() + " --profile " + (dir / "nope.json").string());
  CHECK(r.status == 2);
  CHECK(r.err.find("nope.json") != std::string::npos);
  CHECK(cli("calibrate " + (dir / "absent.json").string()).status == 2);
  nlohmann::json bad = nlohmann::json::parse(test::slurp(meas));
  bad["ops"][0]["stats"]["median_s"] = "fast";
  write(dir / "bad.json", bad.dump());
  const auto b = cli("calibrate " + (dir / "bad.json").string());
  CHECK(b.status == 2);
  CHECK(b.err.find("/ops/0/stats/median_s") != std::string::npos);
  nlohmann::json none = nlohmann::json::parse(test::slurp(meas));
  none["scenario"] = nlohmann::json::object();
  write(dir / "none.json", none.dump());
  const auto n = cli("validate " + (dir / "none.json").string() + " --profile " + (dir / "truth.json").string());
  CHECK(n.status == 2);
  CHECK(n.err.find("/scenario") != std::string::npos);
}

TEST_CASE("a profile's measured collective curve reaches the training step's analytical timing") {
  const auto meas = synthetic_measurements();
  const auto dir = temp_dir();
  // The chosen profile plus a flat 1 s curve for every 2-rank all_reduce of 1 B to 10 TB: the
  // step's last gradient all_reduce starts after the last backward kernel and takes 1 s.
  nlohmann::json p = nlohmann::json::parse(profile_text(0.5, 0.6, 20));
  p["tables"] = {
      {"collectives", {{{"op", "all_reduce"}, {"ranks", 2}, {"scope", "intra"}, {"points", {{1, 1.0}, {1e13, 1.0}}}}}}};
  write(dir / "flat.json", p.dump());
  const auto j = validate_json(meas, dir / "flat.json");
  REQUIRE(j["step"]["rows"].size() == 1);
  const double plain = validate_json(meas, dir / "truth.json")["step"]["rows"][0]["predicted_s"].get<double>();
  const double flat = j["step"]["rows"][0]["predicted_s"].get<double>();
  CHECK(flat >= 1.0);
  CHECK(flat > plain);
  // Every collective row is answered from the curve: 1 s.
  for (const auto& row : j["collective"]["rows"]) CHECK(row["predicted_s"].get<double>() == 1.0);
}

namespace {

// Serving iterations of the CPU serving twin (scenarios/twin/cpu-serving.json) whose measured
// medians are the truth profile's forward pass times `factor`.
struct ServingRow {
  IterationShape shape;
  int tp;
  double factor;
};

// `intra`: the scenario's intra-node fabric ("pcie" as shipped; "nvswitch" makes its TP all-reduces
// ones the frameworks' own kernels would take). The truth is NCCL's all-reduce, as realrun runs it.
std::filesystem::path serving_measurements(const std::vector<ServingRow>& rows, double* predicted = nullptr,
                                           const std::string& intra = "pcie") {
  const auto dir = temp_dir();
  write(dir / "truth.json", profile_text(0.5, 0.6, 20));
  Measurements m;
  m.scenario = nlohmann::json::parse(
      test::slurp(std::filesystem::path(ctwin::test::source_dir()) / "scenarios/twin/cpu-serving.json"));
  m.scenario["cluster"]["intra"] = intra;
  m.host.ranks = 2;
  m.repeats = 1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Measurements one = m;
    one.scenario["serving"]["tensor_parallel_size"] = rows[i].tp;
    one.scenario["serving"]["disable_custom_all_reduce"] = true;
    const Scenario sc = measured_scenario(one, (dir / "serving.json").string(), (dir / "truth.json").string());
    const ServingCostModel cost(serving_job(sc).deployment);
    const double t = cost.iteration(batch_shape(rows[i].shape)).forward_s();
    if (predicted != nullptr) predicted[i] = t;
    StepMeasurement s;
    s.kind = std::string(rows[i].shape.kind());
    s.layout = {{"tp", rows[i].tp}, {"pp", 1}};
    s.shape = rows[i].shape;
    s.stats = stats_of({t * rows[i].factor});
    m.steps.push_back(s);
  }
  const auto path = dir / "serving.json";
  write_measurements(m, path.string(), true, "-o");
  return path;
}

}  // namespace

TEST_CASE("validate predicts serving iterations' forward pass: measured 1.25x and 0.8x the truth give -20% and +25%") {
  double pred[3] = {};
  const auto meas = serving_measurements(
      {{{1, 128, 0, 0, 0}, 2, 1.25}, {{0, 0, 0, 8, 512}, 2, 0.8}, {{1, 120, 0, 4, 256}, 1, 1.0}}, pred);
  const auto j = validate_json(meas, temp_dir() / "truth.json");
  REQUIRE(j["step"]["count"] == 3);
  const auto& rows = j["step"]["rows"];
  // error = predicted / measured - 1, in percent.
  CHECK(rows[0]["error_pct"].get<double>() == abs_approx(-20, 1e-9));
  CHECK(rows[1]["error_pct"].get<double>() == abs_approx(25, 1e-9));
  CHECK(rows[2]["error_pct"].get<double>() == abs_approx(0, 1e-9));
  CHECK(j["step"]["mean_abs_error_pct"].get<double>() == abs_approx(15, 1e-9));
  CHECK(j["step"]["max_abs_error_pct"].get<double>() == abs_approx(25, 1e-9));
  // The predicted time is the forward pass at the row's own TP (no host overhead: the profile's
  // eager 1 ms an iteration would dwarf these).
  for (int i = 0; i < 3; ++i) CHECK(rows[i]["predicted_s"].get<double>() == test::rel_approx(pred[i], 1e-12));
  CHECK(rows[0]["label"] == "prefill: prefill 1 x 128 after 0 tp2 pp1");
  CHECK(rows[2]["label"] == "mixed: prefill 1 x 120 after 0 + decode 4 at 256 tp1 pp1");
  CHECK(j["skipped"].empty());
  // The text report prints the same rows in its step section.
  const auto t = cli("validate " + meas.string() + " --profile " + (temp_dir() / "truth.json").string());
  REQUIRE(t.status == 0);
  CHECK(t.out.find("decode: decode 8 at 512 tp2 pp1") != std::string::npos);
  CHECK(t.out.find("step: 3 compared, mean absolute error 15.0%, max 25.0%") != std::string::npos);
}

TEST_CASE("validate prices a serving iteration's TP all-reduces as NCCL, which realrun ran, not the custom kernels") {
  // On an NVSwitch node a 2-rank decode all-reduce would go to the custom one-shot kernel; realrun
  // has none, so validate predicts NCCL's time and a measurement equal to it reads 0%.
  double pred[1] = {};
  const auto meas = serving_measurements({{{0, 0, 0, 8, 512}, 2, 1.0}}, pred, "nvswitch");
  const auto j = validate_json(meas, temp_dir() / "truth.json");
  REQUIRE(j["step"]["count"] == 1);
  CHECK(j["step"]["rows"][0]["error_pct"].get<double>() == abs_approx(0, 1e-9));
}

TEST_CASE("validate refuses a serving iteration the replica could never run, naming the step; skips a shapeless one") {
  const auto meas = serving_measurements({{{0, 0, 0, 9, 100}, 2, 1.0}});  // max_num_seqs is 8
  auto r = cli("validate " + meas.string() + " --profile " + (temp_dir() / "truth.json").string());
  CHECK(r.status == 2);
  CHECK(r.err.find("/steps/0") != std::string::npos);
  CHECK(r.err.find("max_num_seqs (8)") != std::string::npos);
  nlohmann::json old = nlohmann::json::parse(test::slurp(meas));
  old["steps"][0].erase("decode");
  write(temp_dir() / "old.json", old.dump());
  const auto j = validate_json(temp_dir() / "old.json", temp_dir() / "truth.json");
  CHECK(j["step"]["count"] == 0);
  REQUIRE(j["skipped"].size() == 1);
  CHECK(j["skipped"][0].get<std::string>().find("no iteration shape") != std::string::npos);
}
