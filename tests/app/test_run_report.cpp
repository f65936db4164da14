// ctwin run's report truths: --fail-on-oom, the memory headroom warning, the JSON's model,
// stages and warnings.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "tolerance.hpp"

using ctwin::test::rel_approx;

namespace {

using ctwin::test::cli;
using ctwin::test::Run;
using ctwin::test::slurp;

// Writes `scenario` to a file and runs `ctwin run FILE args`.
Run run_scenario(const std::string& scenario, const std::string& args) {
  const auto file = ctwin::test::temp_dir() / "scenario.json";
  std::ofstream(file) << scenario;
  return cli("run " + file.string() + " " + args);
}

// Llama-3.2-1B data parallel on one DGX H100 (scenarios/quickstart.json), with `extra` training keys.
std::string quickstart(int micro_batch, const std::string& extra = "") {
  return R"({"name": "t", "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3.2-1b",
             "training": {"micro_batch": )" +
         std::to_string(micro_batch) + R"(, "global_batch": )" + std::to_string(micro_batch * 8) +
         R"(, "seq_len": 4096, "parallelism": {"tp": 1, "pp": 1, "dp": 8})" + extra + "}}";
}

}  // namespace

TEST_CASE("ctwin run --fail-on-oom exits 3 when the layout does not fit, 0 when it does") {
  // 32 sequences of 4096 tokens a micro-batch without recomputation do not fit in 80 GB.
  const Run oom = run_scenario(quickstart(32), "--json --fail-on-oom");
  CHECK(oom.status == 3);
  const auto j = nlohmann::json::parse(oom.out);
  CHECK(j["memory"]["oom"] == true);
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().find("out of memory") != std::string::npos);
  CHECK(oom.err.find("warning: out of memory") != std::string::npos);
  CHECK(run_scenario(quickstart(32), "--json").status == 0);  // without the flag, a report like any other
  const Run fits = run_scenario(quickstart(1), "--fail-on-oom");
  CHECK(fits.status == 0);
  CHECK(fits.err.empty());
}

TEST_CASE("the memory headroom warning follows /training/memory_margin, on stderr and in --json") {
  // One micro-batch of 4096 tokens: about 20 GiB of state (1.24B parameters x 16 bytes) plus
  // activations, under 95% of 80 GB but above 10% of it.
  const Run dflt = run_scenario(quickstart(1), "--json");
  REQUIRE(dflt.status == 0);
  const auto j = nlohmann::json::parse(dflt.out);
  CHECK(j["warnings"].empty());
  const double peak = j["memory"]["peak_bytes"].get<double>(), cap = j["memory"]["capacity_bytes"].get<double>();
  REQUIRE(peak < 0.95 * cap);
  REQUIRE(peak > 0.10 * cap);
  const Run tight = run_scenario(quickstart(1, R"(, "memory_margin": 0.9)"), "--json");
  REQUIRE(tight.status == 0);
  const auto t = nlohmann::json::parse(tight.out);
  REQUIRE(t["warnings"].size() == 1);
  CHECK(t["warnings"][0].get<std::string>().find("memory headroom") != std::string::npos);
  CHECK(tight.err.find("warning: memory headroom") != std::string::npos);
  // The boundary is (1 - margin) x capacity: a margin just below 1 - peak/cap warns, just above does not.
  const double edge = 1 - peak / cap;
  char buf[64];
  std::snprintf(buf, sizeof buf, R"(, "memory_margin": %.6f)", edge + 1e-4);
  CHECK(nlohmann::json::parse(run_scenario(quickstart(1, buf), "--json").out)["warnings"].size() == 1);
  std::snprintf(buf, sizeof buf, R"(, "memory_margin": %.6f)", edge - 1e-4);
  CHECK(nlohmann::json::parse(run_scenario(quickstart(1, buf), "--json").out)["warnings"].empty());
}

TEST_CASE("ctwin run --help documents --fail-on-oom and exit status 3") {
  const Run h = run_scenario("{}", "--help");
  CHECK(h.status == 0);
  CHECK((h.out + h.err).find("--fail-on-oom") != std::string::npos);
  CHECK((h.out + h.err).find("3 with --fail-on-oom") != std::string::npos);
}

namespace {

// Llama-3-8B on one DGX H100: TP1 PP4 CP2 (DP1), 8 micro-batches of one 1024-token sequence.
std::string llama3_8b_pp4_cp2() {
  return R"({"name": "t", "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
             "training": {"micro_batch": 1, "global_batch": 8, "seq_len": 1024,
                          "parallelism": {"tp": 1, "pp": 4, "dp": 1, "cp": 2}}})";
}

}  // namespace

