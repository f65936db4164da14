// /serving/autoscaling and /serving/admission read from JSON: every key lands in its field, the
// HPA defaults apply where a key is absent, and each bad value is one InputError at its pointer.
#include <doctest/doctest.h>

#include <string>

#include "sim/error.hpp"
#include "tolerance.hpp"
#include "workloads/serving_autoscale_params.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

const std::string kFile = "scenario.json";

ServingAutoscaling autoscaling(const std::string& text) {
  const Json j = Json::parse(text);
  return read_serving_autoscaling(JsonObject(j, "/serving/autoscaling", kFile));
}

AdmissionSpec admission(const std::string& text, const std::vector<RequestClass>& classes) {
  const Json j = Json::parse(text);
  return read_serving_admission(JsonObject(j, "/serving/admission", kFile), classes);
}

// The pointer of the InputError `f` throws ("" when it throws none).
template <class F>
std::string error_path(F f) {
  try {
    f();
  } catch (const InputError& e) {
    CHECK(e.file == kFile);
    return e.path;
  }
  return "";
}

RequestClass named(const char* name) {
  RequestClass c;
  c.name = name;
  return c;
}

}  // namespace

TEST_CASE("/serving/autoscaling: every key read into the autoscaler, cold start and warm pool") {
  const ServingAutoscaling a = autoscaling(R"({"metric": "kv_utilization", "target": 0.7, "min_replicas": 2,
      "max_replicas": 12, "tolerance": 0.05, "sync_period_s": 10,
      "scale_up": {"stabilization_window_s": 30, "select_policy": "min",
                   "policies": [{"type": "pods", "value": 2, "period_s": 60}]},
      "scale_down": {"stabilization_window_s": 120, "select_policy": "disabled"},
      "scale_to_zero_cooldown_s": 90, "container_start_s": 12, "storage_gbyte_per_s": "32 Gb/s",
      "weights_over_network": false, "engine_init_s": 9, "warm_pool": 3, "warm_start_s": 2})");
  const AutoscalerSpec& h = a.hpa;
  CHECK(h.metric == AutoscaleMetric::kv_utilization);
  CHECK(h.target == rel_approx(0.7, 1e-15));
  CHECK(h.min_replicas == 2);
  CHECK(h.max_replicas == 12);
  CHECK(h.tolerance == rel_approx(0.05, 1e-15));
  CHECK(h.sync_period_s == rel_approx(10, 1e-15));
  CHECK(h.scale_up.stabilization_window_s == 30);
  CHECK(h.scale_up.select == SelectPolicy::min);
  REQUIRE(h.scale_up.policies.size() == 1);
  CHECK(h.scale_up.policies[0].type == ScalingPolicyType::pods);
  CHECK(h.scale_up.policies[0].value == 2);
  CHECK(h.scale_up.policies[0].period_s == 60);
  CHECK(h.scale_down.stabilization_window_s == 120);
  CHECK(h.scale_down.select == SelectPolicy::disabled);
  // scale_down without policies keeps HPA's default one: 100% per 15 s.
  REQUIRE(h.scale_down.policies.size() == 1);
  CHECK(h.scale_down.policies[0].type == ScalingPolicyType::percent);
  CHECK(h.scale_down.policies[0].value == 100);
  CHECK(h.scale_to_zero_cooldown_s == rel_approx(90, 1e-15));
  CHECK(a.start.container_start_s == rel_approx(12, 1e-15));
  CHECK(a.start.storage_bytes_per_s == rel_approx(4e9, 1e-15));  // 32 Gb/s = 4 GB/s
  CHECK(a.start.engine_init_s == rel_approx(9, 1e-15));
  CHECK(a.start.warm_start_s == rel_approx(2, 1e-15));
  CHECK(!a.weights_over_network);
  CHECK(a.warm_pool == 3);
}

TEST_CASE("/serving/autoscaling: absent keys take Kubernetes' HPA defaults") {
  const ServingAutoscaling a = autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4})");
  const AutoscalerSpec& h = a.hpa;
  CHECK(h.min_replicas == 1);
  CHECK(h.tolerance == rel_approx(0.1, 1e-15));
  CHECK(h.sync_period_s == rel_approx(15, 1e-15));
  CHECK(h.scale_up.stabilization_window_s == 0);
  CHECK(h.scale_up.select == SelectPolicy::max);
  REQUIRE(h.scale_up.policies.size() == 2);
  CHECK(h.scale_up.policies[0].type == ScalingPolicyType::percent);
  CHECK(h.scale_up.policies[0].value == 100);
  CHECK(h.scale_up.policies[0].period_s == 15);
  CHECK(h.scale_up.policies[1].type == ScalingPolicyType::pods);
  CHECK(h.scale_up.policies[1].value == 4);
  CHECK(h.scale_up.policies[1].period_s == 15);
  CHECK(h.scale_down.stabilization_window_s == 300);
  CHECK(h.scale_to_zero_cooldown_s == rel_approx(300, 1e-15));
  CHECK(a.weights_over_network);
  CHECK(a.warm_pool == 0);
  CHECK(a.start.network_bytes_per_s == 0);  // the app fills it from the cluster
}

