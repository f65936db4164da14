#include "workloads/serving_autoscale_params.hpp"

#include <algorithm>
#include <string>

namespace ctwin {

std::vector<ParamTable> serving_autoscale_param_tables() {
  return {
      {"/serving/autoscaling", "the fleet's autoscaler (Kubernetes HPA v2, KEDA scale to zero) and cold starts",
       serving_autoscaling_params},
      {"/serving/autoscaling/scale_up", "HPA behavior.scaleUp", serving_scale_up_params},
      {"/serving/autoscaling/scale_down", "HPA behavior.scaleDown", serving_scale_down_params},
      {"/serving/autoscaling/scale_up/policies/N", "one scaling policy (also scale_down/policies/N)",
       serving_scaling_policy_params},
      {"/serving/admission", "admission control at the fleet's router: rate limits and load shedding",
       serving_admission_params},
      {"/serving/admission/classes/N", "one request class's (tenant's) rate limit and shed fraction",
       serving_admission_class_params},
  };
}

namespace {

// An array of objects at o/key, each handed to `read` as a JsonObject named by its index.
template <class Read>
void read_array(const JsonObject& o, const char* key, std::size_t max, const char* what, Read read) {
  const Json& v = o.raw(key);
  if (!v.is_array() || v.empty() || v.size() > max) {
    o.fail(key, "found " + shown(v), "an array of 1 to " + std::to_string(max) + " " + what);
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string k = std::string(key) + "/" + std::to_string(i);
    if (!v[i].is_object()) o.fail(k, "found " + shown(v[i]), std::string("an object: ") + what);
    read(JsonObject(v[i], o.child(k), o.file()));
  }
}

ScalingRules read_rules(const JsonObject& parent, const char* key, ScalingRules rules,
                        std::span<const ParamDecl> table) {
  if (!parent.has(key)) return rules;
  const JsonObject o = parent.object(key);
  const ParamReader r(o, table);
  rules.stabilization_window_s = static_cast<int>(r.integer("stabilization_window_s"));
  rules.select = r.choice("select_policy", select_policy_names);
  if (o.has("policies")) {
    rules.policies.clear();
    read_array(o, "policies", 64, "scaling policies {type, value, period_s}", [&](const JsonObject& p) {
      const ParamReader pr(p, serving_scaling_policy_params);
      rules.policies.push_back({.type = pr.choice("type", scaling_policy_type_names),
                                .value = static_cast<int>(pr.integer("value")),
                                .period_s = static_cast<int>(pr.integer("period_s"))});
    });
  }
  return rules;
}

}  // namespace

ServingAutoscaling read_serving_autoscaling(const JsonObject& o) {
  const ParamReader r(o, serving_autoscaling_params);
  ServingAutoscaling a;
  AutoscalerSpec& h = a.hpa;
  h.metric = r.choice("metric", autoscale_metric_names);
  h.target = r.number("target");
  h.min_replicas = static_cast<int>(r.integer("min_replicas"));
  h.max_replicas = static_cast<int>(r.integer("max_replicas"));
  if (h.max_replicas < h.min_replicas) {
    o.fail("max_replicas",
           "found " + std::to_string(h.max_replicas) + ", below min_replicas " + std::to_string(h.min_replicas),
           "at least min_replicas");
  }
  if ((h.metric == AutoscaleMetric::kv_utilization || h.metric == AutoscaleMetric::gpu_utilization) && h.target > 1) {
    o.fail("target", "found " + std::to_string(h.target) + " for a utilization metric", "a fraction in (0, 1]");
  }
  h.tolerance = r.number("tolerance");
  h.sync_period_s = r.number("sync_period_s");
  h.scale_up = read_rules(o, "scale_up", default_scale_up_rules(), serving_scale_up_params);
  h.scale_down = read_rules(o, "scale_down", default_scale_down_rules(), serving_scale_down_params);
  h.scale_to_zero_cooldown_s = r.number("scale_to_zero_cooldown_s");
  a.start.container_start_s = r.number("container_start_s");
  a.start.storage_bytes_per_s = r.bandwidth("storage_gbyte_per_s") * 1e9;
  a.start.engine_init_s = r.number("engine_init_s");
  a.start.warm_start_s = r.number("warm_start_s");
  a.weights_over_network = r.boolean("weights_over_network");
  a.warm_pool = static_cast<int>(r.integer("warm_pool"));
  return a;
}

AdmissionSpec read_serving_admission(const JsonObject& o, const std::vector<RequestClass>& classes) {
  const ParamReader r(o, serving_admission_params);
  AdmissionSpec s;
  s.max_queued = r.integer("max_queued_requests");
  s.max_wait_s = r.number("max_wait_s");
  s.max_ttft_p90_s = r.number("max_ttft_p90_s");
  s.ttft_window_s = r.number("ttft_window_s");
  s.classes.assign(classes.size(), AdmissionClass{});
  if (o.has("classes")) {
    std::vector<bool> seen(classes.size(), false);
    read_array(
        o, "classes", 1024, "admission classes {class, rate_per_s, burst, shed_fraction}", [&](const JsonObject& c) {
          const ParamReader cr(c, serving_admission_class_params);
          const std::string name = cr.string("class");
          const auto it =
              std::find_if(classes.begin(), classes.end(), [&](const RequestClass& x) { return x.name == name; });
          if (it == classes.end()) {
            std::string names;
            for (const RequestClass& x : classes) names += (names.empty() ? "\"" : ", \"") + x.name + "\"";
            c.fail("class", "found \"" + name + "\", which /traffic/classes does not name", "one of " + names);
          }
          const auto k = static_cast<std::size_t>(it - classes.begin());
          if (seen[k]) c.fail("class", "found \"" + name + "\" a second time", "each class at most once");
          seen[k] = true;
          AdmissionClass& a = s.classes[k];
          if (cr.has("rate_per_s")) {
            const double rate = cr.number("rate_per_s");
            a.rate_limit = RateLimit{.rate_per_s = rate, .burst = cr.number("burst", std::max(1.0, rate))};
          } else if (cr.has("burst")) {
            c.fail("burst", "found without rate_per_s", "rate_per_s beside it, or no burst");
          }
          a.shed_fraction = cr.number("shed_fraction");
        });
  }
  return s;
}

}  // namespace ctwin
