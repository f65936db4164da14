#include "scenario.hpp"

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "sweep.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/job_params.hpp"
#include "workloads/model_json.hpp"
#include "workloads/serving_autoscale_params.hpp"
#include "workloads/serving_fleet_params.hpp"
#include "workloads/serving_scheduler_params.hpp"
#include "workloads/serving_traffic_params.hpp"
#include "workloads/training_params.hpp"

namespace ctwin {
namespace {

std::string read_text(const std::string& path) {
  return read_input_file(path, path, "", "a readable scenario JSON file");
}

}  // namespace

std::span<const ParamTable> scenario_param_tables() {
  static const std::vector<ParamTable> tables = [] {
    std::vector<ParamTable> t = {
        {"/", "the top level of a scenario", scenario_params},
        {"/cluster", "the hardware: a preset, or a GPU and a node count, with any field overridden", cluster_params},
        {"/catalog/gpus/NAME", "a GPU (topology/catalog/gpus.json; /cluster/gpu as an object takes these plus name)",
         gpu_params},
        {"/model", "how the model is named: one of preset, hf_config, generic_layers, or explicit fields",
         model_source_params},
        {"/model", "a transformer's fields (also /catalog/models/NAME, workloads/catalog/models.json)", model_params},
        {"/model/moe", "mixture of experts", moe_params},
        {"/model/mla", "multi-head latent attention (DeepSeek-V2/V3)", mla_params},
        {"/model/generic_layers/N", "one layer of a generic model, per sample", generic_layer_params},
        {"/training", "the training job", training_params},
        {"/training/parallelism", "the layout; tp x pp x dp x cp = GPUs", parallelism_params},
        {"/training/parallelism/sharding", "how ZeRO-3's collectives are issued, by framework", sharding_params},
        {"/training/precision", "dtypes and bytes per parameter", precision_params},
        {"/training/noise", "run-to-run variation: several steps, p50 and p99 step times", noise_params},
        {"/training/offload", "ZeRO-Offload / ZeRO-Infinity: what lives on host memory or NVMe", offload_params},
        {"/serving", "a serving replica: its GPUs, precisions and proposer, as vLLM's engine arguments",
         serving_deployment_params},
        {"/serving", "a serving replica's scheduler, as vLLM's engine arguments", serving_scheduler_params},
        {"/serving", "the fleet: identical replicas behind a round-robin split", serving_fleet_params},
        {"/serving", "the fleet's autoscaler and admission control", serving_fleet_policy_params},
        {"/serving/disaggregation", "disaggregated prefill/decode: the two pools and the KV link",
         serving_disaggregation_params},
        {"/serving", "a coupled fleet behind a router", serving_fleet_sim_params},
        {"/serving/router", "the router: its policy and what it knows", serving_router_params},
        {"/serving/pools/N", "one pool of replicas (the rest of each replica as /serving)", serving_pool_params},
        {"/serving/failures", "scheduled crashes, drains and adds, and the retry policy", serving_failures_params},
        {"/serving/failures/events/N", "one lifecycle event", serving_failure_event_params},
        {"/serving/cost", "the price of a GPU-hour and of electricity, for the cost and energy report",
         serving_cost_params},
        {"/network", "the network model", network_params},
        {"/validation", "a published measurement the scenario reproduces (scenarios/validation/)", validation_params},
        {"/realrun", "how `ctwin realrun` measures the scenario (docs/realrun.md)", realrun::realrun_params},
        {"/sweep", "the variants `ctwin sweep` simulates and ranks (docs/sweep.md)", sweep_params},
        {"/sweep/axes/N", "one axis: a scenario key and its values", sweep_axis_params},
        {"/sweep/auto", "the values each layout dimension may take for \"parallelism\": \"auto\"", sweep_auto_params},
        {"/sweep/serving_auto", "serving replica shapes for a GPU budget", sweep_serving_auto_params},
    };
    // /traffic's tables (workloads/serving_traffic_params.hpp) after /serving's.
    const auto serving_end = std::find_if(t.begin(), t.end(), [](const ParamTable& x) { return x.path == "/network"; });
    const std::vector<ParamTable> traffic = traffic_param_tables();
    t.insert(serving_end, traffic.begin(), traffic.end());
    // /serving/autoscaling and /serving/admission (workloads/serving_autoscale_params.hpp) before /traffic.
    // /job's tables (workloads/job_params.hpp) after /training's.
    const std::vector<ParamTable> job = job_param_tables();
    const auto serving_begin =
        std::find_if(t.begin(), t.end(), [](const ParamTable& x) { return x.path == "/serving"; });
    t.insert(serving_begin, job.begin(), job.end());
    const std::vector<ParamTable> autoscale = serving_autoscale_param_tables();
    const auto traffic_begin =
        std::find_if(t.begin(), t.end(), [](const ParamTable& x) { return x.path == "/traffic"; });
    t.insert(traffic_begin, autoscale.begin(), autoscale.end());
    return t;
  }();
  return tables;
}

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || text.empty() || text[0] != '/') {
    throw InputError("", "--set", "'" + text + "' is not /json/pointer=value", "--set /training/parallelism/tp=2");
  }
  return Override{text.substr(0, eq), text.substr(eq + 1)};
}

