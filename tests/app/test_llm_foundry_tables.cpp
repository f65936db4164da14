#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "test_paths.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;

namespace {

// One row of tests/app/data/llm-foundry-mpt-throughput.csv.
struct Row {
  std::string gpu, model;
  int layers = 0, hidden = 0, heads = 0, seq = 0, gpus = 0, micro_batch = 0, grad_accum = 0;
  bool checkpointing = false;
  double published = 0;  // tokens/s per GPU
};

std::vector<Row> read_rows() {
  const auto path =
      std::filesystem::path(ctwin::test::source_dir()) / "tests" / "app" / "data" / "llm-foundry-mpt-throughput.csv";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::istringstream f(line);
    Row r;
    std::string c;
    std::getline(f, r.gpu, ',');
    std::getline(f, r.model, ',');
    for (int* v : {&r.layers, &r.hidden, &r.heads, &r.seq, &r.gpus, &r.micro_batch, &r.grad_accum}) {
      std::getline(f, c, ',');
      *v = std::stoi(c);
    }
    std::getline(f, c, ',');
    r.checkpointing = c == "1";
    std::getline(f, c, ',');
    r.published = std::stod(c);
    rows.push_back(r);
  }
  return rows;
}

// The row as the 8-GPU MPT-7B case with the row's model, batch, GPUs and attention kernel.
double predicted_tokens_per_gpu(const Row& r, const std::string& attention) {
  const auto base =
      std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" / "mpt-7b-8xh100.json";
  std::vector<Override> o;
  auto set = [&](const std::string& key, const std::string& value) { o.push_back(parse_override(key + "=" + value)); };
  set("/model/layers", std::to_string(r.layers));
  set("/model/hidden", std::to_string(r.hidden));
  set("/model/heads", std::to_string(r.heads));
  set("/model/ffn_hidden", std::to_string(4 * r.hidden));
  set("/model/max_seq", std::to_string(r.seq));
  set("/training/seq_len", std::to_string(r.seq));
  set("/training/micro_batch", std::to_string(r.micro_batch));
  set("/training/global_batch", std::to_string(r.micro_batch * r.grad_accum * r.gpus));
  set("/training/parallelism/dp", std::to_string(r.gpus));
  set("/training/recompute", r.checkpointing ? "full" : "none");
  set("/training/attention", attention);
  set("/cluster/nodes", std::to_string(r.gpus / 8));
  if (r.gpu == "A100") {
    set("/cluster/preset", "dgx-a100");
    set("/cluster/gpu", "A100-SXM-80GB");
  }
  const Scenario sc = load_scenario(base.string(), o);
  const TrainingJob& job = training_job(sc);
  const auto res = simulate_training(job.model, job.training, build_cluster(sc.cluster), {});
  return res.tokens_per_s / r.gpus;
}

}  // namespace

// LLM Foundry's 8-GPU tables run each MPT size from 512 to 65,536 tokens a sequence with the
// Triton attention kernel. Its rate is fitted to the rows of 16K tokens and more (docs/validation.md,
// "Attention kernels"); the rest of each table checks it, and the generation's flash kernel must
// miss the long rows as the docs say it did before.
TEST_CASE("LLM Foundry's MPT tables: with Triton attention each table within 8% on average, long rows within 12%") {
  const std::vector<Row> rows = read_rows();
  REQUIRE(rows.size() == 93);
  for (const std::string gpu : {"H100", "A100"}) {
    double sum_triton = 0, sum_flash = 0;
    int n = 0;
    // docs/validation.md, "Checkpointing splits both 8-GPU tables": each row's error with triton,
    // by activation checkpointing, printed (-s) for the docs' ranges.
    std::ostringstream split;
    for (const Row& r : rows) {
      if (r.gpu != gpu) continue;
      const double predicted = predicted_tokens_per_gpu(r, "triton");
      const double triton = predicted / r.published - 1;
      const double flash = predicted_tokens_per_gpu(r, "flash") / r.published - 1;
      CAPTURE(r.model);
      CAPTURE(r.seq);
      CAPTURE(r.gpus);
      CAPTURE(triton);
      if (r.seq >= 16384) CHECK(std::fabs(triton) <= 0.12);
      sum_triton += std::fabs(triton);
      sum_flash += std::fabs(flash);
      ++n;
      // A micro-batch's seconds, published less predicted.
      const double tokens = static_cast<double>(r.micro_batch) * r.seq;
      split << "\n  " << r.model << " seq " << r.seq << " gpus " << r.gpus << " mb " << r.micro_batch
            << (r.checkpointing ? " checkpointed " : " not checkpointed ") << 100 * triton << "%, micro-batch "
            << 1e3 * (tokens / r.published - tokens / predicted) << " ms slower published";
    }
    MESSAGE(gpu << " rows with triton:" << split.str());
    CAPTURE(gpu);
    CAPTURE(sum_triton / n);
    CAPTURE(sum_flash / n);
    CHECK(sum_triton / n <= 0.08);
    // docs/validation.md: 34% (H100) and 17% (A100) with the flash kernel.
    CHECK(sum_flash / n >= 0.15);
  }
}
