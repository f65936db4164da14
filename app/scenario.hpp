// Scenario files: JSON read here, once, into typed structs. Every key is declared once in a
// parameter table beside the struct it fills (`ctwin params`, docs/scenarios.md); every error
// names the file, the JSON pointer, what was found and what is expected (InputError, exit 2).
//
// Assembly only: GPUs and clusters are read by topology (catalog_json, cluster_json), models by
// workloads (model_json); app/scenario_*.cpp read the scenario's own parts, one concern each.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "realrun/realrun_config.hpp"
#include "sim/params.hpp"
#include "topology/catalog.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"
#include "workloads/model.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_autoscale_params.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_disagg.hpp"
#include "workloads/serving_energy.hpp"
#include "workloads/serving_fleet_sim.hpp"
#include "workloads/serving_traffic.hpp"
#include "workloads/serving_types.hpp"
#include "workloads/training.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

enum class NetworkFidelity { analytical, flow };
inline constexpr auto fidelity_names =
    make_names<NetworkFidelity>({{NetworkFidelity::analytical, "analytical"}, {NetworkFidelity::flow, "flow"}});

// What a scenario simulates (/kind): a training step, or one serving replica under traffic.
enum class JobKind { training, serving };
inline constexpr auto job_kind_names =
    make_names<JobKind>({{JobKind::training, "training"}, {JobKind::serving, "serving"}});

// A published measurement a validation scenario reproduces (/validation).
struct ValidationTarget {
  std::string source;
  // Training: "tflops_per_gpu" (model FLOPs), "hardware_tflops_per_gpu" (with recomputation, as
  // Megatron-LM's papers count), "step_time_s", "tokens_per_s_per_gpu", "mfu",
  // "causal_tflops_per_gpu" (model FLOPs with only the causal half of QK^T and PV, as a causal
  // kernel runs them; for publishers that count that way, docs/validation.md),
  // "peak_allocated_bytes" / "peak_reserved_bytes" (the worst stage's caching-allocator peak,
  // as torch.cuda.max_memory_allocated / max_memory_reserved report it),
  // "last_stage_peak_allocated_bytes" (the last pipeline stage's: Megatron-LM logs the last
  // rank's memory). Serving (one
  // replica's ServingResult): "ttft_mean_s", "ttft_p50_s", "tpot_mean_s" (the mean ITL for fixed
  // output lengths), "e2e_mean_s", "output_tokens_per_s", "requests_per_s", "total_tokens_per_s";
  // a fleet's (issue 18): "slo_attainment" (requests meeting every SLO of their class over
  // completed + rejected), "goodput_requests_per_s_per_gpu" (over the fleet's GPUs, both pools'
  // when disaggregated), "prefix_hit_rate" (cached prompt tokens over looked-up ones).
  std::string metric;
  double published = 0;
  std::string notes;
  bool present() const { return !metric.empty(); }
};

struct JobSpec;  // workloads/job.hpp, kept out of this header (every app file includes it)

// /kind "training": a model trained with a layout (/model, /training).
struct TrainingJob {
  ModelSpec model;          // /model
  TrainingConfig training;  // /training
  // /training/parallelism is "auto": the layout is `ctwin sweep`'s to choose; training holds
  // every other key, with a placeholder layout (all 1, dp = GPUs) that was not checked.
  bool auto_layout = false;
  // /job: the whole training job around the step (failures, checkpoints, restarts; docs/jobs.md).
  std::shared_ptr<const JobSpec> job;
};
// /kind "serving": a fleet of data_parallel_size identical model replicas (/serving: each one's
// GPUs, precisions and vLLM's scheduler keys) behind a round-robin split of the traffic
// (/traffic); one replica by default.
struct ServingJob {
  ModelSpec model;               // /model
  ServingDeployment deployment;  // /serving: one replica's TP, PP, quantization, KV dtype, CUDA graphs, proposer
  SchedulerConfig scheduler;     // /serving: max_num_seqs, max_num_batched_tokens, block_size, ...
  TrafficSpec traffic;           // /traffic: the whole fleet's requests
  int data_parallel_size = 1;    // /serving/data_parallel_size: the replicas
  // /serving/disaggregation: a prefill pool and a decode pool (each its own replicas and TP, the
  // rest of /serving shared) in place of the aggregated fleet; none: aggregated.
  std::optional<DisaggregationSpec> disaggregation;
  // /serving/router, /serving/pools, /serving/failures: a coupled fleet behind a router; none:
  // data_parallel_size independent replicas behind a round-robin split.
  std::optional<FleetSpec> fleet;
  // /serving/cost: the GPU-hour's price (the catalog's unless given), electricity's.
  ServingCostConfig cost;
  // /serving/autoscaling and /serving/admission: run on the fleet simulation (`fleet` is then set,
  // one pool of /serving's replicas by default); serving_job() refuses what it cannot run yet.
  std::optional<ServingAutoscaling> autoscaling;
  std::optional<AdmissionSpec> admission;
  int gpus() const {  // the fleet's, both pools' when disaggregated
    if (fleet) {
      int n = 0;
      // Autoscaled: the most it may hold (max_replicas + the warm pool per pool).
      for (const FleetPool& p : fleet->pools)
        n += (autoscaling ? autoscaling->hpa.max_replicas + autoscaling->warm_pool : p.replicas) * p.deployment.gpus();
      return n;
    }
    if (disaggregation)
      return disaggregation->prefill.gpus() * disaggregation->prefill_replicas +
             disaggregation->decode.gpus() * disaggregation->decode_replicas;
    return data_parallel_size * deployment.gpus();
  }
};