TEST_CASE("/serving/autoscaling: each bad value is an InputError at its JSON pointer") {
  CHECK(error_path([] { autoscaling(R"({"metric": "queue_length", "target": 8})"); }) ==
        "/serving/autoscaling/max_replicas");
  CHECK(error_path([] { autoscaling(R"({"metric": "latency", "target": 8, "max_replicas": 4})"); }) ==
        "/serving/autoscaling/metric");
  CHECK(error_path([] { autoscaling(R"({"metric": "queue_length", "target": 0, "max_replicas": 4})"); }) ==
        "/serving/autoscaling/target");
  CHECK(error_path([] {
          autoscaling(R"({"metric": "queue_length", "target": 8, "min_replicas": 5, "max_replicas": 4})");
        }) == "/serving/autoscaling/max_replicas");
  CHECK(error_path([] { autoscaling(R"({"metric": "gpu_utilization", "target": 70, "max_replicas": 4})"); }) ==
        "/serving/autoscaling/target");
  CHECK(error_path([] {
          autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4,
                          "scale_up": {"policies": [{"type": "pods", "value": 1, "period_s": 1801}]}})");
        }) == "/serving/autoscaling/scale_up/policies/0/period_s");
  CHECK(error_path([] {
          autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4,
                          "scale_down": {"policies": [{"type": "pods", "value": 1, "period_s": 15},
                                                      {"type": "share", "value": 1, "period_s": 15}]}})");
        }) == "/serving/autoscaling/scale_down/policies/1/type");
  CHECK(error_path([] {
          autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4, "scale_down": {"policies": []}})");
        }) == "/serving/autoscaling/scale_down/policies");
  CHECK(error_path([] {
          autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4,
                          "scale_up": {"stabilization_window_s": 3601}})");
        }) == "/serving/autoscaling/scale_up/stabilization_window_s");
  CHECK(error_path([] { autoscaling(R"({"metric": "queue_length", "target": 8, "max_replicas": 4, "warm": 1})"); }) ==
        "/serving/autoscaling/warm");
}

TEST_CASE("/serving/admission: thresholds, and classes matched to /traffic's by name") {
  const AdmissionSpec s = admission(R"({"max_queued_requests": 200, "max_wait_s": 5, "max_ttft_p90_s": 2,
      "ttft_window_s": 30, "classes": [{"class": "batch", "rate_per_s": 2.5, "shed_fraction": 0.5},
                                       {"class": "chat", "rate_per_s": 10, "burst": 40}]})",
                                    {named("chat"), named("batch"), named("free")});
  CHECK(s.max_queued == 200);
  CHECK(s.max_wait_s == rel_approx(5, 1e-15));
  CHECK(s.max_ttft_p90_s == rel_approx(2, 1e-15));
  CHECK(s.ttft_window_s == rel_approx(30, 1e-15));
  REQUIRE(s.classes.size() == 3);
  // chat (class 0): 10/s, burst 40, full thresholds.
  REQUIRE(s.classes[0].rate_limit);
  CHECK(s.classes[0].rate_limit->rate_per_s == rel_approx(10, 1e-15));
  CHECK(s.classes[0].rate_limit->burst == rel_approx(40, 1e-15));
  CHECK(s.classes[0].shed_fraction == rel_approx(1, 1e-15));
  // batch (class 1): 2.5/s with the default burst of one second's tokens, max(1, 2.5).
  REQUIRE(s.classes[1].rate_limit);
  CHECK(s.classes[1].rate_limit->burst == rel_approx(2.5, 1e-15));
  CHECK(s.classes[1].shed_fraction == rel_approx(0.5, 1e-15));
  // free (class 2): not listed, not limited.
  CHECK(!s.classes[2].rate_limit);
  CHECK(s.classes[2].shed_fraction == rel_approx(1, 1e-15));

  const std::vector<RequestClass> one{named("chat")};
  CHECK(error_path([&] { admission(R"({"classes": [{"class": "batch", "rate_per_s": 1}]})", one); }) ==
        "/serving/admission/classes/0/class");
  CHECK(error_path([&] {
          admission(R"({"classes": [{"class": "chat", "rate_per_s": 1}, {"class": "chat"}]})", one);
        }) == "/serving/admission/classes/1/class");
  CHECK(error_path([&] { admission(R"({"classes": [{"class": "chat", "burst": 4}]})", one); }) ==
        "/serving/admission/classes/0/burst");
  CHECK(error_path([&] { admission(R"({"classes": [{"class": "chat", "shed_fraction": 0}]})", one); }) ==
        "/serving/admission/classes/0/shed_fraction");
  CHECK(error_path([&] { admission(R"({"max_queued_requests": -1})", one); }) ==
        "/serving/admission/max_queued_requests");
}
