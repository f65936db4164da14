// ctwin validate: runs scenarios that reproduce published measurements and prints predicted
// against published with the error, the way a user checks the simulator before trusting it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
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
  return r.output_tokens_per_s;
}

double predicted_metric(const Scenario& sc, const TrainingResult& r);

namespace {

// The case's prediction: a training step, or one serving replica under its traffic.
double simulate_case(const Scenario& sc) {
  if (sc.kind == JobKind::serving) {
    const ServingJob& job = serving_job(sc);
    const ServingReplicaRun run = run_serving_replica(job.deployment, job.scheduler, job.traffic);
    if (!run.capacity.refusal.empty()) {
      throw InputError(sc.file, "/serving", "a replica that cannot run: " + run.capacity.refusal,
                       "a deployment whose weights fit");
    }
    return predicted_metric(sc, run.result);
  }
  const TrainingResult r = simulate_training(training_job(sc).model, training_job(sc).training,
                                             build_cluster(sc.cluster), training_options(sc));
  return predicted_metric(sc, r);
}

}  // namespace

double predicted_metric(const Scenario& sc, const TrainingResult& r) {
  const std::string& m = sc.validation.metric;
  if (m == "tflops_per_gpu") return r.tflops_per_gpu;
  if (m == "hardware_tflops_per_gpu") return r.hw_tflops_per_gpu;
  if (m == "step_time_s") return r.step_time_s;
  if (m == "tokens_per_s_per_gpu") return r.tokens_per_s / r.gpus;
  return r.mfu;
}

int cmd_validate(const Args& args) {
  const std::string usage =
      "usage: ctwin validate PATH... [--set /pointer=value]... [--json]\n\n"
      "Simulates each scenario with a /validation block (files, or every .json in a directory) and\n"
      "prints the published figure, the prediction and the relative error. --set changes every case\n"
      "the same way, e.g. --set /network/fidelity=flow.";
  auto p = parse_args(args, usage,
                      {{"--json", "", "print the comparison as JSON"},
                       {"--set", "/POINTER=VALUE", "override a key in every case", true}});
  if (!p) return kExitOk;
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
  double sum_abs = 0;
  double worst = 0;
  int n = 0;
  if (!p->has("--json")) {
    std::printf("%-44s %-22s %12s %12s %8s\n", "case", "metric", "published", "predicted", "error");
  }
  ProgressLine progress("validating");
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    progress.update(static_cast<double>(i) / static_cast<double>(files.size()));
    const Scenario sc = load_scenario(f, overrides);
    for (const auto& w : sc.warnings) std::fprintf(stderr, "ctwin: warning: %s: %s\n", f.c_str(), w.c_str());
    if (!sc.validation.present()) continue;
    const double pred = simulate_case(sc);
    const double err = (pred - sc.validation.published) / sc.validation.published;
    sum_abs += std::fabs(err);
    worst = std::max(worst, std::fabs(err));
    ++n;
    const std::string name = std::filesystem::path(f).stem().string();
    if (p->has("--json")) {
      out.push_back({{"case", name},
                     {"file", f},
                     {"metric", sc.validation.metric},
                     {"published", sc.validation.published},
                     {"predicted", pred},
                     {"error", err},
                     {"source", sc.validation.source}});
    } else {
      progress.clear();
      std::printf("%-44s %-22s %12.4g %12.4g %+7.1f%%\n", name.c_str(), sc.validation.metric.c_str(),
                  sc.validation.published, pred, 100 * err);
    }
  }
  progress.clear();
  if (p->has("--json")) {
    nlohmann::ordered_json j;
    j["cases"] = out;
    j["mean_abs_error"] = n ? sum_abs / n : 0.0;
    j["max_abs_error"] = worst;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("\n%d cases: mean absolute error %.1f%%, worst %.1f%%\n", n, n ? 100 * sum_abs / n : 0.0, 100 * worst);
  }
  return kExitOk;
}

}  // namespace ctwin
