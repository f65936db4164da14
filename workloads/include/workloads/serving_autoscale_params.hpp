// The scenario keys of a serving fleet's autoscaler (/serving/autoscaling: Kubernetes HPA v2's
// fields, KEDA's scale to zero, the cold start and the warm pool) and of its router's admission
// control (/serving/admission), with the readers that fill serving_autoscaler.hpp's,
// serving_cold_start.hpp's and serving_admission.hpp's specs.
#pragma once

#include <string>
#include <vector>

#include "sim/json_reader.hpp"
#include "sim/params.hpp"
#include "workloads/serving_admission.hpp"
#include "workloads/serving_autoscaler.hpp"
#include "workloads/serving_cold_start.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

inline constexpr double kMaxAutoscaleSeconds = 86400;

// The two /serving keys that hold the objects below.
inline constexpr ParamDecl serving_fleet_policy_params[] = {
    {.key = "autoscaling",
     .type = ParamType::object,
     .doc = "scale the number of replicas on a metric, HPA-style, with cold starts (/serving/autoscaling); "
            "needs the fleet simulation",
     .source = "Kubernetes HPA autoscaling/v2, KEDA",
     .computed = "none: a fixed data_parallel_size"},
    {.key = "admission",
     .type = ParamType::object,
     .doc = "rate limits and load shedding at the router (/serving/admission); needs the fleet simulation",
     .computed = "none: every request admitted"},
};

inline constexpr ParamDecl serving_autoscaling_params[] = {
    {.key = "metric",
     .type = ParamType::choice,
     .doc = "what the autoscaler tracks: per replica (averaged over replicas that report, HPA's Pods metric "
            "with an AverageValue target) queue_length (waiting requests), running_requests, kv_utilization "
            "(0..1), gpu_utilization (0..1, busy share of the sync period); or the fleet's ttft_p99_s (a custom "
            "SLO signal, an Object metric with a Value target)",
     .source = "Kubernetes HPA autoscaling/v2 metrics",
     .required = true,
     .choices = autoscale_metric_names.names},
    {.key = "target",
     .type = ParamType::number,
     .min = 0,
     .max = 1e12,
     .doc = "the metric's target: desired replicas = ceil(ready replicas x value / target)",
     .source = "HPA target averageValue / value",
     .required = true,
     .min_exclusive = true},
    {.key = "min_replicas",
     .type = ParamType::integer,
     .def = 1,
     .min = 0,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "the fewest replicas; 0: scale to zero (the router holds requests, the first one activates a "
            "replica; idle for scale_to_zero_cooldown_s scales to 0)",
     .source = "HPA minReplicas (default 1); 0 as KEDA minReplicaCount / Knative"},
    {.key = "max_replicas",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "the most replicas; with warm_pool, all of them fit the cluster",
     .source = "HPA maxReplicas (required)",
     .required = true},
    {.key = "tolerance",
     .type = ParamType::number,
     .def = 0.1,
     .min = 0,
     .max = 10,
     .doc = "no change while value / target is within 1 +/- tolerance",
     .source = "kube-controller-manager --horizontal-pod-autoscaler-tolerance (default 0.1)"},
    {.key = "sync_period_s",
     .type = ParamType::number,
     .def = 15,
     .min = 1e-3,
     .max = 3600,
     .unit = "s",
     .doc = "how often the autoscaler decides",
     .source = "kube-controller-manager --horizontal-pod-autoscaler-sync-period (default 15 s)"},
    {.key = "scale_up",
     .type = ParamType::object,
     .doc = "scale-up behavior: stabilization_window_s, policies, select_policy (/serving/autoscaling/scale_up)",
     .source = "HPA behavior.scaleUp",
     .computed = "no window; max of 100% and 4 pods per 15 s"},
    {.key = "scale_down",
     .type = ParamType::object,
     .doc = "scale-down behavior (/serving/autoscaling/scale_down)",
     .source = "HPA behavior.scaleDown",
     .computed = "300 s window; 100% per 15 s"},
    {.key = "scale_to_zero_cooldown_s",
     .type = ParamType::number,
     .def = 300,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "with min_replicas 0: no request in flight for this long scales the fleet to zero",
     .source = "KEDA ScaledObject cooldownPeriod (default 300 s)"},
    {.key = "container_start_s",
     .type = ParamType::number,
     .def = 20,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "cold start's fixed part before the weights load: pod scheduled on a node with the image, "
            "container and engine process up, imports, tokenizer",
     .source = "ours (an assumption; vLLM's start-up is CPU-bound in these steps: Breaking the Ice, arXiv "
               "2606.07362)"},
    {.key = "storage_gbyte_per_s",
     .type = ParamType::number,
     .def = 2,
     .min = 1e-6,
     .max = 1e6,
     .unit = "GB/s",
     .doc = "the model store's read bandwidth for one replica's weights",
     .source = "ours (an NVMe model cache or a fast network volume)"},
    {.key = "weights_over_network",
     .type = ParamType::boolean,
     .def = 1,
     .doc = "the model store is remote: the weights also cross the replica's NICs (the cluster's "
            "nic_gbyte_per_s per GPU), at the slower of the two",
     .source = "ours"},
    {.key = "engine_init_s",
     .type = ParamType::number,
     .def = 20,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "cold start's engine initialisation after the weights: torch.compile, CUDA graph capture, the "
            "KV-cache profile run",
     .source = "ours; vLLM's torch.compile design doc logs 15 s from Dynamo's trace to the saved graph for "
               "Llama-3.2-1B (uncached), plus graph capture"},
    {.key = "warm_pool",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "replicas started ahead of need, holding their GPUs; a scale-up takes one in warm_start_s and "
            "its slot refills a cold start later",
     .source = "ours (as EC2 Auto Scaling warm pools)"},
    {.key = "warm_start_s",
     .type = ParamType::number,
     .def = 5,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "a warm-pool replica joining the router (or waking from vLLM's sleep mode)",
     .source = "ours (an assumption)"},
};

