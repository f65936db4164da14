// `ctwin realrun` from the command line on the CPU backend: the twin scenarios run and write a
// measurements file the reader takes, and bad invocations are clear errors with exit status 2.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "asan.hpp"
#include "calibrate/measurements.hpp"
#include "ctwin_cli.hpp"

using ctwin::test::cli;
using ctwin::test::temp_dir;

TEST_CASE("ctwin realrun on both twin scenarios writes measurements of their layouts; ctwin run simulates them") {
  for (const char* name : {"cpu-fit", "cpu-heldout"}) {
    CAPTURE(name);
    const std::string scenario = std::string("scenarios/twin/") + name + ".json";
    const std::string out = (temp_dir() / (std::string(name) + ".json")).string();
    const auto r =
        cli("realrun " + scenario + " -o " + out +
            " --repeats 1 --warmup 0 --set /realrun/sweep=false --set /realrun/collective_max_bytes=4096 --quiet");
    REQUIRE(r.status == 0);
    CHECK(r.out.empty());  // --quiet
    const auto m = ctwin::calibrate::load_measurements(out);
    CHECK(m.backend == "cpu");
    CHECK(m.host.ranks == 2);
    CHECK(m.scenario_file == scenario);
    CHECK(m.scenario["realrun"]["sweep"] == false);  // the scenario as run, --set applied
    REQUIRE(m.steps.size() == 1);
    const bool fit = std::string(name) == "cpu-fit";
    CHECK(m.steps[0].layout["dp"] == (fit ? 2 : 1));
    CHECK(m.steps[0].layout["tp"] == (fit ? 1 : 2));
    for (const auto& c : m.collectives) CHECK(c.group == (fit ? "dp" : "tp"));
    CHECK(cli("run " + scenario).status == 0);
  }
}

TEST_CASE("a folded MoE layout (ETP1) is recorded with its expert TP, and validate predicts that layout") {
  // cpu-fit made a mixture of 4 experts on 4 thread ranks: TP2 DP2 EP2, whole experts (ETP1).
  // EP2 divides DP2, so the same layout with the experts split over TP (etp 2) is valid too.
  nlohmann::json sc = nlohmann::json::parse(
      ctwin::test::slurp(std::string(ctwin::test::source_dir()) + "/scenarios/twin/cpu-fit.json"));
  sc["cluster"]["gpus_per_node"] = 4;
  sc["model"]["moe"] = {{"experts", 4}, {"top_k", 2}};
  sc["training"]["parallelism"] = {{"tp", 2}, {"pp", 1}, {"dp", 2}, {"ep", 2}, {"etp", 1}, {"sequence_parallel", true}};
  const auto d = temp_dir();
  const std::string scenario = (d / "moe-fit.json").string(), out = (d / "moe-meas.json").string();
  std::ofstream(scenario) << sc.dump();
  REQUIRE(cli("realrun " + scenario + " -o " + out +
              " --repeats 1 --warmup 0 --set /realrun/sweep=false --set /realrun/collective_max_bytes=4096 --quiet")
              .status == 0);
  const auto m = ctwin::calibrate::load_measurements(out);
  REQUIRE(m.steps.size() == 1);
  CHECK(m.steps[0].layout["ep"] == 2);
  CHECK(m.steps[0].layout["etp"] == 1);
  // validate applies the recorded layout, etp included: its prediction is `ctwin run`'s of the
  // folded scenario, and not that of the same file recorded with experts split over TP (etp 2).
  const auto predicted = [](const std::string& file) {
    const auto v = cli("validate " + file + " --json");
    REQUIRE_MESSAGE(v.status == 0, v.err);
    const auto j = nlohmann::json::parse(v.out);
    REQUIRE(j["step"]["rows"].size() == 1);
    return j["step"]["rows"][0];
  };
  const auto row = predicted(out);
  CHECK(row["label"] == "training_step tp2 pp1 dp2 cp1 ep2 etp1");
  const auto run = cli("run " + scenario + " --json");
  REQUIRE(run.status == 0);
  CHECK(row["predicted_s"] == nlohmann::json::parse(run.out)["step_time_s"]);
  // Rewritten with sorted keys, so "schema" comes after the scenario: still a measurements file.
  nlohmann::json split = nlohmann::json::parse(ctwin::test::slurp(out));
  split["steps"][0]["layout"]["etp"] = 2;
  const std::string split_file = (d / "moe-meas-etp2.json").string();
  std::ofstream(split_file) << split.dump();
  const auto split_row = predicted(split_file);
  CHECK(split_row["label"] == "training_step tp2 pp1 dp2 cp1 ep2 etp2");
  CHECK(split_row["predicted_s"] != row["predicted_s"]);
}

