// ctwin validate MEASUREMENTS --profile P: the measured configuration simulated with the profile,
// predicted against measured per op, per collective and per step (docs/calibration.md): a
// training step by simulate_training, a serving iteration by the replica's iteration cost (its
// forward pass: the host overhead and the proposer are not replayed, so not compared).
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "sim/error.hpp"
#include "twin.hpp"
#include "workloads/measured_tables.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_iteration.hpp"
#include "workloads/serving_memory.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

struct Row {
  std::string label;
  double measured_s = 0, predicted_s = 0;
  double error() const { return (predicted_s - measured_s) / measured_s; }
};

struct Level {
  const char* name;
  std::vector<Row> rows;
  double mean_abs() const {
    double s = 0;
    for (const Row& r : rows) s += std::fabs(r.error());
    return rows.empty() ? 0 : s / static_cast<double>(rows.size());
  }
  double max_abs() const {
    double m = 0;
    for (const Row& r : rows) m = std::max(m, std::fabs(r.error()));
    return m;
  }
};

std::string op_label(const calibrate::OpMeasurement& o) {
  char buf[160];
  const OpCost& op = o.op;
  std::snprintf(buf, sizeof buf, "%s%s%s %s [%gx%gx%g, %.3g B] r%d", o.name.c_str(), o.name.empty() ? "" : " ",
                to_string(op.kind), to_string(op.dtype.value_or(Dtype::bf16)), op.m, op.n, op.k, op.bytes, o.rank);
  return buf;
}

const char* kLayoutKeys[] = {"tp", "pp", "dp", "cp", "ep", "etp"};

}  // namespace