// /serving's fleet key, read beside the deployment's and the scheduler's tables (scenario_job.cpp):
// how many copies of the replica serve the traffic, each an independent engine.
inline constexpr ParamDecl serving_fleet_params[] = {
    {.key = "data_parallel_size",
     .type = ParamType::integer,
     .def = 1,
     .min = 1,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "identical replicas, each an independent engine of tensor_parallel_size x pipeline_parallel_size "
            "GPUs; request i goes to replica i mod data_parallel_size (open-loop traffic only); the fleet's "
            "GPUs must fit the cluster",
     .source = "vLLM --data-parallel-size"},
    {.key = "disaggregation",
     .type = ParamType::object,
     .doc = "disaggregated prefill/decode (xPyD): a prefill pool and a decode pool with the KV moved between "
            "them, in place of data_parallel_size aggregated replicas (/serving/disaggregation)",
     .source = "DistServe (OSDI'24), Splitwise (ISCA'24), vLLM disaggregated prefill",
     .computed = "none: aggregated"},
    {.key = "cost",
     .type = ParamType::object,
     .doc = "what the report prices the run at: GPU-hours and energy (/serving/cost)",
     .source = "docs/serving.md, \"Cost and energy\"",
     .computed = "the catalog's gpu_hour_usd, electricity not counted"},
};

// /serving/disaggregation: the two pools (each replica otherwise as /serving describes it:
// pipeline_parallel_size, precisions, scheduler keys) and the KV link between them.
inline constexpr ParamDecl serving_disaggregation_params[] = {
    {.key = "prefill_replicas",
     .type = ParamType::integer,
     .def = 1,
     .min = 1,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "prefill replicas; request i is prefilled on replica i mod prefill_replicas, as a prefill-only "
            "request whose first token it emits",
     .source = "DistServe / vLLM: the x of xPyD"},
    {.key = "prefill_tensor_parallel_size",
     .type = ParamType::integer,
     .min = 1,
     .max = 1024,
     .unit = "GPUs",
     .doc = "tensor-parallel ranks of a prefill replica; divides the attention heads and KV heads",
     .source = "vLLM --tensor-parallel-size of the prefill instance",
     .computed = "/serving/tensor_parallel_size"},
    {.key = "decode_replicas",
     .type = ParamType::integer,
     .def = 1,
     .min = 1,
     .max = 1 << 20,
     .unit = "replicas",
     .doc = "decode replicas; each request goes to one round-robin (by request, as vLLM's disaggregation proxy), "
            "which admits it when its KV lands",
     .source = "DistServe / vLLM: the y of xPyD"},
    {.key = "decode_tensor_parallel_size",
     .type = ParamType::integer,
     .min = 1,
     .max = 1024,
     .unit = "GPUs",
     .doc = "tensor-parallel ranks of a decode replica; divides the attention heads and KV heads",
     .source = "vLLM --tensor-parallel-size of the decode instance",
     .computed = "/serving/tensor_parallel_size"},
    {.key = "kv_link_gbyte_per_s",
     .type = ParamType::number,
     .min = 0,
     .max = 1e6,
     .unit = "GB/s",
     .doc = "one prefill replica's KV link to the decode pool, all its GPUs together, and the most one "
            "transfer can take; concurrent transfers share it by max-min fairness",
     .source = "the cluster's: per GPU the node fabric (intra_gbyte_per_s) when both pools fit one node, else "
               "nic_gbyte_per_s; times min(prefill, decode replica GPUs) sending at once",
     .computed = "from /cluster",
     .min_exclusive = true},
    {.key = "kv_decode_link_gbyte_per_s",
     .type = ParamType::number,
     .min = 0,
     .max = 1e6,
     .unit = "GB/s",
     .doc = "one decode replica's KV link from the prefill pool, all its GPUs together; transfers landing on one "
            "decode replica share it by max-min fairness",
     .source = "the cluster's: per GPU as kv_link_gbyte_per_s, times the decode replica's GPUs",
     .computed = "from /cluster",
     .min_exclusive = true},
    {.key = "kv_link_latency_us",
     .type = ParamType::number,
     .min = 0,
     .max = 1e9,
     .unit = "us",
     .doc = "fixed latency of one KV transfer, added after its bytes / bandwidth",
     .source = "the cluster's intra_latency_us (one node) or inter_latency_us",
     .computed = "from /cluster"},
    {.key = "kv_transfer",
     .type = ParamType::choice,
     .def_name = "after_prefill",
     .doc = "when a request's KV leaves: whole once its prompt completes (after_prefill), or streamed layer by "
            "layer as the prefill computes it (layerwise: each iteration's chunk split evenly over the model's "
            "layers, at most at the rate the prefill produces it, the last layer's bytes after the first token)",
     .source = "Mooncake, vLLM's KV connectors, DistServe's pipelined KV transfer",
     .choices = kv_transfer_mode_names.names},
};
using Job = std::variant<TrainingJob, ServingJob>;

