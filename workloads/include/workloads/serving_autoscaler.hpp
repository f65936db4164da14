// How many replicas a serving fleet should run, decided as Kubernetes' HorizontalPodAutoscaler
// (autoscaling/v2) decides it, plus scale to zero as KEDA does it. A pure policy: the fleet loop
// calls recommend() every sync period with what it observes and starts or drains replicas.
//
// The HPA rules (kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale, "Algorithm
// details" and "Configurable scaling behavior"; pkg/controller/podautoscaler/horizontal.go and
// replica_calculator.go), in the order one sync applies them:
//  1. current replicas above max_replicas (below min_replicas): scale straight to the bound.
//  2. the metric's proposal: ratio = currentMetricValue / desiredMetricValue; within the
//     tolerance (|1 - ratio| <= 0.1) the current count stays, else ceil(ratio x ready replicas).
//     Per-replica metrics (queue_length, running_requests, kv_utilization, gpu_utilization) are
//     Pods metrics with an AverageValue target: the value is the mean over replicas that report
//     one. Replicas still starting (cold or warm start: no engine, no metrics) are HPA's "missing"
//     pods: on a scale-down they count as using exactly the target, on a scale-up as using 0, and
//     a proposal that would reverse direction or fall within the tolerance keeps the current
//     count. ttft_p99_s (a custom SLO signal) is an Object metric with a Value target: one value
//     for the fleet, ceil(ratio x ready replicas). No metric sample: no change (HPA skips a sync
//     whose metrics it cannot read).
//  3. stabilization: the proposal is kept between the lowest recommendation of the last
//     scale_up.stabilization_window_s and the highest of the last
//     scale_down.stabilization_window_s (each window's samples strictly newer than now - window).
//  4. rate policies: a scale-up is limited to the policies' allowance over each policy's period
//     (Pods: period-start replicas + value; Percent: ceil(period-start x (1 + value/100))),
//     selectPolicy Max taking the largest allowance, Min the smallest, Disabled none; a scale-down
//     likewise (Pods: start - value; Percent: floor(start x (1 - value/100))). The period-start
//     count is the current one less the changes made within the period. Then min/max bounds.
// Percent limits are computed in integers (HPA multiplies in float64, where 10 x 1.1 can round
// up to 12).
//
// Scale to zero (min_replicas 0): HPA cannot (minReplicas >= 1 without an alpha gate), so KEDA
// sits in front of it (keda.sh/docs "Scaling Deployments": KEDA handles 0 <-> 1, the HPA 1 <-> N).
// At zero replicas the fleet's router holds arriving requests as Knative's activator does; the
// first request in flight activates one replica. A fleet with replicas scales to zero when no
// request has been in flight for scale_to_zero_cooldown_s (KEDA's cooldownPeriod, 300 s). Between
// the two the HPA runs with min_replicas 1.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/names.hpp"
#include "sim/time.hpp"