namespace {

using ctwin::test::kAsan;  // its leak check reports Open MPI's allocations: no mpirun cases under it

// `mpirun -n N ctwin ARGS` from the source tree, as root where CI runs; status, stdout, stderr.
ctwin::test::Run mpirun_ctwin(int n, const std::string& args) {
  const auto d = temp_dir();
  const std::string out = (d / "mpi-out").string(), err = (d / "mpi-err").string();
  const std::string cmd = std::string("cd ") + ctwin::test::source_dir() + " && mpirun -n " + std::to_string(n) +
                          " --oversubscribe" + (geteuid() == 0 ? " --allow-run-as-root" : "") + " " +
                          ctwin::test::ctwin_exe() + " " + args + " >" + out + " 2>" + err + " </dev/null";
  ctwin::test::Run r;
  const int rc = std::system(cmd.c_str());
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = ctwin::test::slurp(out);
  r.err = ctwin::test::slurp(err);
  return r;
}

}  // namespace

TEST_CASE("ctwin realrun under mpirun runs one rank per process and measures what its threads measure" *
          doctest::test_suite("slow")) {
  if (kAsan || std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: " << (kAsan ? "an AddressSanitizer build" : "no mpirun on PATH"));
    return;
  }
  const std::string args =
      " --repeats 1 --warmup 0 --set /realrun/sweep=false --set /realrun/collective_max_bytes=65536 --quiet";
  const std::string mpi_out = (temp_dir() / "mpi-fit.json").string();
  const std::string thr_out = (temp_dir() / "threads-fit.json").string();
  const auto r = mpirun_ctwin(2, "realrun scenarios/twin/cpu-fit.json -o " + mpi_out + args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(cli("realrun scenarios/twin/cpu-fit.json -o " + thr_out + args).status == 0);
  const auto m = ctwin::calibrate::load_measurements(mpi_out);
  const auto t = ctwin::calibrate::load_measurements(thr_out);
  CHECK(m.host.ranks == 2);
  CHECK(m.host.processes == 2);
  CHECK(t.host.processes == 1);
  CHECK(m.host.versions.value("mpi", std::string()).rfind("Open MPI", 0) == 0);
  // The same plan: every kernel shape, every collective size of the DP communicator, the step.
  REQUIRE(m.ops.size() == t.ops.size());
  for (std::size_t i = 0; i < m.ops.size(); ++i) CHECK(m.ops[i].op.flops == t.ops[i].op.flops);
  REQUIRE(m.collectives.size() == t.collectives.size());
  for (std::size_t i = 0; i < m.collectives.size(); ++i) {
    CHECK(m.collectives[i].bytes == t.collectives[i].bytes);
    CHECK(m.collectives[i].group == "dp");
    CHECK(m.collectives[i].stats.median_s > 0);
  }
  REQUIRE(m.steps.size() == 1);
  CHECK(m.steps[0].stats.median_s > 0);
  // One process per rank, or a clear error: three processes for a layout of two.
  const auto bad = mpirun_ctwin(3, "realrun scenarios/twin/cpu-fit.json -o " + mpi_out + " --force" + args);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("a layout of 2 ranks over 3 MPI processes") != std::string::npos);
  CHECK(bad.err.find("mpirun -np 2") != std::string::npos);
}

