#include "sweep.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "job_report.hpp"
#include "scenario_parts.hpp"
#include "serving_fleet.hpp"
#include "serving_report.hpp"
#include "sim/error.hpp"
#include "training_report.hpp"
#include "workloads/serving_run.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

// Configurations simulated between two updates of the pruning threshold. Fixed, so that which
// layouts are pruned never depends on the number of threads or ranks.
constexpr std::size_t kWave = 16;
// At most this many configurations in one sweep (a grid of big axes is a typo, not a plan).
constexpr std::size_t kMaxConfigurations = 200000;

std::vector<int> int_list(const JsonObject& o, const char* key, int min, int max) {
  std::vector<int> v;
  if (!o.has(key)) return v;
  const Json& a = o.raw(key);
  if (!a.is_array() || a.empty()) o.fail(key, "found " + shown(a), "a non-empty list of integers");
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_number_integer() || a[i].get<long long>() < min || a[i].get<long long>() > max) {
      o.fail(std::string(key) + "/" + std::to_string(i), "found " + shown(a[i]),
             "an integer from " + std::to_string(min) + " to " + std::to_string(max));
    }
    v.push_back(a[i].get<int>());
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

LayoutSpace read_space(const JsonObject& o) {
  const ParamReader r(o, sweep_auto_params);
  LayoutSpace s;
  s.tp = int_list(o, "tp", 1, 1 << 16);
  s.pp = int_list(o, "pp", 1, 1 << 16);
  s.cp = int_list(o, "cp", 1, 1 << 16);
  s.ep = int_list(o, "ep", 1, 1 << 16);
  s.virtual_stages = int_list(o, "virtual_stages", 1, 1024);
  s.zero_stage = int_list(o, "zero_stage", 0, 3);
  s.micro_batch = int_list(o, "micro_batch", 1, 1 << 20);
  if (o.has("recompute")) {
    const Json& a = o.raw("recompute");
    if (!a.is_array() || a.empty()) o.fail("recompute", "found " + shown(a), "a non-empty list of mode names");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto rc = a[i].is_string() ? recompute_names.parse(a[i].get<std::string>()) : std::nullopt;
      if (!rc) o.fail("recompute/" + std::to_string(i), "found " + shown(a[i]), "\"none\", \"selective\" or \"full\"");
      if (std::find(s.recompute.begin(), s.recompute.end(), *rc) == s.recompute.end()) s.recompute.push_back(*rc);
    }
    std::sort(s.recompute.begin(), s.recompute.end());
  }
  return s;
}

ServingSpace read_serving_space(const JsonObject& o) {
  const ParamReader r(o, sweep_serving_auto_params);
  ServingSpace s;
  s.present = true;
  s.gpus = r.has("gpus") ? static_cast<int>(r.integer("gpus", std::nullopt, 1 << 24)) : 0;
  s.tp = int_list(o, "tensor_parallel_size", 1, 1 << 16);
  s.pp = int_list(o, "pipeline_parallel_size", 1, 1 << 16);
  s.max_num_seqs = int_list(o, "max_num_seqs", 1, 1 << 20);
  for (int v : int_list(o, "max_num_batched_tokens", 1, 1 << 30)) s.max_num_batched_tokens.push_back(v);
  s.disaggregated = r.boolean("disaggregated");
  if (o.has("enable_expert_parallel")) {
    const Json& a = o.raw("enable_expert_parallel");
    if (!a.is_array() || a.empty()) o.fail("enable_expert_parallel", "found " + shown(a), "a list of true/false");
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_boolean())
        o.fail("enable_expert_parallel/" + std::to_string(i), "found " + shown(a[i]), "true or false");
      s.expert_parallel.push_back(a[i].get<bool>());
    }
  }
  return s;
}