TEST_CASE("--json gives the model's counts and one row per pipeline stage adding up to the step") {
  const Run r = run_scenario(llama3_8b_pp4_cp2(), "--json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  // Meta-Llama-3-8B: 8,030,261,248 parameters (the published count), all active (dense).
  CHECK(j["model"]["params"].get<double>() == rel_approx(8030261248.0, 1e-12));
  CHECK(j["model"]["active_params"].get<double>() == rel_approx(8030261248.0, 1e-12));
  // 6N per token with N the GEMM weights (all but the 128256 x 4096 embedding and the 65 RMSNorm
  // scales of 4096), plus attention's 12 L s h_q at s = 1024.
  const double n_matmul = 8030261248.0 - 128256.0 * 4096 - 65.0 * 4096;
  CHECK(j["model"]["flops_per_token"].get<double>() == rel_approx(6 * n_matmul + 12 * 32 * 1024.0 * 4096, 1e-12));
  const double step = j["step_time_s"].get<double>();
  REQUIRE(j["stages"].size() == 4);
  double worst = 0;
  for (const auto& s : j["stages"]) {
    CHECK(s["layers"] == 8);  // 32 layers over 4 stages
    CHECK(s["compute_s"].get<double>() > 0);
    CHECK(s["idle_s"].get<double>() >= 0);
    CHECK(s["compute_s"].get<double>() + s["idle_s"].get<double>() == rel_approx(step, 1e-9));
    worst = std::max(worst, s["peak_bytes"].get<double>());
  }
  // The report's memory is the worst stage's.
  CHECK(j["memory"]["peak_bytes"].get<double>() == rel_approx(worst, 1e-12));
  CHECK(j["warnings"].is_array());
}

TEST_CASE("the text report names EP and CP when not 1, sums up the model and tabulates pipeline stages") {
  const Run r = run_scenario(llama3_8b_pp4_cp2(), "");
  REQUIRE(r.status == 0);
  CHECK(r.out.find("; TP1 PP4 DP1 CP2; ") != std::string::npos);  // EP is 1: left out
  CHECK(r.out.find("model: 8.03") != std::string::npos);
  CHECK(r.out.find("pipeline stages") != std::string::npos);
  const Run dp = run_scenario(quickstart(1), "");
  REQUIRE(dp.status == 0);
  CHECK(dp.out.find("; TP1 PP1 DP8; ") != std::string::npos);
  CHECK(dp.out.find("pipeline stages") == std::string::npos);  // pp = 1: no table
  CHECK(dp.out.find("recompute") == std::string::npos);        // none: not named
}

TEST_CASE("the report names recomputation, and full recomputation's method and layer count, in text and --json") {
  const auto with = [](const std::string& keys) {
    return R"({"name": "t", "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
               "training": {"micro_batch": 1, "global_batch": 8, "seq_len": 1024, )" +
           keys + R"(, "parallelism": {"tp": 1, "pp": 4, "dp": 2}}})";
  };
  const Run block =
      run_scenario(with(R"("recompute": "full", "recompute_method": "block", "recompute_num_layers": 3)"), "");
  REQUIRE(block.status == 0);
  CHECK(block.out.find("seq 1024; recompute full (block: the first 3 layers of each chunk)\n") != std::string::npos);
  const Run groups = run_scenario(with(R"("recompute": "full", "recompute_num_layers": 2)"), "--json");
  REQUIRE(groups.status == 0);
  const auto j = nlohmann::json::parse(groups.out);
  CHECK(j["layout"]["recompute"] == "full");
  CHECK(j["layout"]["recompute_method"] == "uniform");
  CHECK(j["layout"]["recompute_num_layers"] == 2);
  const Run sel = run_scenario(with(R"("recompute": "selective")"), "");
  REQUIRE(sel.status == 0);
  CHECK(sel.out.find("seq 1024; recompute selective\n") != std::string::npos);
}

namespace {

// Llama-3-8B over 4 stages with `split` keys in /training/parallelism.
std::string llama3_8b_pp4(const std::string& split) {
  return R"({"name": "t", "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
             "training": {"micro_batch": 1, "global_batch": 8, "seq_len": 1024,
                          "parallelism": {"tp": 1, "pp": 4, "dp": 2)" +
         split + "}}}";
}

}  // namespace

TEST_CASE("an uneven pipeline split reaches the stage table, the JSON and the stage memory") {
  const Run r = run_scenario(llama3_8b_pp4(R"(, "pipeline_layers": [9, 9, 8, 6])"), "--json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const int expected[] = {9, 9, 8, 6};
  for (int s = 0; s < 4; ++s) CHECK(j["stages"][s]["layers"] == expected[s]);
  // Stage 1 (9 layers, no embedding) against stage 2 (8 layers): compute in proportion to layers.
  CHECK(j["stages"][1]["compute_s"].get<double>() / j["stages"][2]["compute_s"].get<double>() ==
        rel_approx(9.0 / 8, 0.02));
  const Run t = run_scenario(
      llama3_8b_pp4(R"(, "decoder_first_pipeline_num_layers": 7, "decoder_last_pipeline_num_layers": 7)"), "");
  REQUIRE(t.status == 0);
  CHECK(t.out.find("    0           7") != std::string::npos);  // stage 0, 7 layers
  CHECK(t.out.find("    1           9") != std::string::npos);  // (32 - 14) / 2 = 9 on the middle stages
}

TEST_CASE("uneven pipeline split errors name the JSON path and exit 2") {
  Run r = run_scenario(llama3_8b_pp4(R"(, "pipeline_layers": [9, 9, 8, 7])"), "");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism/pipeline_layers") != std::string::npos);
  CHECK(r.err.find("sums to 33") != std::string::npos);
  r = run_scenario(llama3_8b_pp4(R"(, "pipeline_layers": [9, 9, "8", 6])"), "");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism/pipeline_layers/2") != std::string::npos);
  r = run_scenario(llama3_8b_pp4(R"(, "decoder_first_pipeline_num_layers": 7, "pipeline_layers": [8, 8, 8, 8])"), "");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism/pipeline_layers") != std::string::npos);
  r = run_scenario(llama3_8b_pp4(R"(, "decoder_last_pipeline_num_layers": 3)"), "");
  CHECK(r.status == 2);
  CHECK(r.err.find("/training/parallelism/decoder_last_pipeline_num_layers") != std::string::npos);
}