std::vector<std::string> cluster_warnings(const ClusterSpec& c) {
  std::vector<std::string> w;
  if (c.nic_gbyte_per_s > 1000) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "/cluster/nic_gbps is %g GB/s (%g Gb/s), above any NIC's 1,000 GB/s: if the datasheet says "
                  "%g Gb/s, write \"%g Gb/s\"",
                  c.nic_gbyte_per_s, 8 * c.nic_gbyte_per_s, c.nic_gbyte_per_s, c.nic_gbyte_per_s);
    w.emplace_back(buf);
  }
  for (auto& f : fabric_warnings(c)) w.push_back(std::move(f));
  return w;
}

void apply_override(Json& root, const Override& ov, const std::string& path) {
  Json value;
  // 1e400 or a value nested too deep: exit 2 naming the flag and the pointer.
  check_json_text(ov.value, path + " (--set)", ov.pointer);
  try {
    value = Json::parse(ov.value);
  } catch (const Json::parse_error&) {
    value = ov.value;  // not JSON: a string
  } catch (const Json::exception& e) {
    throw InputError(path + " (--set)", ov.pointer, std::string("unreadable value: ") + e.what(), "a JSON value");
  }
  Json::json_pointer ptr;
  try {
    ptr = Json::json_pointer(ov.pointer);
  } catch (const Json::exception&) {
    throw InputError(path + " (--set)", ov.pointer, "not a JSON pointer", "a path such as /training/parallelism/tp");
  }
  if (ptr.empty()) throw InputError(path + " (--set)", ov.pointer, "names the whole document", "a key such as /name");
  // Walk from the top, creating the objects that are missing; an existing non-object on the
  // way (a number, a string, an array) is an error, never overwritten.
  Json* node = &root;
  std::string walked;
  std::vector<std::string> tokens;
  for (Json::json_pointer rest = ptr; !rest.empty(); rest = rest.parent_pointer()) tokens.push_back(rest.back());
  for (auto it = tokens.rbegin(); it != tokens.rend(); ++it) {
    if (!node->is_object()) {
      throw InputError(path + " (--set)", ov.pointer,
                       (walked.empty() ? std::string("/") : walked) + " is " + shown(*node) + ", not an object",
                       "a pointer whose parents are objects (or missing, then created)");
    }
    if (std::next(it) == tokens.rend()) {
      // A bandwidth set in one spelling replaces the file's other spellings of it
      // (--set /cluster/nic_gbyte_per_s=25 over "nic_gbit_per_s": 400), as a cluster file's do.
      Json patch = Json::object();
      patch[*it] = value;
      if (walked == "/cluster") drop_other_spellings(*node, patch, cluster_params);
      if (walked.rfind("/catalog/gpus/", 0) == 0 && tokens.size() == 4) drop_other_spellings(*node, patch, gpu_params);
      walked += "/" + *it;
      (*node)[*it] = value;
    } else {
      walked += "/" + *it;
      if (!node->contains(*it)) (*node)[*it] = Json::object();
      node = &(*node)[*it];
    }
  }
}

