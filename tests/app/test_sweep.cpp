// `ctwin sweep`: pruning never changes the top of the ranking (against an exhaustive sweep of the
// same layouts), the output is the same bytes on any number of threads or MPI ranks, axes combine
// as a grid or zipped, the best configuration written back runs to the same figures, and bad
// sweeps are exit-2 errors naming the key.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "asan.hpp"
#include "ctwin_cli.hpp"
#include "sweep.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"

using ctwin::test::cli;
using ctwin::test::slurp;
using ctwin::test::temp_dir;
using OJson = nlohmann::ordered_json;

namespace {

const std::string kEightB = "scenarios/llama3-8b-8xh100.json";

std::string in_source(const std::string& rel) { return std::string(ctwin::test::source_dir()) + "/" + rel; }

OJson read_json(const std::string& path) { return OJson::parse(slurp(path)); }

}  // namespace

TEST_CASE("sweep pruning keeps the exhaustive sweep's top 10, and no simulated step is below its bound") {
  const std::vector<ctwin::Override> narrow = {ctwin::parse_override("/sweep/auto/micro_batch=[1,2]")};
  ctwin::SweepRunOptions opt;
  opt.threads = 2;
  const auto pruned = ctwin::run_sweep(in_source(kEightB), narrow, true, opt);
  opt.exhaustive = true;
  const auto full = ctwin::run_sweep(in_source(kEightB), narrow, true, opt);
  REQUIRE(pruned.rows.size() == full.rows.size());
  std::size_t n_pruned = 0, fits = 0;
  for (const auto& r : pruned.rows) n_pruned += r.status == ctwin::SweepStatus::bound_pruned;
  for (const auto& r : full.rows) fits += r.status == ctwin::SweepStatus::simulated;
  CHECK(n_pruned > fits / 3);  // the bound does real work here
  CHECK(full.ranking.size() == fits);
  CHECK(full.bound_violations == 0);
  CHECK(pruned.bound_violations == 0);
  REQUIRE(pruned.ranking.size() >= 10);
  for (std::size_t k = 0; k < 10; ++k) {
    CAPTURE(k);
    CHECK(pruned.rows[pruned.ranking[k]].label == full.rows[full.ranking[k]].label);
    CHECK(pruned.rows[pruned.ranking[k]].objective == full.rows[full.ranking[k]].objective);
  }
  // Ranked best first, by step time.
  for (std::size_t k = 1; k < full.ranking.size(); ++k) {
    CHECK(full.rows[full.ranking[k - 1]].objective <= full.rows[full.ranking[k]].objective);
  }
  // Every refusal for memory is a layout the memory model puts over the GPU's 80 GB.
  for (const auto& r : full.rows) {
    if (r.status != ctwin::SweepStatus::out_of_memory) continue;
    CHECK(r.reason.find("out of memory: peak") == 0);
  }
  // The written layout is the reference row.
  REQUIRE(full.written);
  CHECK(full.rows[*full.written].label.rfind("as written: TP1 PP1 DP8 ZeRO1 mb1 rc:full", 0) == 0);
}

TEST_CASE("sweep output is the same bytes on one thread, two threads and two MPI ranks") {
  const std::string a = (temp_dir() / "sweep-j1.json").string(), b = (temp_dir() / "sweep-j2.json").string();
  const std::string args = "sweep " + kEightB + " --auto --quiet --set '/sweep/auto/micro_batch=[1,2]' --json ";
  const auto r1 = cli(args + a + " --jobs 1");
  const auto r2 = cli(args + b + " --jobs 2");
  REQUIRE(r1.status == 0);
  REQUIRE(r2.status == 0);
  CHECK(r1.out == r2.out);
  CHECK(slurp(a) == slurp(b));
  if (ctwin::test::kAsan || std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("skipped the MPI leg: " << (ctwin::test::kAsan ? "an AddressSanitizer build" : "no mpirun on PATH"));
    return;
  }
  const std::string c = (temp_dir() / "sweep-mpi.json").string();
  const std::string out = (temp_dir() / "mpi-out").string();
  const std::string cmd = std::string("cd ") + ctwin::test::source_dir() + " && mpirun -n 2 --oversubscribe" +
                          (geteuid() == 0 ? " --allow-run-as-root" : "") + " " + ctwin::test::ctwin_exe() + " " + args +
                          c + " --jobs 1 >" + out + " 2>/dev/null </dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(slurp(out) == r1.out);
  CHECK(slurp(c) == slurp(a));
}