SweepAxis read_axis(const JsonObject& o) {
  const ParamReader r(o, sweep_axis_params);
  SweepAxis a;
  a.pointer = r.string("key");
  if (a.pointer.empty() || a.pointer[0] != '/' || a.pointer == "/sweep" || a.pointer.rfind("/sweep/", 0) == 0) {
    o.fail("key", "found " + shown(Json(a.pointer)), "a JSON pointer into the scenario outside /sweep");
  }
  a.name = r.string("name", a.pointer.substr(a.pointer.rfind('/') + 1));
  const bool listed = r.has("values");
  const bool ranged = r.has("from") || r.has("to");
  if (listed == ranged) {
    o.fail(listed ? "from" : "values", listed ? "given together with values" : "missing",
           "either \"values\": [...] or \"from\", \"to\" and \"step\" or \"times\"");
  }
  if (listed) {
    const Json& v = o.raw("values");
    if (!v.is_array() || v.empty()) o.fail("values", "found " + shown(v), "a non-empty list of values");
    for (const auto& x : v) a.values.push_back(x);
    return a;
  }
  const double from = r.number("from"), to = r.number("to");
  if (r.has("step") == r.has("times")) {
    o.fail(r.has("step") ? "times" : "step", r.has("step") ? "given together with step" : "missing",
           "one of \"step\" (added) or \"times\" (multiplied)");
  }
  if (to < from) o.fail("to", "found " + shown(Json(to)) + ", below from " + shown(Json(from)), "to >= from");
  const bool geometric = r.has("times");
  const double by = geometric ? r.number("times") : r.number("step");
  if (geometric && from <= 0) o.fail("from", "found " + shown(Json(from)), "a value > 0 for a geometric range");
  const bool integral = std::floor(from) == from && std::floor(by) == by;
  for (double x = from; x <= to * (1 + 1e-12);
       x = geometric ? x * by : from + by * static_cast<double>(a.values.size())) {
    if (a.values.size() >= 10000) o.fail("to", "gives more than 10,000 values", "a shorter range or a larger step");
    if (integral) {
      a.values.emplace_back(static_cast<long long>(std::llround(x)));
    } else {
      a.values.emplace_back(x);
    }
  }
  return a;
}

// A value set at a pointer, creating parents; a parent that is not an object is an InputError
// naming where the value came from.
void set_at(Json& root, const std::string& pointer, const Json& value, const std::string& file,
            const std::string& from) {
  // null removes the key (an aggregated shape in a sweep whose scenario is disaggregated).
  if (value.is_null()) {
    const Json::json_pointer ptr(pointer);
    if (root.contains(ptr)) root.at(ptr.parent_pointer()).erase(ptr.back());
    return;
  }
  try {
    apply_override(root, Override{pointer, value.dump()}, file);
  } catch (const InputError& e) {
    throw InputError(file, from, "cannot set " + pointer + ": " + e.problem, e.expected);
  }
}

// "value" as a label shows it: strings bare, everything else as JSON.
// A value as a label shows it: an object as (key=value ...), so a policy block reads as one.
std::string value_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_object() || v.empty()) return v.dump();
  std::string s;
  for (const auto& [k, x] : v.items()) s += (s.empty() ? "(" : " ") + k + "=" + value_text(x);
  return s + ")";
}

// A layout as the keys it sets; sweep_row_scenario drops the written stage split first.
OrderedJson layout_sets(const TrainingConfig& c) {
  const Parallelism& p = c.parallel;
  return OrderedJson{{"/training/parallelism/tp", p.tp},
                     {"/training/parallelism/pp", p.pp},
                     {"/training/parallelism/dp", p.dp},
                     {"/training/parallelism/cp", p.cp},
                     {"/training/parallelism/ep", p.ep},
                     {"/training/parallelism/etp", p.etp},
                     {"/training/parallelism/sequence_parallel", p.sequence_parallel},
                     {"/training/parallelism/zero_stage", p.zero_stage},
                     {"/training/parallelism/schedule", schedule_names.name(p.schedule)},
                     {"/training/parallelism/virtual_stages", p.virtual_stages},
                     {"/training/micro_batch", c.micro_batch},
                     {"/training/recompute", recompute_names.name(c.recompute)}};
}

// The keys of a written stage split, which an enumerated layout (an even split) replaces.
constexpr const char* kSplitKeys[] = {"pipeline_layers", "decoder_first_pipeline_num_layers",
                                      "decoder_last_pipeline_num_layers", "account_for_embedding_in_pipeline_split",
                                      "account_for_loss_in_pipeline_split"};

double report_number(const OrderedJson& j, const char* pointer) {
  const auto ptr = OrderedJson::json_pointer(pointer);
  return j.contains(ptr) && j.at(ptr).is_number() ? j.at(ptr).get<double>() : std::nan("");
}

