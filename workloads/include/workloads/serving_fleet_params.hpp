// The scenario keys of a coupled fleet (serving_fleet_sim.hpp): /serving/router, /serving/pools
// and /serving/failures, read by app/scenario_fleet.cpp.
#pragma once

#include <string_view>

#include "sim/params.hpp"
#include "workloads/serving_fleet_sim.hpp"

namespace ctwin {

// /serving's keys that make the fleet a coupled one (one event loop behind a router).
inline constexpr ParamDecl serving_fleet_sim_params[] = {
    {.key = "router",
     .type = ParamType::object,
     .doc = "the router in front of the replicas (/serving/router); given, the fleet runs as one coupled event "
            "loop in which each request is routed at its arrival with what the router knows then",
     .source = "vLLM production-stack router, SGLang sgl-router, llm-d",
     .computed = "none: round robin over independent replicas"},
    {.key = "pools",
     .type = ParamType::any,
     .doc = "a list of replica pools, each {name, gpu, tensor_parallel_size, pipeline_parallel_size, replicas, "
            "max_num_seqs, max_num_batched_tokens, cold_start_s} (/serving/pools/N), the rest of each replica as "
            "/serving says; in place of data_parallel_size (not both)",
     .computed = "none: data_parallel_size replicas of /serving"},
    {.key = "failures",
     .type = ParamType::object,
     .doc = "scheduled crashes and drains, random crashes (an MTBF per replica), and what happens to a crashed "
            "replica's requests (/serving/failures)",
     .computed = "none"},
};

inline constexpr ParamDecl serving_router_params[] = {
    {.key = "policy",
     .type = ParamType::choice,
     .def_name = "round_robin",
     .doc = "round_robin; least_outstanding (fewest requests the router sent and not yet answered); least_kv "
            "(lowest reported KV use); power_of_two (two replicas drawn per request, the less outstanding wins); "
            "session_affinity (a multi-turn session's later turns where its second turn went); prefix_aware "
            "(SGLang's cache-aware routing on the router's own prefix tree per replica)",
     .source = "SGLang sgl-router policies; Mitzenmacher, power of two choices (2001)",
     .choices = router_policy_names.names},
    {.key = "metrics_interval_s",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .max = 86400,
     .unit = "s",
     .doc = "how often replicas' reported metrics (KV use, queues) reach the router; 0: exact at each request. The "
            "router's own counts are always exact",
     .source = "a Prometheus scrape is 1-15 s; 0 isolates the policy from staleness"},
    {.key = "cache_threshold",
     .type = ParamType::number,
     .def = 0.5,
     .min = 0,
     .max = 1,
     .doc = "prefix_aware: the matched share of the prompt above which the request goes to the best-matching "
            "replica",
     .source = "SGLang sgl-router --cache-threshold (0.5)"},
    {.key = "balance_abs_threshold",
     .type = ParamType::integer,
     .def = 32,
     .min = 0,
     .max = 1 << 30,
     .unit = "requests",
     .doc = "prefix_aware: the load is imbalanced (least outstanding wins) when max - min outstanding exceeds this "
            "and max exceeds balance_rel_threshold x min",
     .source = "SGLang sgl-router --balance-abs-threshold (32)"},
    {.key = "balance_rel_threshold",
     .type = ParamType::number,
     .def = 1.0001,
     .min = 1,
     .max = 1e6,
     .doc = "prefix_aware: see balance_abs_threshold",
     .source = "SGLang sgl-router --balance-rel-threshold (1.0001)"},
    {.key = "max_tree_tokens",
     .type = ParamType::integer,
     .def = 1 << 24,
     .min = 1,
     .max = 1ll << 40,
     .unit = "tokens",
     .doc = "prefix_aware: tokens each replica's router tree remembers before its least recently used prefixes go",
     .source = "SGLang sgl-router --max-tree-size (2^26 characters, about 2^24 tokens)"},
    {.key = "seed",
     .type = ParamType::integer,
     .min = 0,
     .max = 1ll << 53,
     .doc = "power_of_two's draws, keyed by (seed, request id)",
     .computed = "the scenario's /seed"},
};

inline constexpr ParamDecl serving_pool_params[] = {
    {.key = "name", .type = ParamType::string, .doc = "the pool's name in reports and failures", .required = true},
    {.key = "gpu",
     .type = ParamType::string,
     .doc = "a catalog GPU name (A100-SXM-80GB, H100-SXM-80GB, ...): the pool's replicas run on it, with its "
            "shipped profile's host costs; a pool on another GPU than the cluster's is taken to have its own nodes",
     .computed = "the cluster's GPU"},
    {.key = "tensor_parallel_size",
     .type = ParamType::integer,
     .min = 1,
     .max = 1024,
     .unit = "GPUs",
     .doc = "the pool's replicas' tensor-parallel ranks",
     .computed = "/serving/tensor_parallel_size"},
    {.key = "pipeline_parallel_size",
     .type = ParamType::integer,
     .min = 1,
     .max = 1024,
     .unit = "GPUs",
     .doc = "the pool's replicas' pipeline stages",
     .computed = "/serving/pipeline_parallel_size"},
    {.key = "replicas",
     .type = ParamType::integer,
     .def = 1,
     .min = 0,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "replicas serving from t = 0"},
    {.key = "max_num_seqs",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 20,
     .doc = "the pool's scheduler's sequence limit",
     .computed = "/serving/max_num_seqs"},
    {.key = "max_num_batched_tokens",
     .type = ParamType::integer,
     .min = 1,
     .max = 1 << 24,
     .unit = "tokens",
     .doc = "the pool's scheduler's token budget per iteration",
     .computed = "/serving/max_num_batched_tokens"},
    {.key = "cold_start_s",
     .type = ParamType::number,
     .def = 60,
     .min = 0,
     .max = 86400,
     .unit = "s",
     .doc = "a replica added later (failures' adds, the control hook) serves this long after it is added: node "
            "start, image pull, weight load, CUDA graph capture",
     .source = "vLLM cold starts of 30 s to minutes (weights from local disk vs object store)"},
    {.key = "gpu_hour_usd",
     .type = ParamType::number,
     .min = 0,
     .max = 1e5,
     .unit = "USD",
     .doc = "the price of one of the pool's GPUs for an hour, paid for the replica-seconds the pool held (starting, "
            "serving, draining, down)",
     .source = "the catalog's gpu_hour_usd (on-demand list prices, docs/serving.md)",
     .computed = "/serving/cost/gpu_hour_usd for a pool on the cluster's GPU, else the pool's GPU's catalog price"},
};

inline constexpr ParamDecl serving_failures_params[] = {
    {.key = "events",
     .type = ParamType::any,
     .doc = "a list of {t_s, kind (crash, drain, add), pool (a pool's name), replica (its index in the pool), "
            "restart_s (crash: back after this long, empty; -1 never)} (/serving/failures/events/N)",
     .computed = "none"},
    {.key = "retry",
     .type = ParamType::choice,
     .def_name = "retry",
     .doc = "what happens to the requests a crashed replica held: retry (routed again at the crash, their latency "
            "counted from the first arrival) or lose",
     .choices = retry_policy_names.names},
    {.key = "max_retries",
     .type = ParamType::integer,
     .def = 1,
     .min = 0,
     .max = 100,
     .doc = "crashes a request survives before it is lost"},
    {.key = "mtbf_hours",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .max = 1e7,
     .unit = "h",
     .doc = "random crashes: each serving or draining replica crashes after an exponential time of this mean (a "
            "Poisson process per replica, drawn from the scenario's seed); 0: none",
     .source = "Llama 3 (arXiv 2407.21783, section 3.3.4): 419 unexpected interruptions in 54 days on 16,384 GPUs, "
               "about 20 per million GPU-hours, so an 8-GPU replica's MTBF is near 6,300 h"},
    {.key = "restart_s",
     .type = ParamType::number,
     .min = 0,
     .max = 1e9,
     .unit = "s",
     .doc = "random crashes: a crashed replica restarts, empty, this long after (a draining one does not come back)",
     .computed = "the pool's cold start (cold_start_s, or the autoscaling cold-start model)"},
};

inline constexpr ParamDecl serving_failure_event_params[] = {
    {.key = "t_s", .type = ParamType::number, .min = 0, .max = 1e9, .unit = "s", .required = true},
    {.key = "kind", .type = ParamType::choice, .def_name = "crash", .choices = fleet_event_kind_names.names},
    {.key = "pool", .type = ParamType::string, .doc = "a pool's name", .computed = "the first pool"},
    {.key = "replica",
     .type = ParamType::integer,
     .def = 0,
     .min = 0,
     .max = 1 << 20,
     .doc = "the replica's index in its pool (0 .. replicas - 1, then added ones in order); add: unused"},
    {.key = "restart_s",
     .type = ParamType::number,
     .def = -1,
     .min = -1,
     .max = 1e9,
     .unit = "s",
     .doc = "crash: the replica restarts (empty) this long after; -1: never"},
};

}  // namespace ctwin