TEST_CASE("sweep axes: a grid is every combination, zip pairs them, a geometric range doubles") {
  const std::string j = (temp_dir() / "sweep-axes.json").string();
  auto r = cli("sweep " + kEightB + " --quiet --force --json " + j +
               " --set '/sweep/axes=[{\"key\": \"/training/micro_batch\", \"from\": 1, \"to\": 4, \"times\": 2},"
               " {\"key\": \"/training/recompute\", \"values\": [\"selective\", \"full\"]}]'");
  REQUIRE(r.status == 0);
  OJson out = read_json(j);
  REQUIRE(out["configurations"] == 6);  // micro_batch 1, 2, 4 x 2 modes
  CHECK(out["rows"][0]["label"] == "micro_batch=1, recompute=selective");
  CHECK(out["rows"][5]["label"] == "micro_batch=4, recompute=full");
  CHECK(out["rows"][3]["sets"]["/training/micro_batch"] == 2);
  CHECK(out["rows"][3]["sets"]["/training/recompute"] == "full");

  r = cli("sweep " + kEightB + " --quiet --force --json " + j +
          " --set /sweep/combine=zip --set '/sweep/axes=[{\"key\": \"/training/micro_batch\", \"values\": [1, 2]},"
          " {\"key\": \"/training/recompute\", \"name\": \"rc\", \"values\": [\"selective\", \"full\"]}]'");
  REQUIRE(r.status == 0);
  out = read_json(j);
  REQUIRE(out["configurations"] == 2);
  CHECK(out["rows"][1]["label"] == "micro_batch=2, rc=full");

  // Each simulated row's figures are those of `ctwin run` with the same keys set.
  for (const auto& row : out["rows"]) {
    if (row["status"] != "simulated") continue;
    const auto single =
        cli("run " + kEightB + " --json --set /training/micro_batch=" + row["sets"]["/training/micro_batch"].dump() +
            " --set /training/recompute=" + row["sets"]["/training/recompute"].get<std::string>());
    REQUIRE(single.status == 0);
    CHECK(OJson::parse(single.out)["step_time_s"].get<double>() == row["objective"].get<double>());
  }
}

TEST_CASE("sweep combinations the scenario cannot take are rows saying why; none valid is an error") {
  const std::string j = (temp_dir() / "sweep-invalid.json").string();
  // dp 8 is written: 2 nodes (16 GPUs) cannot take it.
  auto r = cli("sweep " + kEightB + " --quiet --force --json " + j +
               " --set '/sweep/axes=[{\"key\": \"/cluster/nodes\", \"values\": [1, 2]}]'");
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  CHECK(out["invalid"] == 1);
  CHECK(out["rows"][1]["status"] == "invalid");
  CHECK(out["rows"][1]["reason"].get<std::string>().find("/training/parallelism/dp") != std::string::npos);
  CHECK(r.out.find("invalid (1)") != std::string::npos);
  r = cli("sweep " + kEightB + " --quiet --set '/sweep/axes=[{\"key\": \"/cluster/nodes\", \"values\": [2, 4]}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism/dp") != std::string::npos);
  CHECK(r.err.find("in the sweep's variant nodes=2") != std::string::npos);
}

TEST_CASE("sweep --write-best writes a scenario that ctwin run reproduces; CSV and SVG list what ran") {
  const std::string best = (temp_dir() / "best.json").string();
  const std::string csv = (temp_dir() / "sweep.csv").string();
  const std::string svg = (temp_dir() / "sweep.svg").string();
  const std::string j = (temp_dir() / "sweep-best.json").string();
  auto r = cli("sweep " + kEightB + " --auto --quiet --force --set '/sweep/auto/micro_batch=[1]' --write-best " + best +
               " --csv " + csv + " --svg " + svg + " --json " + j);
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  const OJson& top = out["rows"][out["ranking"][0].get<std::size_t>()];
  const auto rerun = cli("run " + best + " --json");
  REQUIRE(rerun.status == 0);
  CHECK(OJson::parse(rerun.out)["step_time_s"].get<double>() == top["objective"].get<double>());
  // The launch flags name the best layout's sizes.
  const int tp = top["sets"]["/training/parallelism/tp"].get<int>();
  CHECK(r.out.find("--tensor-model-parallel-size " + std::to_string(tp)) != std::string::npos);
  // CSV: a header and one line per configuration.
  const std::string text = slurp(csv);
  CHECK(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) ==
        out["configurations"].get<std::size_t>() + 1);
  CHECK(text.rfind("index,rank,status,label,step_time_s,", 0) == 0);
  const std::string plot = slurp(svg);
  CHECK(plot.rfind("<svg", 0) == 0);
  CHECK(plot.find(top["label"].get<std::string>()) != std::string::npos);
  // Outputs are never overwritten without --force, and nothing is simulated first.
  std::ofstream(csv) << "mine";
  r = cli("sweep " + kEightB + " --auto --quiet --csv " + csv);
  CHECK(r.status == 2);
  CHECK(r.err.find("--csv") != std::string::npos);
  CHECK(slurp(csv) == "mine");
}