struct Scenario {
  std::string file;                                        // where it came from, for messages
  std::string name;                                        // /name
  JobKind kind = JobKind::training;                        // /kind
  std::uint64_t seed = 1;                                  // /seed
  std::optional<Profile> profile;                          // /profile (none: each GPU's own)
  ClusterSpec cluster;                                     // /cluster
  Job job;                                                 // /model, /training (by /kind)
  std::vector<std::string> warnings;                       // suspicious values, for stderr and reports
  NetworkFidelity fidelity = NetworkFidelity::analytical;  // /network/fidelity
  CollectiveOptions collectives;                           // /network/algo, /network/protocol
  ValidationTarget validation;                             // /validation
  realrun::RealrunConfig realrun;                          // /realrun: how `ctwin realrun` measures it
};

// The training (serving) job of a scenario; an InputError naming /kind for any other kind, and
// for a training job whose layout is "auto" (only `ctwin sweep` reads those, through sc.job).
const TrainingJob& training_job(const Scenario& sc);
const ServingJob& serving_job(const Scenario& sc);

// What every command simulating a scenario's training passes: its network fidelity and NCCL
// choices, and the /profile's compute model (none: the GPU's own profile, the default).
TrainingOptions training_options(const Scenario& sc);

// /network/algo and /network/protocol names, as NCCL_ALGO and NCCL_PROTO take them.
inline constexpr std::string_view nccl_algo_choices[] = {"auto", "ring", "tree", "nvls", "collnet", "nvlstree"};
inline constexpr std::string_view nccl_protocol_choices[] = {"auto", "ll", "ll128", "simple"};
inline constexpr std::string_view validation_metric_choices[] = {"tflops_per_gpu",
                                                                 "hardware_tflops_per_gpu",
                                                                 "step_time_s",
                                                                 "tokens_per_s_per_gpu",
                                                                 "mfu",
                                                                 "causal_tflops_per_gpu",
                                                                 "peak_allocated_bytes",
                                                                 "peak_reserved_bytes",
                                                                 "last_stage_peak_allocated_bytes",
                                                                 "ttft_mean_s",
                                                                 "ttft_p50_s",
                                                                 "tpot_mean_s",
                                                                 "e2e_mean_s",
                                                                 "output_tokens_per_s",
                                                                 "requests_per_s",
                                                                 "total_tokens_per_s",
                                                                 "slo_attainment",
                                                                 "goodput_requests_per_s_per_gpu",
                                                                 "prefix_hit_rate"};
// The training metrics come first in validation_metric_choices, then the serving ones.
inline constexpr std::ptrdiff_t training_metric_count = 9;
// Whether a validation metric is read from a serving run (else from a training step).
bool is_serving_metric(std::string_view metric);