TEST_CASE("ctwin realrun refuses what it cannot run with exit status 2 and a message naming the problem") {
  const std::string out = (temp_dir() / "realrun-refused.json").string();
  auto r = cli("realrun scenarios/twin/cpu-fit.json");
  CHECK(r.status == 2);
  CHECK(r.err.find("-o") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-fit.json -o " + out + " --ranks 3");
  CHECK(r.status == 2);
  CHECK(r.err.find("--ranks: 3 for a layout of 2 GPUs") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-fit.json -o " + out + " --backend tpu");
  CHECK(r.status == 2);
  CHECK(r.err.find("'tpu' is no backend") != std::string::npos);
  // Serving: what realrun cannot replay, and iterations the scheduler could never run.
  r = cli("realrun scenarios/twin/cpu-serving.json -o " + out +
          " --set /serving/tensor_parallel_size=1 --set /serving/pipeline_parallel_size=2");
  CHECK(r.status == 2);
  CHECK(r.err.find("/serving/pipeline_parallel_size") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-serving.json -o " + out +
          " --set '/realrun/iterations=[{\"prefill\": {\"tokens\": 300}}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("/realrun/iterations/0") != std::string::npos);
  CHECK(r.err.find("max_num_batched_tokens (256)") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-serving.json -o " + out +
          " --set /serving/gpu_memory_utilization=0.163 --set '/realrun/iterations=[{\"decode\": {\"batch\": 8, "
          "\"context\": 1024}}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("512 KV blocks of 16 tokens") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-fit.json -o " + out +
          " --set '/realrun/iterations=[{\"decode\": {\"batch\": 1, \"context\": 8}}]'");
  CHECK(r.status == 2);
  CHECK(r.err.find("/realrun/iterations") != std::string::npos);
  r = cli("realrun scenarios/twin/cpu-fit.json -o " + out + " --set /realrun/repeats=0");
  CHECK(r.status == 2);
  CHECK(r.err.find("/realrun/repeats") != std::string::npos);
  // Its attention kernels have no window: a windowed model is refused, not run over the whole sequence.
  r = cli("realrun scenarios/twin/cpu-fit.json -o " + out + " --set /model/attention_window=8");
  CHECK(r.status == 2);
  CHECK(r.err.find("/model/attention_window") != std::string::npos);
  CHECK(!std::filesystem::exists(out));
}

TEST_CASE("ctwin realrun --backend cuda reads the scenario as the CPU backend does and refuses before touching a GPU") {
  // ctwin-realrun sits beside ctwin where the CUDA Toolkit was found (CI's machines have it,
  // and no GPU). Without it, ctwin says how to get it.
  const std::string out = (temp_dir() / "realrun-cuda.json").string();
  const bool built =
      std::filesystem::exists(std::filesystem::path(ctwin::test::ctwin_exe()).parent_path() / "ctwin-realrun");
  auto r = cli("realrun --backend cuda scenarios/twin/no-such.json -o " + out);
  CHECK(r.status == 2);
  if (!built) {
    CHECK(r.err.find("built without CUDA") != std::string::npos);
    return;
  }
  // The same input errors as the CPU backend, before any device: a missing file, --ranks.
  CHECK(r.err.find("scenarios/twin/no-such.json") != std::string::npos);
  r = cli("realrun --backend cuda scenarios/twin/h200-fit.json -o " + out + " --ranks 2");
  CHECK(r.status == 2);
  CHECK(r.err.find("--ranks: 2 for a layout of 1 GPUs") != std::string::npos);
  // A layout larger than the GPUs this process sees (none here; one on a one-GPU node).
  r = cli("realrun --backend cuda scenarios/twin/cpu-fit.json -o " + out);
  CHECK(r.status == 2);
  CHECK(r.err.find("a layout of 2 GPUs; this process sees") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("ctwin realrun on the serving twin replays its planned iterations; calibrate and validate take the file") {
  const std::string out = (temp_dir() / "cpu-serving.json").string();
  const auto r = cli("realrun scenarios/twin/cpu-serving.json -o " + out +
                     " --repeats 1 --warmup 0 --set /realrun/sweep=false --set /realrun/collective_max_bytes=4096");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.out.find("step (decode 8 at 512)") != std::string::npos);
  const auto m = ctwin::calibrate::load_measurements(out);
  // B 256, S 8, L 1024: 4 prefill chunks, 6 decode batches, 2 mixed.
  REQUIRE(m.steps.size() == 12);
  int prefill = 0, decode = 0, mixed = 0;
  for (const auto& s : m.steps) {
    REQUIRE(s.shape.has_value());
    CHECK(s.layout["tp"] == 2);
    prefill += s.kind == "prefill";
    decode += s.kind == "decode";
    mixed += s.kind == "mixed";
  }
  CHECK(prefill == 4);
  CHECK(decode == 6);
  CHECK(mixed == 2);
  for (const auto& c : m.collectives) CHECK(c.group == "tp");
  const std::string prof = (temp_dir() / "cpu-serving-profile.json").string();
  const auto c = cli("calibrate " + out + " -o " + prof + " --force");
  REQUIRE_MESSAGE(c.status == 0, c.err);
  CHECK(c.out.find("gemm") != std::string::npos);
  const auto v = cli("validate " + out + " --profile " + prof + " --json");
  REQUIRE_MESSAGE(v.status == 0, v.err);
  const auto j = nlohmann::json::parse(v.out);
  CHECK(j["step"]["count"] == 12);
  CHECK(j["skipped"].empty());
  CHECK(cli("run scenarios/twin/cpu-serving.json").status == 0);
}