TEST_CASE("bad sweeps are exit-2 errors naming the key") {
  auto r = cli("sweep " + kEightB + " --set '/sweep/axes=[{\"values\": [1]}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/axes/0/key") != std::string::npos);
  r = cli("sweep " + kEightB + " --set /sweep/objective=ttft_p99_s");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/objective") != std::string::npos);
  r = cli("sweep " + kEightB + " --set /sweep/objective=cost_per_million_tokens");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/gpu_hour_usd") != std::string::npos);
  r = cli("sweep " + kEightB +
          " --set '/sweep/axes=[{\"key\": \"/training/micro_batch\", \"from\": 4, \"to\": 1, "
          "\"step\": 1}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/axes/0/to") != std::string::npos);
  r = cli("sweep " + kEightB + " --set '/sweep/auto/tp=[0]' --auto");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/auto/tp/0") != std::string::npos);
  r = cli("sweep " + kEightB + " --top 0");
  CHECK(r.status == 2);
  CHECK(r.err.find("--top") != std::string::npos);
  r = cli("run " + kEightB + " --set /training/parallelism=auto");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism: is \"auto\"") != std::string::npos);
  r = cli("run " + kEightB + " --set /training/parallelism=fast");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism") != std::string::npos);
}

TEST_CASE("serving sweeps: every replica shape fills the GPU budget, ranked by goodput per GPU of the fleet") {
  const std::string j = (temp_dir() / "sweep-serving.json").string();
  const std::string scenario = "scenarios/sweep-serving-llama3-70b-64xh100.json";
  const std::string shorter = " --set /traffic/duration_s=60";
  auto r = cli("sweep " + scenario + shorter +
               " --quiet --force --set '/sweep/axes=[]' --set '/sweep/serving_auto={\"max_num_seqs\": [64, 256]}' "
               "--json " +
               j);
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  // tp 1, 2, 4, 8 (a node's powers of two) x 2 max_num_seqs; 64 GPUs each.
  REQUIRE(out["configurations"] == 8);
  for (const auto& row : out["rows"]) {
    CHECK(row["sets"]["/serving/tensor_parallel_size"].get<int>() *
              row["sets"]["/serving/data_parallel_size"].get<int>() ==
          64);
  }
  // TP1 holds 70B's 131 GiB of weights on one 80 GB GPU: refused, not simulated.
  CHECK(out["rows"][0]["status"] == "out_of_memory");
  CHECK(out["rows"][0]["reason"].get<std::string>().find("weights") != std::string::npos);
  // The best's objective is its fleet's goodput over the fleet's GPUs, as `ctwin run` reports it.
  const OJson& best = out["rows"][out["ranking"][0].get<std::size_t>()];
  const auto single = cli("run " + scenario + shorter + " --json --set /serving/tensor_parallel_size=" +
                          best["sets"]["/serving/tensor_parallel_size"].dump() +
                          " --set /serving/data_parallel_size=" + best["sets"]["/serving/data_parallel_size"].dump() +
                          " --set /serving/max_num_seqs=" + best["sets"]["/serving/max_num_seqs"].dump());
  REQUIRE(single.status == 0);
  const OJson rep = OJson::parse(single.out);
  CHECK(rep["goodput_requests_per_s"].get<double>() / 64 ==
        ctwin::test::rel_approx(best["objective"].get<double>(), 1e-12));
  CHECK(r.out.find("--data-parallel-size " + best["sets"]["/serving/data_parallel_size"].dump()) != std::string::npos);
}