double objective_value(const SweepObjective& obj, const OrderedJson& rep, double gpu_hour_usd) {
  const std::string_view n = obj.name;
  if (n == "step_time_s") return report_number(rep, "/step_time_s");
  if (n == "mfu") return report_number(rep, "/mfu");
  if (n == "tflops_per_gpu") return report_number(rep, "/tflops_per_gpu");
  if (n == "tokens_per_s_per_gpu") return report_number(rep, "/tokens_per_s") / report_number(rep, "/gpus");
  if (n == "cost_per_million_tokens") {
    return report_number(rep, "/gpus") * gpu_hour_usd / 3600 / report_number(rep, "/tokens_per_s") * 1e6;
  }
  if (n == "time_to_train_days") return report_number(rep, "/job/time_to_train_days");
  if (n == "effective_training_time_ratio") return report_number(rep, "/job/effective_training_time_ratio");
  const double gpus = report_number(rep, "/fleet/gpus");
  if (n == "goodput_per_gpu") return report_number(rep, "/goodput_requests_per_s") / gpus;
  if (n == "output_tokens_per_s_per_gpu") return report_number(rep, "/throughput/output_tokens_per_s") / gpus;
  if (n == "ttft_p99_s") return report_number(rep, "/ttft_s/p99");
  if (n == "tpot_p99_s") return report_number(rep, "/tpot_s/p99");
  if (n == "serving_cost_per_million_tokens") {
    return gpus * gpu_hour_usd / 3600 / report_number(rep, "/throughput/output_tokens_per_s") * 1e6;
  }
  return std::nan("");
}

// A configuration to evaluate: its variant's scenario and, for an auto layout, the layout.
struct Candidate {
  std::size_t variant = 0;
  std::optional<TrainingConfig> layout;
  bool written = false;  // --auto: the scenario's own layout
};

// Whether two configs are the same layout in every field the search varies.
bool same_layout(const TrainingConfig& a, const TrainingConfig& b) {
  const Parallelism &x = a.parallel, &y = b.parallel;
  return x.tp == y.tp && x.pp == y.pp && x.dp == y.dp && x.cp == y.cp && x.ep == y.ep && x.etp == y.etp &&
         x.zero_stage == y.zero_stage && x.sequence_parallel == y.sequence_parallel && x.schedule == y.schedule &&
         x.virtual_stages == y.virtual_stages && x.pipeline_layers == y.pipeline_layers &&
         x.first_stage_layers == y.first_stage_layers && x.last_stage_layers == y.last_stage_layers &&
         x.account_for_embedding == y.account_for_embedding && x.account_for_loss == y.account_for_loss &&
         a.micro_batch == b.micro_batch && a.recompute == b.recompute;
}

// A scenario whose training layout is `cfg` (a copy of the variant's).
Scenario with_layout(const Scenario& base, const TrainingConfig& cfg) {
  Scenario sc = base;
  auto& job = std::get<TrainingJob>(sc.job);
  job.training = cfg;
  job.auto_layout = false;
  return sc;
}

}  // namespace

const SweepObjective& sweep_objective(std::string_view name) {
  for (const auto& o : sweep_objectives) {
    if (o.name == name) return o;
  }
  return sweep_objectives[0];
}

SweepSpec read_sweep_spec(const Json& root, const std::string& file) {
  SweepSpec s;
  const JsonObject top(root, "", file);
  if (!top.has("sweep")) return s;
  if (!top.raw("sweep").is_object()) top.fail("sweep", "found " + shown(top.raw("sweep")), "an object");
  const JsonObject so = top.object("sweep");
  const ParamReader r(so, sweep_params);
  s.combine = r.choice("combine", sweep_combine_names);
  s.objective = r.has("objective") ? r.choice("objective") : std::string();
  s.top = static_cast<int>(r.integer("top"));
  s.gpu_hour_usd = r.number("gpu_hour_usd");
  s.exhaustive = r.boolean("exhaustive");
  if (r.has("auto")) s.space = read_space(so.object("auto"));
  if (r.has("serving_auto")) s.serving = read_serving_space(so.object("serving_auto"));
  if (r.has("axes")) {
    const Json& axes = so.raw("axes");
    if (!axes.is_array()) so.fail("axes", "found " + shown(axes), "a list of axes");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (!axes[i].is_object()) so.fail("axes/" + std::to_string(i), "found " + shown(axes[i]), "an axis object");
      s.axes.push_back(read_axis(JsonObject(axes[i], so.child("axes/" + std::to_string(i)), file)));
    }
  }
  if (s.combine == SweepCombine::zip) {
    for (std::size_t i = 1; i < s.axes.size(); ++i) {
      if (s.axes[i].values.size() != s.axes[0].values.size()) {
        so.fail("axes/" + std::to_string(i),
                "has " + std::to_string(s.axes[i].values.size()) + " values, axis 0 has " +
                    std::to_string(s.axes[0].values.size()),
                "axes of equal length for combine \"zip\" (or combine \"grid\")");
      }
    }
  }
  if (!s.objective.empty() && s.objective.find("cost") != std::string::npos && s.gpu_hour_usd <= 0) {
    so.fail("gpu_hour_usd", "missing for objective \"" + s.objective + "\"", "the price of one GPU-hour in USD, > 0");
  }
  return s;
}