int validate_measurements(const ParsedArgs& p) {
  if (p.positional.size() != 1) {
    throw InputError("", "MEASUREMENTS", "expected one measurements file with --profile",
                     "ctwin validate MEASUREMENTS.json --profile PROFILE.json");
  }
  const std::string file = p.positional[0];
  const calibrate::Measurements m = calibrate::load_measurements(file);
  const std::string profile_path = p.get("--profile").value_or("");
  const Scenario sc = measured_scenario(m, file, profile_path);
  const Profile prof = sc.profile ? *sc.profile : builtin_profile(sc.cluster.gpu.name);
  const CostModelPtr cost = profile_cost_model(prof, sc.cluster.gpu, compute_dtype(sc));
  const Cluster cluster = build_cluster(sc.cluster);

  Level ops{"op", {}}, colls{"collective", {}}, steps{"step", {}};
  for (const auto& o : m.ops) {
    if (!(o.stats.median_s > 0)) continue;
    ops.rows.push_back({op_label(o), o.stats.median_s, cost->op_seconds(o.op)});
  }
  std::vector<std::string> skipped;
  for (const auto& c : m.collectives) {
    if (!(c.stats.median_s > 0)) continue;
    CollectiveCall call{c.op, {}, c.bytes};
    bool inside = true;
    for (int r : c.ranks) {
      inside = inside && r < cluster.gpu_count();
      call.ranks.push_back(GpuId(static_cast<std::uint32_t>(r)));
    }
    char label[160];
    std::snprintf(label, sizeof label, "%s %s %zu ranks %.0f B", to_string(c.op), c.group.c_str(), c.ranks.size(),
                  c.bytes);
    if (!inside) {
      skipped.push_back(std::string(label) + ": a rank outside the scenario's cluster");
      continue;
    }
    const double t = table_or_analytical_time(cluster, call, sc.collectives, &prof.tables.collectives).seconds();
    colls.rows.push_back({label, c.stats.median_s, t});
  }
  // Serving iterations: the replica's scenario per layout, built once.
  std::map<std::string, std::pair<Scenario, std::shared_ptr<const ServingCostModel>>> replicas;
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    const auto& s = m.steps[i];
    const std::string at = "/steps/" + std::to_string(i);
    if (s.kind != "training_step") {
      if (!s.shape) {
        skipped.push_back(s.kind + " step " + std::to_string(i) + ": no iteration shape recorded");
        continue;
      }
      if (sc.kind != JobKind::serving) {
        skipped.push_back(s.kind + " step " + std::to_string(i) + ": a serving iteration of a training scenario");
        continue;
      }
      // The iteration's replica (tp, pp) onto the scenario's /serving. realrun ran every TP
      // all-reduce through NCCL (it has no framework all-reduce kernels), so the prediction does too.
      calibrate::Measurements one = m;
      one.scenario["serving"]["disable_custom_all_reduce"] = true;
      std::string tag;
      for (const auto& [k, key] :
           {std::pair{"tp", "tensor_parallel_size"}, std::pair{"pp", "pipeline_parallel_size"}}) {
        if (!s.layout.contains(k)) continue;
        if (!s.layout[k].is_number_integer()) {
          throw InputError(file, at + "/layout/" + k, "found " + shown(s.layout[k]), "an integer");
        }
        one.scenario["serving"][key] = s.layout[k];
        tag += std::string(" ") + k + std::to_string(s.layout[k].get<int>());
      }
      auto it = replicas.find(tag);
      if (it == replicas.end()) {
        Scenario ssc = measured_scenario(one, file, profile_path);
        auto cost = std::make_shared<const ServingCostModel>(serving_job(ssc).deployment);
        it = replicas.emplace(tag, std::pair{std::move(ssc), std::move(cost)}).first;
      }
      const ServingJob& job = serving_job(it->second.first);
      const KvCapacity cap = kv_capacity(job.deployment, job.scheduler);
      check_iteration_shape(*s.shape, job.scheduler, cap.num_gpu_blocks, file, at);
      const IterationTime t =
          it->second.second->iteration(batch_shape(*s.shape, job.deployment.model.attention_window));
      steps.rows.push_back({s.kind + ": " + iteration_label(*s.shape) + tag, s.stats.median_s, t.forward_s()});
      continue;
    }
    if (sc.kind != JobKind::training) {
      skipped.push_back("training_step " + std::to_string(i) + ": a training step of a serving scenario");
      continue;
    }
    // The step's layout onto the scenario's /training/parallelism.
    calibrate::Measurements one = m;
    std::string label = "training_step";
    for (const char* k : kLayoutKeys) {
      if (!s.layout.contains(k)) continue;
      if (!s.layout[k].is_number_integer()) {
        throw InputError(file, "/steps/" + std::to_string(i) + "/layout/" + k, "found " + shown(s.layout[k]),
                         "an integer");
      }
      one.scenario["training"]["parallelism"][k] = s.layout[k];
      label += std::string(" ") + k + std::to_string(s.layout[k].get<int>());
    }
    const Scenario ssc = measured_scenario(one, file, profile_path);
    const TrainingResult r = simulate_training(training_job(ssc).model, training_job(ssc).training,
                                               build_cluster(ssc.cluster), training_options(ssc));
    steps.rows.push_back({label, s.stats.median_s, r.step_time_s});
  }

  const Level* levels[] = {&ops, &colls, &steps};
  if (p.has("--json")) {
    nlohmann::ordered_json j;
    j["measurements"] = file;
    j["profile"] = profile_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(profile_path);
    for (const Level* l : levels) {
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const Row& r : l->rows) {
        rows.push_back({{"label", r.label},
                        {"measured_s", r.measured_s},
                        {"predicted_s", r.predicted_s},
                        {"error_pct", 100 * r.error()}});
      }
      j[l->name] = {{"count", l->rows.size()},
                    {"mean_abs_error_pct", 100 * l->mean_abs()},
                    {"max_abs_error_pct", 100 * l->max_abs()},
                    {"rows", rows}};
    }
    j["skipped"] = skipped;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  for (const Level* l : levels) {
    std::printf("%-56s %12s %12s %8s\n", l->name, "measured s", "predicted s", "error");
    for (const Row& r : l->rows)
      std::printf("%-56s %12.4g %12.4g %+7.1f%%\n", r.label.c_str(), r.measured_s, r.predicted_s, 100 * r.error());
    std::printf("%s: %zu compared, mean absolute error %.1f%%, max %.1f%%\n\n", l->name, l->rows.size(),
                100 * l->mean_abs(), 100 * l->max_abs());
  }
  for (const auto& s : skipped) std::printf("skipped: %s\n", s.c_str());
  return kExitOk;
}

}  // namespace ctwin