// The top level of a scenario, filling Scenario.
inline constexpr ParamDecl scenario_params[] = {
    {.key = "name", .type = ParamType::string, .doc = "shown in reports", .required = true},
    {.key = "kind",
     .type = ParamType::choice,
     .def_name = "training",
     .doc = "what to simulate: a training step (/training) or a serving replica under traffic (/serving, "
            "/traffic)",
     .choices = job_kind_names.names},
    {.key = "seed",
     .type = ParamType::integer,
     .def = 1,
     .min = 0,
     .doc = "seeds the noise model; same seed, same output bytes"},
    {.key = "cluster",
     .type = ParamType::object,
     .doc = "the hardware (/cluster); {\"file\": PATH} reads a `ctwin cluster --write` description, relative to "
            "the scenario, and the keys beside it override it",
     .required = true},
    {.key = "model", .type = ParamType::any, .doc = "a catalog model name, or an object (/model)", .required = true},
    {.key = "training",
     .type = ParamType::object,
     .doc = "the training job (/training); required for training",
     .computed = "required for kind training"},
    {.key = "job",
     .type = ParamType::object,
     .doc = "training only: the whole job around the step (/job): tokens to train, failures, checkpoints, "
            "restarts, elasticity; `ctwin run` adds the job report (docs/jobs.md)",
     .computed = "none: the step alone"},
    {.key = "serving",
     .type = ParamType::object,
     .doc = "the serving replica and its scheduler (/serving), keys named as vLLM's engine arguments",
     .computed = "required for kind serving"},
    {.key = "traffic",
     .type = ParamType::object,
     .doc = "the requests a serving replica gets (/traffic)",
     .computed = "required for kind serving"},
    {.key = "profile",
     .type = ParamType::any,
     .doc = "a calibration profile (docs/profiles.md) for the cluster's link figures and the compute model: a "
            "shipped name (A100, B200, H100, H200, L40S) or {\"file\": PATH}, relative to the scenario; keys "
            "written under /cluster still win",
     .computed = "each GPU's shipped profile"},
    {.key = "network",
     .type = ParamType::object,
     .doc = "network model (/network)",
     .computed = "{\"fidelity\": \"analytical\"}"},
    {.key = "catalog",
     .type = ParamType::object,
     .doc = "/catalog/gpus/NAME and /catalog/models/NAME add entries or override fields of built-in ones"},
    {.key = "validation", .type = ParamType::object, .doc = "a published measurement this scenario reproduces"},
    {.key = "realrun",
     .type = ParamType::object,
     .doc = "how `ctwin realrun` measures this scenario on real devices (/realrun, docs/realrun.md)",
     .computed = "the /realrun defaults"},
    {.key = "sweep",
     .type = ParamType::object,
     .doc = "the variants `ctwin sweep` simulates and ranks (/sweep, docs/sweep.md); `ctwin run` simulates the "
            "scenario as written and ignores it"},
};

inline constexpr ParamDecl network_params[] = {
    {.key = "fidelity",
     .type = ParamType::choice,
     .def_name = "analytical",
     .doc = "alpha-beta collectives, or flows sharing the cluster's links by max-min fairness (slower)",
     .choices = fidelity_names.names},
    {.key = "algo",
     .type = ParamType::choice,
     .def_name = "auto",
     .doc = "NCCL's algorithm for every collective, or an object per operation ({\"all_reduce\": \"tree\"}); "
            "where the choice cannot run a call NCCL's tuner picks",
     .source = "NCCL_ALGO",
     .choices = nccl_algo_choices},
    {.key = "protocol",
     .type = ParamType::choice,
     .def_name = "auto",
     .doc = "NCCL's protocol, or an object per operation, with the same fallback",
     .source = "NCCL_PROTO",
     .choices = nccl_protocol_choices},
};

inline constexpr ParamDecl validation_params[] = {
    {.key = "source", .type = ParamType::string, .doc = "the publication", .required = true},
    {.key = "metric",
     .type = ParamType::choice,
     .doc = "what was measured",
     .required = true,
     .choices = validation_metric_choices},
    {.key = "published",
     .type = ParamType::number,
     .min = 0,
     .doc = "the published value",
     .required = true,
     .min_exclusive = true},
    {.key = "notes", .type = ParamType::string, .def_name = "", .doc = "for reports"},
    {.key = "tolerance",
     .type = ParamType::number,
     .doc = "accepted, not read (the validation test applies its own bands)"},
};

// Every table a scenario is read through, in document order (`ctwin params`).
std::span<const ParamTable> scenario_param_tables();

// A "--set /json/pointer=value" override. The value is parsed as JSON when it is valid
// JSON (numbers, true, {"a":1}), else taken as a string.
struct Override {
  std::string pointer;
  std::string value;
};

Override parse_override(const std::string& text);

// Values that parse but are probably a unit mistake (a NIC above 1,000 GB/s: Gb/s typed into a GB/s
// key), then fabric keys that change nothing on this cluster (fabric_warnings).
std::vector<std::string> cluster_warnings(const ClusterSpec& c);

// Sets root at ov.pointer to ov.value, creating missing objects along the pointer; an
// existing parent that is not an object is an InputError naming the pointer (path: for messages).
void apply_override(Json& root, const Override& ov, const std::string& path);

// The scenario's JSON as the loader sees it before converting: parsed, /model normalised,
// overrides applied (`ctwin sweep` sets its variants' keys on it). Throws InputError.
Json scenario_root(const std::string& text, const std::string& path, const std::vector<Override>& overrides = {});
Json load_scenario_root(const std::string& path, const std::vector<Override>& overrides = {});

// Reads, applies overrides, validates and converts. Throws InputError.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
// The same from text (path is used in messages only).
Scenario parse_scenario(const std::string& text, const std::string& path, const std::vector<Override>& overrides = {});

}  // namespace ctwin