namespace {
Scenario parse_scenario_json(Json& root, const std::string& path);
}  // namespace

Json scenario_root(const std::string& text, const std::string& path, const std::vector<Override>& overrides) {
  Json root = parse_json(text, path);
  if (!root.is_object()) throw InputError(path, "/", "found " + shown(root), "a JSON object");
  normalise_model(root);
  for (const auto& ov : overrides) {
    apply_override(root, ov, path);
    normalise_model(root);
  }
  return root;
}

Scenario parse_scenario(const std::string& text, const std::string& path, const std::vector<Override>& overrides) {
  Json root = scenario_root(text, path, overrides);
  try {
    return parse_scenario_json(root, path);
  } catch (const InputError& e) {
    // A bad value a --set put there: say so, or the user looks for it in the file.
    for (const auto& ov : overrides) {
      if (e.file != path || !(e.path == ov.pointer || e.path.rfind(ov.pointer + "/", 0) == 0)) continue;
      throw InputError(e.file, e.path, e.problem + " (set by --set " + ov.pointer + "=" + ov.value + ")", e.expected);
    }
    throw;
  }
}

namespace {
Scenario parse_scenario_json(Json& root, const std::string& path) {
  const JsonObject top(root, "", path);
  const ParamReader r(top, scenario_params);
  Scenario sc;
  sc.file = path;
  sc.name = r.string("name");
  sc.kind = r.choice("kind", job_kind_names);
  sc.seed = static_cast<std::uint64_t>(r.integer("seed"));
  const ScenarioCatalogs catalogs = read_catalogs(top);
  sc.profile = read_profile(top);
  sc.cluster = read_cluster(top, catalogs.gpus, sc.profile, &sc.warnings);
  for (auto& w : cluster_warnings(sc.cluster)) sc.warnings.push_back(std::move(w));
  sc.job = read_job(top, root, catalogs, sc);
  read_network(top, sc);
  if (!sc.cluster.degraded_links.empty() && sc.fidelity != NetworkFidelity::flow) {
    // The analytical fidelity prices a collective from its algorithm's bottleneck tier, never
    // from one link: a degraded link would be silently ignored.
    top.object("cluster").fail("degraded_links", "degraded links at the analytical network fidelity",
                               "/network/fidelity \"flow\" (only flows route over single links), or no "
                               "degraded_links");
  }
  if (top.has("realrun")) sc.realrun = realrun::read_realrun_config(top.object("realrun"));
  if (top.has("validation")) {
    const JsonObject vo = top.object("validation");
    const ParamReader v(vo, validation_params);
    sc.validation.source = v.string("source");
    sc.validation.metric = v.choice("metric");
    sc.validation.published = v.number("published");
    sc.validation.notes = v.string("notes", std::string());
    if (is_serving_metric(sc.validation.metric) != (sc.kind == JobKind::serving)) {
      throw InputError(
          path, "/validation/metric",
          "'" + sc.validation.metric + "' for a " + std::string(job_kind_names.name(sc.kind)) + " scenario",
          sc.kind == JobKind::serving ? "a serving metric (ttft_mean_s, tpot_mean_s, ...)"
                                      : "a training metric (tflops_per_gpu, mfu, ...)");
    }
  }
  return sc;
}
}  // namespace

bool is_serving_metric(std::string_view metric) {
  // The serving metrics follow the training ones in validation_metric_choices.
  const auto* it = std::find(std::begin(validation_metric_choices), std::end(validation_metric_choices), metric);
  return it - std::begin(validation_metric_choices) >= training_metric_count &&
         it != std::end(validation_metric_choices);
}

Json load_scenario_root(const std::string& path, const std::vector<Override>& overrides) {
  return scenario_root(read_text(path), path, overrides);
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  return parse_scenario(read_text(path), path, overrides);
}

}  // namespace ctwin
