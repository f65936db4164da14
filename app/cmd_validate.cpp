// ctwin validate: runs scenarios that reproduce published measurements and prints predicted
// against published with the error, the way a user checks the simulator before trusting it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "serving_fleet.hpp"
#include "sim/error.hpp"
#include "twin.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/serving_run.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

double predicted_metric(const Scenario& sc, const ServingResult& r) {
  const std::string& m = sc.validation.metric;
  if (m == "ttft_mean_s") return r.ttft_s.mean;
  if (m == "ttft_p50_s") return r.ttft_s.p50;
  if (m == "tpot_mean_s") return r.tpot_s.mean;
  if (m == "e2e_mean_s") return r.e2e_s.mean;
  if (m == "requests_per_s") return r.requests_per_s;
  if (m == "total_tokens_per_s") return r.input_tokens_per_s + r.output_tokens_per_s;
  // Fleet metrics (issue 18): attainment over completed + rejected requests (ServingResult), as
  // DistServe counts every request sent; goodput per GPU over the fleet's GPUs, both pools' when
  // disaggregated (ServingJob::gpus); prefix hits over looked-up prompt tokens.
  if (m == "slo_attainment") return r.slo_attainment;
  if (m == "goodput_requests_per_s_per_gpu") return r.goodput_requests_per_s / serving_job(sc).gpus();
  if (m == "prefix_hit_rate") return r.prefix_hit_rate;
  return r.output_tokens_per_s;
}

double predicted_metric(const Scenario& sc, const TrainingResult& r);

namespace {

struct CasePrediction {
  double value = 0;
  bool training = false;
  double peak_bytes = 0, capacity_bytes = 0;  // training: the worst stage's memory
  bool oom = false;
};

// The case's prediction: a training step, or one serving replica under its traffic.
CasePrediction simulate_case(const Scenario& sc) {
  if (sc.kind == JobKind::serving) {
    const ServingJob& job = serving_job(sc);
    const ServingReplicaRun run = run_serving_job(job).run;  // the fleet's, when data_parallel_size > 1
    if (!run.capacity.refusal.empty()) {
      throw InputError(sc.file, "/serving", "a replica that cannot run: " + run.capacity.refusal,
                       "a deployment whose weights fit");
    }
    return {.value = predicted_metric(sc, run.result)};
  }
  const TrainingResult r = simulate_training(training_job(sc).model, training_job(sc).training,
                                             build_cluster(sc.cluster), training_options(sc));
  return {.value = predicted_metric(sc, r),
          .training = true,
          .peak_bytes = r.memory.peak,
          .capacity_bytes = r.memory.capacity,
          .oom = r.memory.oom};
}

}  // namespace

double predicted_metric(const Scenario& sc, const TrainingResult& r) {
  const std::string& m = sc.validation.metric;
  if (m == "tflops_per_gpu") return r.tflops_per_gpu;
  if (m == "hardware_tflops_per_gpu") return r.hw_tflops_per_gpu;
  if (m == "step_time_s") return r.step_time_s;
  if (m == "tokens_per_s_per_gpu") return r.tokens_per_s / r.gpus;
  if (m == "peak_allocated_bytes") return r.memory.allocated;
  if (m == "peak_reserved_bytes") return r.memory.reserved;
  if (m == "last_stage_peak_allocated_bytes") {
    return r.stage_memory.empty() ? r.memory.allocated : r.stage_memory.back().allocated;
  }
  if (m == "causal_tflops_per_gpu") {
    // The same step's model FLOPs with QK^T and PV counted over the causal half only: of
    // 12 L s h_q per token (model_flops_per_step), 6 L s h_q.
    const ModelSpec& model = training_job(sc).model;
    const TrainingConfig& cfg = training_job(sc).training;
    if (model.is_generic()) return r.tflops_per_gpu;
    const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
    const double attention = 12.0 * model.layers * cfg.seq_len * model_dims(model).q_dim * tokens;
    const double full = model_flops_per_step(model, cfg);
    return r.tflops_per_gpu * (full - attention / 2) / full;
  }
  return r.mfu;
}