namespace ctwin {

enum class AutoscaleMetric { queue_length, running_requests, kv_utilization, gpu_utilization, ttft_p99_s };
inline constexpr auto autoscale_metric_names = make_names<AutoscaleMetric>({
    {AutoscaleMetric::queue_length, "queue_length"},
    {AutoscaleMetric::running_requests, "running_requests"},
    {AutoscaleMetric::kv_utilization, "kv_utilization"},
    {AutoscaleMetric::gpu_utilization, "gpu_utilization"},
    {AutoscaleMetric::ttft_p99_s, "ttft_p99_s"},
});
// Pods metrics averaged over the replicas (AverageValue); false: one value for the fleet (Value).
constexpr bool per_replica_metric(AutoscaleMetric m) { return m != AutoscaleMetric::ttft_p99_s; }

enum class ScalingPolicyType { pods, percent };
inline constexpr auto scaling_policy_type_names =
    make_names<ScalingPolicyType>({{ScalingPolicyType::pods, "pods"}, {ScalingPolicyType::percent, "percent"}});
enum class SelectPolicy { max, min, disabled };
inline constexpr auto select_policy_names = make_names<SelectPolicy>(
    {{SelectPolicy::max, "max"}, {SelectPolicy::min, "min"}, {SelectPolicy::disabled, "disabled"}});

// HPAScalingPolicy: at most `value` pods (percent of the period-start count) per period_s.
struct ScalingPolicy {
  ScalingPolicyType type = ScalingPolicyType::pods;
  int value = 1;      // > 0
  int period_s = 15;  // 1 .. 1800
};

// HPAScalingRules: one direction's behavior.
struct ScalingRules {
  int stabilization_window_s = 0;  // 0 .. 3600
  std::vector<ScalingPolicy> policies;
  SelectPolicy select = SelectPolicy::max;
};
// HPA's defaults: scale up without a window, by the larger of 100% and 4 pods per 15 s; scale down
// after a 300 s window, by up to 100% per 15 s.
ScalingRules default_scale_up_rules();
ScalingRules default_scale_down_rules();

struct AutoscalerSpec {
  AutoscaleMetric metric = AutoscaleMetric::queue_length;
  double target = 1;     // per replica (AverageValue), or the fleet's value (ttft_p99_s); > 0
  int min_replicas = 1;  // 0: scale to zero (KEDA)
  int max_replicas = 1;
  double tolerance = 0.1;     // kube-controller-manager --horizontal-pod-autoscaler-tolerance
  double sync_period_s = 15;  // --horizontal-pod-autoscaler-sync-period: how often the fleet calls
  ScalingRules scale_up = default_scale_up_rules();
  ScalingRules scale_down = default_scale_down_rules();
  double scale_to_zero_cooldown_s = 300;  // KEDA cooldownPeriod; with min_replicas 0
};

// What the fleet observes at a sync.
struct AutoscalerInput {
  int ready = 0;  // replicas serving, whose metrics are known
  int total = 0;  // ready + starting (the Deployment's replicas); draining ones are not counted
  // Per-replica metrics: the sum over the ready replicas. ttft_p99_s: the fleet's value over the
  // recent window. nullopt: no sample (no ready replica, no completed request in the window).
  std::optional<double> metric;
  std::int64_t in_flight = 0;  // requests held by the router or on replicas: scale-to-zero activity
};

// Why a sync ended where it did, for reports and tests.
enum class AutoscaleReason {
  no_metric,     // no sample: unchanged
  above_max,     // current above max_replicas
  below_min,     // current below min_replicas (or 0 with min 0 and idle: stays 0)
  activated,     // scale to zero: 0 -> 1 on a request in flight
  cooled_down,   // scale to zero: idle for the cooldown -> 0
  desired,       // the (stabilized) proposal, within the rate limits
  rate_limited,  // the stabilized proposal, capped by the rate policies
  bounded,       // the stabilized proposal, capped by min/max replicas
};

struct AutoscaleStep {
  int replicas = 0;               // what the fleet should run now
  std::optional<int> proposal;    // the metric's proposal (step 2), if it ran
  std::optional<int> stabilized;  // after the windows (step 3), if it ran
  AutoscaleReason reason = AutoscaleReason::no_metric;
};

// Step 2 alone: the metric's proposal for `in`, or nullopt without a sample (or with no ready
// replica for a per-replica metric). Pure.
std::optional<int> metric_proposal(const AutoscalerSpec& spec, const AutoscalerInput& in);

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerSpec spec);

  // One sync at `now` (nondecreasing across calls). Keeps the recommendations for the windows
  // and the scale events for the rate policies; a change it returns is taken as made.
  AutoscaleStep recommend(Time now, const AutoscalerInput& in);

  const AutoscalerSpec& spec() const { return spec_; }

 private:
  struct Sample {
    Time at;
    int replicas;
  };
  // Replica changes of `events` at times in (now - period, now]: getReplicasChangePerPeriod.
  static int changes_within(const std::deque<Sample>& events, Time now, int period_s);
  int stabilize(Time now, int current, int desired);
  int rate_limit(Time now, int current, int desired, int min_replicas, AutoscaleReason& reason) const;
  void record_scale(Time now, int from, int to);

  AutoscalerSpec spec_;
  std::deque<Sample> recommendations_;
  std::deque<Sample> up_events_;     // replicas added at `at`
  std::deque<Sample> down_events_;   // replicas removed at `at`
  std::optional<Time> last_active_;  // scale to zero: the last sync with a request in flight
};

}  // namespace ctwin