void simulate_rows_on_threads(std::vector<SweepRow*>& rows, const std::function<void(SweepRow&)>& simulate, int threads,
                              const std::function<void()>& on_done) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (std::size_t i; !failed && (i = next++) < rows.size();) {
      try {
        simulate(*rows[i]);
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
      }
      if (on_done) on_done();
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(rows.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

Json sweep_row_scenario(const std::string& path, const std::vector<Override>& overrides, const SweepRow& row) {
  Json root = load_scenario_root(path, overrides);
  root.erase("sweep");
  if (row.sets.contains("/training/parallelism/tp") && root.contains("training") && root["training"].is_object()) {
    Json& par = root["training"]["parallelism"];
    if (!par.is_object()) par = Json::object();  // "auto"
    for (const char* k : kSplitKeys) par.erase(k);
  }
  for (const auto& [pointer, value] : row.sets.items())
    set_at(root, pointer, Json::parse(value.dump()), path, "/sweep");
  if (root.contains("name") && root["name"].is_string()) {
    root["name"] = root["name"].get<std::string>() + " [ctwin sweep: " + row.label + "]";
  }
  return root;
}

SweepResult run_sweep(const std::string& path, const std::vector<Override>& overrides, bool force_auto,
                      const SweepRunOptions& opt) {
  Json root = load_scenario_root(path, overrides);
  SweepSpec spec = read_sweep_spec(root, path);
  root.erase("sweep");
  spec.exhaustive = spec.exhaustive || opt.exhaustive;
  if (opt.top) spec.top = *opt.top;
  // --auto on a written layout: that layout stays as the reference row (simulated whatever its
  // bound), the other layouts of the search keep its other keys (tp_comm_overlap, sharding, ...).
  if (force_auto && (!root.contains("training") || !root["training"].is_object())) {
    throw InputError(path, "/training", "missing: --auto chooses a training layout", "a training scenario");
  }

  // The axes' combinations: each a list of (axis, value index).
  std::vector<std::vector<std::size_t>> combos;
  if (spec.axes.empty()) {
    combos.emplace_back();
  } else if (spec.combine == SweepCombine::zip) {
    for (std::size_t i = 0; i < spec.axes[0].values.size(); ++i) combos.emplace_back(spec.axes.size(), i);
  } else {
    std::vector<std::size_t> at(spec.axes.size(), 0);
    for (;;) {
      combos.push_back(at);
      if (combos.size() > kMaxConfigurations) {
        throw InputError(path, "/sweep/axes", "gives more than " + std::to_string(kMaxConfigurations) + " combinations",
                         "fewer values, or combine \"zip\"");
      }
      std::size_t a = spec.axes.size();
      while (a > 0 && ++at[a - 1] == spec.axes[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  }

  // /sweep/serving_auto: each replica shape filling the GPU budget, appended to every combination
  // as keys to set (tensor, pipeline and data-parallel sizes, then the scheduler's values).
  using Sets = std::vector<std::pair<std::string, Json>>;
  std::vector<std::pair<Sets, std::string>> serving_layouts;
  if (spec.serving.present) {
    const Scenario base = parse_scenario(root.dump(), path, {});
    if (base.kind != JobKind::serving) {
      throw InputError(path, "/sweep/serving_auto", "given for a training scenario",
                       "/sweep/auto for training layouts, or /kind \"serving\"");
    }
    const int node = base.cluster.gpus_per_node;
    const int budget = spec.serving.gpus > 0 ? spec.serving.gpus : base.cluster.nodes * node;
    std::vector<int> tps = spec.serving.tp;
    if (tps.empty()) {
      for (int t = 1; t <= node; t *= 2) tps.push_back(t);
    }
    const std::vector<int> pps = spec.serving.pp.empty() ? std::vector<int>{1} : spec.serving.pp;
    std::vector<bool> eps = spec.serving.expert_parallel;
    if (eps.empty())
      eps = serving_job(base).model.moe.enabled() ? std::vector<bool>{false, true} : std::vector<bool>{false};
    const std::vector<int> seqs = spec.serving.max_num_seqs.empty() ? std::vector<int>{0} : spec.serving.max_num_seqs;
    const std::vector<long long> toks =
        spec.serving.max_num_batched_tokens.empty() ? std::vector<long long>{0} : spec.serving.max_num_batched_tokens;
    // A shape with the scheduler values of this combination (0: the scenario's own).
    auto add_shape = [&serving_layouts](Sets sets, std::string label, int ns, long long nt) {
      if (ns > 0) {
        sets.emplace_back("/serving/max_num_seqs", ns);
        label += " seqs " + std::to_string(ns);
      }
      if (nt > 0) {
        sets.emplace_back("/serving/max_num_batched_tokens", nt);
        label += " tokens " + std::to_string(nt);
      }
      serving_layouts.emplace_back(std::move(sets), std::move(label));
    };
    for (int tp : tps) {
      for (int pp : pps) {
        if (budget % (tp * pp) != 0) continue;
        const int replicas = budget / (tp * pp);
        for (const bool ep : eps) {
          for (int ns : seqs) {
            for (long long nt : toks) {
              Sets sets = {{"/serving/tensor_parallel_size", tp},
                           {"/serving/pipeline_parallel_size", pp},
                           {"/serving/data_parallel_size", replicas}};
              if (eps.size() > 1 || ep) sets.emplace_back("/serving/enable_expert_parallel", ep);
              if (spec.serving.disaggregated) sets.emplace_back("/serving/disaggregation", nullptr);
              std::string label = "TP" + std::to_string(tp) + (pp > 1 ? " PP" + std::to_string(pp) : "") + " x" +
                                  std::to_string(replicas);
              if (ep) label += " EP";
              add_shape(std::move(sets), std::move(label), ns, nt);
            }
          }
        }
      }
    }
    // xPyD: x prefill replicas of TP a and y decode replicas of TP b filling the budget.
    if (spec.serving.disaggregated) {
      for (int tp_p : tps) {
        for (int tp_d : tps) {
          for (int x = 1; x * tp_p < budget; ++x) {
            if ((budget - x * tp_p) % tp_d != 0) continue;
            const int y = (budget - x * tp_p) / tp_d;
            for (int ns : seqs) {
              for (long long nt : toks) {
                Sets sets = {{"/serving/tensor_parallel_size", tp_d},
                             {"/serving/pipeline_parallel_size", 1},
                             {"/serving/data_parallel_size", 1},
                             {"/serving/disaggregation", Json{{"prefill_replicas", x},
                                                              {"prefill_tensor_parallel_size", tp_p},
                                                              {"decode_replicas", y},
                                                              {"decode_tensor_parallel_size", tp_d}}}};
                std::string label = std::to_string(x) + "P(TP" + std::to_string(tp_p) + ")" + std::to_string(y) +
                                    "D(TP" + std::to_string(tp_d) + ")";
                add_shape(std::move(sets), std::move(label), ns, nt);
              }
            }
          }
        }
      }
    }
    if (serving_layouts.empty()) {
      throw InputError(path, "/sweep/serving_auto",
                       "no replica shape divides the budget of " + std::to_string(budget) + " GPUs",
                       "tensor x pipeline sizes dividing the budget");
    }
  }
  if (serving_layouts.empty()) serving_layouts.emplace_back();

  // Each variant's scenario, parsed once.
  std::vector<std::optional<Scenario>> variants;  // nullopt: the scenario cannot take this combination
  std::vector<std::string> variant_errors;
  std::optional<InputError> first_error;
  std::vector<OrderedJson> variant_sets;
  std::vector<std::string> variant_labels;
  for (std::size_t c = 0; c < combos.size() * serving_layouts.size(); ++c) {
    const auto& combo = combos[c / serving_layouts.size()];
    const auto& [layout_sets_here, layout_label_here] = serving_layouts[c % serving_layouts.size()];
    Json v = root;
    OrderedJson sets = OrderedJson::object();
    std::string label;
    for (std::size_t a = 0; a < combo.size(); ++a) {
      const SweepAxis& ax = spec.axes[a];
      const Json& value = ax.values[combo[a]];
      set_at(v, ax.pointer, value, path, "/sweep/axes/" + std::to_string(a));
      sets[ax.pointer] = OrderedJson::parse(value.dump());
      label += (label.empty() ? "" : ", ") + ax.name + "=" + value_text(value);
    }
    for (const auto& [pointer, value] : layout_sets_here) {
      set_at(v, pointer, value, path, "/sweep/serving_auto");
      sets[pointer] = OrderedJson::parse(value.dump());
    }
    if (!layout_label_here.empty()) label += (label.empty() ? "" : ", ") + layout_label_here;
    // A combination the scenario cannot take (a grid of tp and pp that does not multiply to the
    // GPUs) is a row saying why; only a sweep where no combination is valid is an error.
    try {
      variants.emplace_back(parse_scenario(v.dump(), path, {}));
      variant_errors.emplace_back();
    } catch (const InputError& e) {
      variants.emplace_back();
      variant_errors.push_back(e.path + ": " + e.problem + "; expected " + e.expected);
      if (!first_error) {
        first_error = InputError(e.file, e.path, e.problem + " (in the sweep's variant " + label + ")", e.expected);
      }
    }
    variant_sets.push_back(std::move(sets));
    variant_labels.push_back(std::move(label));
  }
  const auto valid = std::find_if(variants.begin(), variants.end(), [](const auto& v) { return v.has_value(); });
  if (valid == variants.end()) throw *first_error;
  const JobKind kind = (*valid)->kind;
  const auto has_job = [](const std::optional<Scenario>& v) {
    const auto* tj = v ? std::get_if<TrainingJob>(&v->job) : nullptr;
    return tj && tj->job != nullptr;
  };
  if (spec.objective.empty()) {
    spec.objective = kind != JobKind::training ? "goodput_per_gpu"
                     : has_job(*valid)         ? "time_to_train_days"
                                               : "step_time_s";
  }
  const SweepObjective& objective = sweep_objective(spec.objective);
  if (objective.job) {
    for (const auto& v : variants) {
      if (v && !has_job(v)) {
        throw InputError(path, "/sweep/objective", "\"" + spec.objective + "\" with a variant that has no /job",
                         "a /job block in the scenario (docs/jobs.md), or a step objective (step_time_s, ...)");
      }
    }
  }
  if (objective.training != (kind == JobKind::training)) {
    throw InputError(path, "/sweep/objective",
                     "\"" + spec.objective + "\" for a " + job_kind_names.name(kind) + " scenario",
                     kind == JobKind::training ? "a training objective (step_time_s, mfu, ...)"
                                               : "a serving objective (goodput_per_gpu, ttft_p99_s, ...)");
  }

  SweepResult res;
  res.scenario = (*valid)->name;
  res.objective = objective;
  res.top = spec.top;
  res.variants = static_cast<int>(variants.size());
  res.exhaustive = spec.exhaustive;

  // Every configuration, in order: the variants, and within each its layouts.
  std::vector<Candidate> cands;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (!variants[v]) {
      cands.push_back(Candidate{v, std::nullopt, false});
      continue;
    }
    if (variants[v]->kind != kind) {
      throw InputError(path, "/kind", "differs between the sweep's variants", "one job kind for every variant");
    }
    const auto* tj = std::get_if<TrainingJob>(&variants[v]->job);
    if (tj && (tj->auto_layout || force_auto)) {
      const Cluster cluster = build_cluster(variants[v]->cluster);
      auto layouts = enumerate_training_layouts(tj->model, tj->training, cluster, spec.space);
      if (!tj->auto_layout) {
        if (!res.written) res.written = cands.size();
        cands.push_back(Candidate{v, std::nullopt, true});
        std::erase_if(layouts, [&](const TrainingConfig& c) { return same_layout(c, tj->training); });
      }
      if (layouts.empty() && tj->auto_layout) {
        if (variants.size() == 1) {
          throw InputError(path, "/training/parallelism", "\"auto\" finds no valid layout",
                           "a global_batch divisible by more data-parallel sizes, or a wider /sweep/auto");
        }
        variant_errors[v] = "/training/parallelism: \"auto\" finds no valid layout for this variant";
        variants[v].reset();
        cands.push_back(Candidate{v, std::nullopt, false});
        continue;
      }
      for (auto& l : layouts) cands.push_back(Candidate{v, std::move(l), false});
    } else {
      cands.push_back(Candidate{v, std::nullopt, false});
    }
    if (cands.size() > kMaxConfigurations) {
      throw InputError(path, "/sweep", "gives more than " + std::to_string(kMaxConfigurations) + " configurations",
                       "fewer axis values or a narrower /sweep/auto");
    }
  }
  res.rows.resize(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) {
    SweepRow& row = res.rows[i];
    row.index = i;
    row.sets = variant_sets[cands[i].variant];
    row.label = variant_labels[cands[i].variant];
    if (cands[i].layout) {
      const OrderedJson layout = layout_sets(*cands[i].layout);
      for (auto it = layout.begin(); it != layout.end(); ++it) row.sets[it.key()] = it.value();
      const auto& c = *cands[i].layout;
      row.label += (row.label.empty() ? "" : ", ") + layout_label(c.parallel, c.micro_batch, c.recompute);
    } else if (cands[i].written) {
      const auto& c = std::get<TrainingJob>(variants[cands[i].variant]->job).training;
      row.label += (row.label.empty() ? "" : ", ") + std::string("as written: ") +
                   layout_label(c.parallel, c.micro_batch, c.recompute);
    }
    if (row.label.empty()) row.label = "as written";
    if (!variants[cands[i].variant]) {
      row.status = SweepStatus::invalid;
      row.reason = variant_errors[cands[i].variant];
    }
  }

  // The config a row simulates (training), or nullptr (serving).
  auto training_of = [&](std::size_t i) -> std::optional<Scenario> {
    const Scenario& base = *variants[cands[i].variant];
    if (base.kind != JobKind::training) return std::nullopt;
    return cands[i].layout ? with_layout(base, *cands[i].layout) : base;
  };

  // 1. Memory: what cannot fit is refused before anything is simulated.
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (!variants[cands[i].variant]) continue;
    const Scenario& base = *variants[cands[i].variant];
    if (base.kind == JobKind::training) {
      const auto& tj = std::get<TrainingJob>(base.job);
      const TrainingConfig& cfg = cands[i].layout ? *cands[i].layout : tj.training;
      const MemoryBreakdown mb = estimate_memory(tj.model, cfg, base.cluster.gpu.hbm_bytes);
      if (auto why = memory_refusal_reason(mb)) {
        res.rows[i].status = SweepStatus::out_of_memory;
        res.rows[i].reason = *why;
        continue;
      }
    }
    live.push_back(i);
  }

  std::atomic<std::size_t> done{cands.size() - live.size()};
  auto tick = [&] {
    const std::size_t d = ++done;
    if (opt.progress) opt.progress(d, cands.size());
  };
  if (opt.progress) opt.progress(done, cands.size());

  // 2. Lower bounds, where pruning may use them: a training objective (monotone in the step
  // time within a variant: the same GPUs, tokens and FLOPs) and more layouts than the top.
  std::vector<std::size_t> per_variant(variants.size(), 0);
  for (std::size_t i : live) ++per_variant[cands[i].variant];
  // Exhaustive sweeps compute every bound too: the report counts any simulated step below its
  // bound (a bug that pruning would have turned into a wrong answer).
  // A job objective is not monotone in the step time alone (checkpoint bytes differ by layout).
  const bool pruning = !spec.exhaustive && kind == JobKind::training && !objective.job;
  std::vector<SweepRow*> bound_rows;
  for (std::size_t i : live) {
    const bool useful = per_variant[cands[i].variant] > static_cast<std::size_t>(spec.top) && !cands[i].written;
    if (kind == JobKind::training && (spec.exhaustive || (pruning && useful))) bound_rows.push_back(&res.rows[i]);
  }
  auto compute_bound = [&](SweepRow& row) {
    const std::optional<Scenario> sc = training_of(row.index);
    const auto& tj = std::get<TrainingJob>(sc->job);
    const auto b = step_time_lower_bound_s(tj.model, tj.training, build_cluster(sc->cluster), training_options(*sc));
    row.bound_s = b ? *b : -1;
  };
  if (opt.distribute) {
    opt.distribute(bound_rows, compute_bound);
  } else {
    simulate_rows_on_threads(bound_rows, compute_bound, opt.threads);
  }

  // 3. Simulate in waves: each variant's live rows by bound (then index); before a wave, a row
  // whose bound exceeds its variant's K-th best step time so far cannot enter the top.
  auto simulate = [&](SweepRow& row) {
    const std::size_t i = row.index;
    if (auto tsc = training_of(i)) {
      const auto& tj = std::get<TrainingJob>(tsc->job);
      const TrainingResult r =
          simulate_training(tj.model, tj.training, build_cluster(tsc->cluster), training_options(*tsc));
      row.report = training_report_json(*tsc, r);
      // The whole job: every configuration it meets re-simulated from this layout's step.
      if (objective.job) row.report["job"] = job_report_json(*tsc, run_scenario_job(*tsc, r));
    } else {
      const Scenario& sc = *variants[cands[i].variant];
      const ServingJob& job = serving_job(sc);
      const ServingFleetRun fleet = run_serving_job(job, {}, 1);
      if (!fleet.run.capacity.refusal.empty()) {
        row.status = SweepStatus::out_of_memory;
        row.reason = fleet.run.capacity.refusal;
        return;
      }
      row.report = serving_report_json(sc, fleet);
    }
    row.status = SweepStatus::simulated;
    row.objective = objective_value(objective, row.report, spec.gpu_hour_usd);
  };
  std::vector<std::size_t> order = live;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (cands[a].variant != cands[b].variant) return cands[a].variant < cands[b].variant;
    return res.rows[a].bound_s < res.rows[b].bound_s;
  });
  std::vector<std::vector<double>> best_steps(variants.size());  // each variant's simulated step times, sorted
  for (std::size_t w = 0; w < order.size();) {
    std::vector<SweepRow*> wave;
    const std::size_t variant = cands[order[w]].variant;
    for (; w < order.size() && wave.size() < kWave && cands[order[w]].variant == variant; ++w) {
      SweepRow& row = res.rows[order[w]];
      const auto& best = best_steps[variant];
      if (pruning && row.bound_s >= 0 && best.size() >= static_cast<std::size_t>(spec.top) &&
          row.bound_s > best[static_cast<std::size_t>(spec.top) - 1]) {
        row.status = SweepStatus::bound_pruned;
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "cannot reach the top %d: its step takes at least %.4g s (its busiest GPU's kernels), the "
                      "%d-th best %.4g s",
                      spec.top, row.bound_s, spec.top, best[static_cast<std::size_t>(spec.top) - 1]);
        row.reason = buf;
        tick();
        continue;
      }
      wave.push_back(&row);
    }
    if (opt.distribute) {
      opt.distribute(wave, simulate);
      for (std::size_t k = 0; k < wave.size(); ++k) tick();
    } else {
      simulate_rows_on_threads(wave, simulate, opt.threads, tick);
    }
    for (SweepRow* row : wave) {
      if (row->status != SweepStatus::simulated || kind != JobKind::training) continue;
      const double step = report_number(row->report, "/step_time_s");
      if (row->bound_s >= 0 && step < row->bound_s * (1 - 1e-9)) ++res.bound_violations;
      auto& best = best_steps[variant];
      best.insert(std::upper_bound(best.begin(), best.end(), step), step);
    }
  }

  for (const auto& row : res.rows) {
    if (row.status == SweepStatus::simulated) res.ranking.push_back(row.index);
  }
  std::stable_sort(res.ranking.begin(), res.ranking.end(), [&](std::size_t a, std::size_t b) {
    const double x = res.rows[a].objective, y = res.rows[b].objective;
    if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
    return objective.minimize ? x < y : x > y;
  });

  return res;
}

}  // namespace ctwin