TEST_CASE("serving sweeps compare aggregated and every xPyD split of the same GPUs") {
  const std::string j = (temp_dir() / "sweep-disagg.json").string();
  const auto r = cli("sweep scenarios/serving-disagg-vs-agg-llama3-70b-agg.json --quiet --force --json " + j +
                     " --set /traffic/duration_s=60 --set '/sweep/serving_auto={\"tensor_parallel_size\": [4, 8], "
                     "\"disaggregated\": true}'");
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  // 16 GPUs. Aggregated: TP4 x 4, TP8 x 2. Disaggregated x P(TP a) + y D(TP b) = 16 with x, y >= 1:
  // (4, 4): x = 1, 2, 3; (4, 8): x = 2; (8, 4): x = 1; (8, 8): x = 1. Eight in all.
  REQUIRE(out["configurations"] == 8);
  int disaggregated = 0;
  for (const auto& row : out["rows"]) {
    const auto& d = row["sets"]["/serving/disaggregation"];
    if (d.is_object()) {
      ++disaggregated;
      CHECK(d["prefill_replicas"].get<int>() * d["prefill_tensor_parallel_size"].get<int>() +
                d["decode_replicas"].get<int>() * d["decode_tensor_parallel_size"].get<int>() ==
            16);
    }
    if (row["status"] == "simulated") CHECK(row["report"]["fleet"]["gpus"] == 16);
  }
  CHECK(disaggregated == 6);
  CHECK(r.out.find("best aggregated:    TP") != std::string::npos);
  CHECK(r.out.find("best disaggregated: ") != std::string::npos);
}

TEST_CASE("serving sweeps of an MoE model try experts split over the TP ranks and sharded") {
  const std::string j = (temp_dir() / "sweep-moe.json").string();
  const auto r = cli("sweep scenarios/serving-llama3-8b-h100.json --quiet --force --json " + j +
                     " --set /model=mixtral-8x7b --set /traffic/duration_s=20"
                     " --set '/sweep/serving_auto={\"tensor_parallel_size\": [4, 8]}'");
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  // 8 GPUs: TP4 x 2 and TP8 x 1, each with and without expert parallelism.
  REQUIRE(out["configurations"] == 4);
  int ep = 0;
  for (const auto& row : out["rows"]) ep += row["sets"]["/serving/enable_expert_parallel"].get<bool>();
  CHECK(ep == 2);
  // Expert parallelism shows in the replica each report describes.
  for (const auto& row : out["rows"]) {
    const bool on = row["sets"]["/serving/enable_expert_parallel"].get<bool>();
    CHECK(row["report"]["replica"]["expert_parallel"] ==
          (on ? row["sets"]["/serving/tensor_parallel_size"] : OJson(1)));
  }
}

TEST_CASE("sweep with /job ranks by the whole job's time to train, each row as `ctwin run` reports it") {
  const std::string job = "tests/app/scenarios/job-one-failure.json";
  const std::string j = (temp_dir() / "sweep-job.json").string();
  // One scheduled failure at 290 s: checkpoints every 50, 100 or 200 steps trade stalls against
  // lost work; the objective defaults to time_to_train_days when the scenario has a /job.
  auto r = cli("sweep " + job + " --quiet --force --json " + j +
               " --set '/sweep/axes=[{\"key\": \"/job/checkpoint/interval_steps\", \"values\": [50, 100, 200]}]'");
  REQUIRE(r.status == 0);
  const OJson out = read_json(j);
  CHECK(out["objective"]["name"] == "time_to_train_days");
  CHECK(out["pruned"] == 0);  // a job objective never prunes by the step's bound
  REQUIRE(out["simulated"] == 3);
  double previous = 0;
  for (const auto& rank : out["ranking"]) {
    const auto& row = out["rows"][rank.get<std::size_t>()];
    const auto single = cli("run " + job + " --json --set /job/checkpoint/interval_steps=" +
                            row["sets"]["/job/checkpoint/interval_steps"].dump());
    REQUIRE(single.status == 0);
    const double days = OJson::parse(single.out)["job"]["time_to_train_days"].get<double>();
    CHECK(row["objective"].get<double>() == days);
    CHECK(days >= previous);  // best first
    previous = days;
  }
  // The three rows' times differ: the interval matters to the job, not to the step.
  CHECK(out["rows"][0]["objective"] != out["rows"][2]["objective"]);
  // A job objective on a scenario without /job is refused, naming the key.
  r = cli("sweep " + kEightB + " --quiet --set /sweep/objective=\\\"effective_training_time_ratio\\\"");
  CHECK(r.status == 2);
  CHECK(r.err.find("/sweep/objective") != std::string::npos);
  CHECK(r.err.find("/job") != std::string::npos);
}