int cmd_validate(const Args& args) {
  const std::string usage =
      "usage: ctwin validate PATH... [--set /pointer=value]... [--json]\n"
      "       ctwin validate MEASUREMENTS.json [--profile PROFILE.json] [--json]\n\n"
      "Simulates each scenario with a /validation block (files, or every .json in a directory) and\n"
      "prints the published figure, the prediction and the relative error. Training cases also show\n"
      "the predicted peak memory per GPU; a case that ran in reality and does not fit is marked OOM\n"
      "and counted. --set changes every case the same way, e.g. --set /network/fidelity=flow.\n"
      "With a measurements file (ctwin realrun), simulates what was measured with the profile and prints\n"
      "predicted against measured per op, per collective and per step (docs/calibration.md).";
  auto p = parse_args(args, usage,
                      {{"--json", "", "print the comparison as JSON"},
                       {"--set", "/POINTER=VALUE", "override a key in every case", true},
                       {"--profile", "PROFILE", "with a measurements file: the profile to simulate with"}});
  if (!p) return kExitOk;
  if (p->has("--profile") || (p->positional.size() == 1 && is_measurements_file(p->positional[0])))
    return validate_measurements(*p);
  if (p->positional.empty()) throw InputError("", "PATH", "no scenario given", "files or directories of scenarios");
  std::vector<std::string> files;
  for (const auto& path : p->positional) {
    if (std::filesystem::is_directory(path)) {
      for (const auto& e : std::filesystem::directory_iterator(path)) {
        if (e.path().extension() == ".json") files.push_back(e.path().string());
      }
    } else {
      files.push_back(path);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<Override> overrides;
  for (const auto& s : p->all("--set")) overrides.push_back(parse_override(s));
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  int oom = 0;
  // Training and serving cases have their own targets (docs/validation.md), so each kind is
  // summarised on its own as well as all together.
  struct Summary {
    int n = 0;
    double sum_abs = 0, worst = 0;
    void add(double abs_err) {
      ++n;
      sum_abs += abs_err;
      worst = std::max(worst, abs_err);
    }
    double mean() const { return n ? sum_abs / n : 0.0; }
  };
  Summary all;
  std::map<std::string, Summary> by_kind;
  if (!p->has("--json")) {
    std::printf("%-44s %-22s %12s %12s %8s  %s\n", "case", "metric", "published", "predicted", "error", "memory (GiB)");
  }
  ProgressLine progress("validating");
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    progress.update(static_cast<double>(i) / static_cast<double>(files.size()));
    const Scenario sc = load_scenario(f, overrides);
    for (const auto& w : sc.warnings) std::fprintf(stderr, "ctwin: warning: %s: %s\n", f.c_str(), w.c_str());
    if (!sc.validation.present()) continue;
    const CasePrediction c = simulate_case(sc);
    const double pred = c.value;
    oom += c.oom ? 1 : 0;
    const double err = (pred - sc.validation.published) / sc.validation.published;
    all.add(std::fabs(err));
    by_kind[std::string(job_kind_names.name(sc.kind))].add(std::fabs(err));
    const std::string name = std::filesystem::path(f).stem().string();
    if (p->has("--json")) {
      out.push_back({{"case", name},
                     {"file", f},
                     {"metric", sc.validation.metric},
                     {"published", sc.validation.published},
                     {"predicted", pred},
                     {"error", err},
                     {"source", sc.validation.source}});
      if (c.training) {
        out.back()["peak_memory_bytes"] = c.peak_bytes;
        out.back()["capacity_bytes"] = c.capacity_bytes;
        out.back()["oom"] = c.oom;
      }
    } else {
      progress.clear();
      char mem[64] = "";
      if (c.training) {
        std::snprintf(mem, sizeof mem, "%5.1f of %.1f%s", c.peak_bytes / (1u << 30), c.capacity_bytes / (1u << 30),
                      c.oom ? "  OOM" : "");
      }
      std::printf("%-44s %-22s %12.4g %12.4g %+7.1f%%  %s\n", name.c_str(), sc.validation.metric.c_str(),
                  sc.validation.published, pred, 100 * err, mem);
    }
  }
  progress.clear();
  if (p->has("--json")) {
    nlohmann::ordered_json j;
    j["cases"] = out;
    j["mean_abs_error"] = all.mean();
    j["max_abs_error"] = all.worst;
    j["out_of_memory"] = oom;
    for (const auto& [kind, k] : by_kind) {
      j["by_kind"][kind] = {{"cases", k.n}, {"mean_abs_error", k.mean()}, {"max_abs_error", k.worst}};
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n%d cases: mean absolute error %.1f%%, worst %.1f%%", all.n, 100 * all.mean(), 100 * all.worst);
    if (oom > 0) std::printf("; %d predicted out of memory although they ran", oom);
    std::printf("\n");
    if (by_kind.size() > 1) {
      for (const auto& [kind, k] : by_kind) {
        std::printf("  %s: %d cases, mean absolute error %.1f%%, worst %.1f%%\n", kind.c_str(), k.n, 100 * k.mean(),
                    100 * k.worst);
      }
    }
  }
  return kExitOk;
}

}  // namespace ctwin