inline constexpr ParamDecl serving_scale_up_params[] = {
    {.key = "stabilization_window_s",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 3600,
     .unit = "s",
     .doc = "scale up no further than the lowest recommendation of this window",
     .source = "HPA behavior.scaleUp.stabilizationWindowSeconds (default 0)"},
    {.key = "select_policy",
     .type = ParamType::choice,
     .def_name = "max",
     .doc = "max: the policy allowing the most change; min: the least; disabled: never scale up",
     .source = "HPA selectPolicy (default Max)",
     .choices = select_policy_names.names},
    {.key = "policies",
     .type = ParamType::any,
     .doc = "an array of {type, value, period_s} (/serving/autoscaling/scale_up/policies/N)",
     .source = "HPA behavior.scaleUp.policies",
     .computed = "[{percent, 100, 15}, {pods, 4, 15}]"},
};

inline constexpr ParamDecl serving_scale_down_params[] = {
    {.key = "stabilization_window_s",
     .type = ParamType::integer,
     .def = 300,
     .min = 0,
     .max = 3600,
     .unit = "s",
     .doc = "scale down no further than the highest recommendation of this window",
     .source = "HPA behavior.scaleDown.stabilizationWindowSeconds (default 300)"},
    {.key = "select_policy",
     .type = ParamType::choice,
     .def_name = "max",
     .doc = "max: the policy allowing the most change; min: the least; disabled: never scale down",
     .source = "HPA selectPolicy (default Max)",
     .choices = select_policy_names.names},
    {.key = "policies",
     .type = ParamType::any,
     .doc = "an array of {type, value, period_s} (/serving/autoscaling/scale_down/policies/N)",
     .source = "HPA behavior.scaleDown.policies",
     .computed = "[{percent, 100, 15}]"},
};

inline constexpr ParamDecl serving_scaling_policy_params[] = {
    {.key = "type",
     .type = ParamType::choice,
     .doc = "pods: value replicas per period; percent: value % of the period-start count",
     .source = "HPAScalingPolicy type (Pods, Percent)",
     .required = true,
     .choices = scaling_policy_type_names.names},
    {.key = "value",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 20,
     .doc = "replicas or percent",
     .source = "HPAScalingPolicy value (> 0)",
     .required = true},
    {.key = "period_s",
     .type = ParamType::integer,
     .min = 1,
     .max = 1800,
     .unit = "s",
     .doc = "the window the change is counted over",
     .source = "HPAScalingPolicy periodSeconds (1 .. 1800)",
     .required = true},
};

inline constexpr ParamDecl serving_admission_params[] = {
    {.key = "max_queued_requests",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1ll << 40,
     .unit = "requests",
     .doc = "reject an arrival when this many requests already wait (router and replicas) times its class's "
            "shed_fraction; 0: off",
     .source = "ours (queue-length load shedding)"},
    {.key = "max_wait_s",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "reject an arrival whose estimated wait exceeds this times its class's shed_fraction; 0: off",
     .source = "ours (latency-based load shedding)"},
    {.key = "max_ttft_p90_s",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "reject arrivals while the p90 TTFT of the last ttft_window_s exceeds this times the class's "
            "shed_fraction; 0: off",
     .source = "ours (latency-based load shedding)"},
    {.key = "ttft_window_s",
     .type = ParamType::number,
     .def = 60,
     .min = 1e-3,
     .max = kMaxAutoscaleSeconds,
     .unit = "s",
     .doc = "the TTFTs the observed p90 is taken over",
     .source = "ours"},
    {.key = "classes",
     .type = ParamType::any,
     .doc = "per request class (tenant): rate limit and shed fraction (an array of /serving/admission/classes/N)",
     .computed = "no rate limit, shed_fraction 1"},
};

inline constexpr ParamDecl serving_admission_class_params[] = {
    {.key = "class", .type = ParamType::string, .doc = "the /traffic/classes name this applies to", .required = true},
    {.key = "rate_per_s",
     .type = ParamType::number,
     .min = 1e-9,
     .max = 1e9,
     .unit = "requests/s",
     .doc = "the class's token bucket refill rate; arrivals beyond it are rejected",
     .source = "token bucket (as Envoy's local rate limit)",
     .computed = "no rate limit"},
    {.key = "burst",
     .type = ParamType::number,
     .min = 1,
     .max = 1e9,
     .unit = "requests",
     .doc = "the bucket's size (full at the start); with rate_per_s",
     .source = "token bucket max_tokens",
     .computed = "max(1, rate_per_s): one second's tokens"},
    {.key = "shed_fraction",
     .type = ParamType::number,
     .def = 1,
     .min = 0,
     .max = 1,
     .doc = "the share of each shedding threshold this class tolerates: a lower-priority class gets a smaller "
            "one and is shed first",
     .source = "ours",
     .min_exclusive = true},
};

// The tables above with their paths, for `ctwin params`.
std::vector<ParamTable> serving_autoscale_param_tables();

// /serving/autoscaling. Every bad value is an InputError naming its path. The cold start's
// network bandwidth is left 0 (the app fills it from the cluster when weights_over_network).
struct ServingAutoscaling {
  AutoscalerSpec hpa;
  ColdStartSpec start;
  bool weights_over_network = true;
  int warm_pool = 0;
};
ServingAutoscaling read_serving_autoscaling(const JsonObject& o);

// /serving/admission; classes name the traffic's (`classes`, in /traffic/classes order).
AdmissionSpec read_serving_admission(const JsonObject& o, const std::vector<RequestClass>& classes);

}  // namespace ctwin
