// The job a scenario runs, by /kind: "training" (the default) reads /model and /training;
// "serving" reads /model, /serving (the deployment's and the scheduler's keys, one object as
// vLLM's engine arguments are one list) and /traffic.
#include <filesystem>
#include <memory>

#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "workloads/job_params.hpp"
#include "workloads/model_json.hpp"
#include "workloads/serving_autoscale_params.hpp"
#include "workloads/serving_fleet_params.hpp"
#include "workloads/serving_scheduler_params.hpp"
#include "workloads/serving_traffic_params.hpp"

namespace ctwin {
namespace {

// A key of one job kind in a scenario of the other is a mistake worth naming (a /training object
// in a serving scenario would otherwise be silently ignored).
void require_kind_keys(const JsonObject& top, const Scenario& sc, std::initializer_list<const char*> needed,
                       std::initializer_list<const char*> foreign) {
  const std::string kind = job_kind_names.name(sc.kind);
  for (const char* k : needed) {
    if (!top.has(k)) top.fail(k, "missing required key", std::string("an object: a ") + kind + " scenario needs it");
  }
  for (const char* k : foreign) {
    if (top.has(k)) {
      top.fail(k, std::string("found in a ") + kind + " scenario",
               "no /" + std::string(k) + " here (or /kind set to the job it belongs to)");
    }
  }
}

TrainingJob read_training_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs,
                              const Scenario& sc) {
  require_kind_keys(top, sc, {"training"}, {"serving", "traffic"});
  TrainingJob job;
  job.model = read_model(root, top.file(), catalogs.models);
  const JsonObject to = top.object("training");
  if (to.has("parallelism") && !to.raw("parallelism").is_object()) {
    if (to.raw("parallelism") != Json("auto")) {
      to.fail("parallelism", "found " + shown(to.raw("parallelism")),
              "an object (tp, pp, dp, ...), or \"auto\" for `ctwin sweep` to choose");
    }
    job.auto_layout = true;
  }
  job.training = read_training(to, job.model, sc.cluster, job.auto_layout);
  job.training.seed = sc.seed;
  // A calibrated profile's measured interference applies unless the scenario sets its own.
  if (sc.profile && !top.object("training").has("overlap_slowdown"))
    job.training.overlap_slowdown = sc.profile->compute.overlap_slowdown;
  if (top.has("job")) job.job = std::make_shared<const JobSpec>(read_job_spec(top.object("job")));
  return job;
}

// /serving/data_parallel_size: the replicas must fit the cluster beside each other, and the
// traffic must be splittable round-robin (an open-loop stream: a closed-loop user waits for a
// completion that would happen on another replica).
void read_fleet(const JsonObject& so, ServingJob& job, const Cluster& cluster) {
  const ParamReader r(so, serving_fleet_params, false);
  job.data_parallel_size = static_cast<int>(r.integer("data_parallel_size"));
  const ServingDeployment& d = job.deployment;
  const long long gpus = 1ll * d.tp * d.pp * job.data_parallel_size;
  if (gpus > cluster.gpu_count()) {
    so.fail("data_parallel_size",
            "found " + std::to_string(job.data_parallel_size) + " replicas of tensor_parallel_size " +
                std::to_string(d.tp) + " x pipeline_parallel_size " + std::to_string(d.pp) + " = " +
                std::to_string(gpus) + " GPUs, but the cluster has " + std::to_string(cluster.gpu_count()),
            "at most " + std::to_string(cluster.gpu_count() / d.gpus()) + " replicas of " + std::to_string(d.gpus()) +
                " GPUs (or more nodes)");
  }
  if (job.data_parallel_size > 1 && job.traffic.arrival.process == ArrivalProcess::closed_loop) {
    so.fail("data_parallel_size",
            "found " + std::to_string(job.data_parallel_size) +
                " replicas under closed-loop traffic (/traffic/arrival/process), which a round-robin split cannot "
                "divide: each user waits for its own completions",
            "1 for a closed-loop source, or an open-loop /traffic/arrival (poisson, gamma, trace, ...)");
  }
}

// /serving/disaggregation: each pool's replicas and TP (the rest of /serving shared), the KV link
// (the cluster's unless given), both pools within the cluster's GPUs, an open-loop stream.
void read_disaggregation(const JsonObject& so, ServingJob& job, const Cluster& cluster) {
  if (!so.has("disaggregation")) return;
  const JsonObject o = so.object("disaggregation");
  const ParamReader r(o, serving_disaggregation_params);
  if (job.data_parallel_size > 1) {
    so.fail("data_parallel_size",
            "found " + std::to_string(job.data_parallel_size) +
                " beside /serving/disaggregation, whose pools set their own replicas",
            "1 (or no data_parallel_size), with disaggregation's prefill_replicas and decode_replicas");
  }
  if (job.traffic.arrival.process == ArrivalProcess::closed_loop) {
    so.fail("disaggregation",
            "found under closed-loop traffic (/traffic/arrival/process), which the prefill pool's round-robin "
            "split cannot divide",
            "an open-loop /traffic/arrival (poisson, gamma, trace, ...), or no disaggregation");
  }
  DisaggregationSpec s;
  s.prefill = s.decode = job.deployment;
  const ModelSpec& m = job.model;
  const auto pool_tp = [&](const char* key) {
    const int tp = static_cast<int>(r.integer(key, job.deployment.tp));
    const int kvh = m.kv_heads > 0 ? m.kv_heads : m.heads;
    if (m.heads % tp != 0 || (!m.mla.enabled() && kvh % tp != 0 && tp % kvh != 0)) {
      o.fail(key,
             "found " + std::to_string(tp) + ", which does not divide " + m.name + "'s " + std::to_string(m.heads) +
                 " attention heads and " + std::to_string(kvh) + " KV heads",
             "a divisor of the heads that divides the KV heads or is a multiple of them");
    }
    return tp;
  };
  s.prefill.tp = pool_tp("prefill_tensor_parallel_size");
  s.decode.tp = pool_tp("decode_tensor_parallel_size");
  s.prefill_replicas = static_cast<int>(r.integer("prefill_replicas"));
  s.decode_replicas = static_cast<int>(r.integer("decode_replicas"));
  const long long pg = 1ll * s.prefill.gpus() * s.prefill_replicas, dg = 1ll * s.decode.gpus() * s.decode_replicas;
  if (pg + dg > cluster.gpu_count()) {
    so.fail("disaggregation",
            "found a prefill pool of " + std::to_string(s.prefill_replicas) + " x " + std::to_string(s.prefill.gpus()) +
                " GPUs and a decode pool of " + std::to_string(s.decode_replicas) + " x " +
                std::to_string(s.decode.gpus()) + " GPUs, " + std::to_string(pg + dg) +
                " GPUs in all, but the cluster has " + std::to_string(cluster.gpu_count()),
            "both pools within " + std::to_string(cluster.gpu_count()) +
                " GPUs (fewer replicas, smaller tensor_parallel_size, or more nodes)");
  }
  const KvLink link =
      default_kv_link(cluster.spec, s.prefill.gpus(), s.prefill_replicas, s.decode.gpus(), s.decode_replicas);
  s.link_bytes_per_s = r.has("kv_link_gbyte_per_s") ? r.bandwidth("kv_link_gbyte_per_s") * 1e9 : link.bytes_per_s;
  s.decode_link_bytes_per_s =
      r.has("kv_decode_link_gbyte_per_s") ? r.bandwidth("kv_decode_link_gbyte_per_s") * 1e9 : link.decode_bytes_per_s;
  s.link_latency_s = r.has("kv_link_latency_us") ? r.number("kv_link_latency_us") * 1e-6 : link.latency_s;
  s.kv_transfer = r.choice("kv_transfer", kv_transfer_mode_names);
  if (!(s.link_bytes_per_s > 0)) {
    o.fail("kv_link_gbyte_per_s", "is not given and the cluster's link for it is 0 GB/s",
           "a bandwidth in GB/s > 0 (kv_link_gbyte_per_s)");
  }
  job.disaggregation = std::move(s);
}

// /serving/cost: the price of a GPU-hour (the GPU's catalog price unless given) and of electricity.
void read_cost(const JsonObject& so, ServingJob& job) {
  job.cost.gpu_hour_usd = job.deployment.cluster.spec.gpu.gpu_hour_usd;
  if (!so.has("cost")) return;
  const ParamReader r(so.object("cost"), serving_cost_params);
  job.cost.gpu_hour_usd = r.number("gpu_hour_usd", job.cost.gpu_hour_usd);
  job.cost.electricity_usd_per_kwh = r.number("electricity_usd_per_kwh");
}

// /serving/autoscaling and /serving/admission: an aggregated fleet whose largest size (max_replicas
// plus the warm pool, each replica's GPUs) fits the cluster; admission classes name /traffic's.
void read_fleet_policies(const JsonObject& so, ServingJob& job, const Cluster& cluster) {
  if (so.has("autoscaling")) {
    if (job.disaggregation) {
      so.fail("autoscaling", "found beside /serving/disaggregation",
              "autoscaling of an aggregated fleet (no disaggregation)");
    }
    const JsonObject o = so.object("autoscaling");
    ServingAutoscaling a = read_serving_autoscaling(o);
    const long long replicas = 1ll * a.hpa.max_replicas + a.warm_pool;
    const long long gpus = replicas * job.deployment.gpus();
    if (gpus > cluster.gpu_count()) {
      o.fail("max_replicas",
             "found " + std::to_string(a.hpa.max_replicas) + " replicas + a warm pool of " +
                 std::to_string(a.warm_pool) + ", " + std::to_string(replicas) + " x " +
                 std::to_string(job.deployment.gpus()) + " = " + std::to_string(gpus) + " GPUs, but the cluster has " +
                 std::to_string(cluster.gpu_count()),
             "max_replicas + warm_pool at most " + std::to_string(cluster.gpu_count() / job.deployment.gpus()));
    }
    // Weights on network storage also cross the replica's NICs (each GPU's share of its node's).
    if (a.weights_over_network) {
      const ClusterSpec& c = cluster.spec;
      a.start.network_bytes_per_s =
          c.nic_gbyte_per_s * 1e9 * job.deployment.gpus() * std::min(1.0, 1.0 * c.nics() / c.gpus_per_node);
    }
    job.autoscaling = std::move(a);
  }
  if (so.has("admission")) job.admission = read_serving_admission(so.object("admission"), job.traffic.classes);
}

ServingJob read_serving_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs,
                            const Scenario& sc) {
  require_kind_keys(top, sc, {"serving", "traffic"}, {"training", "job"});
  ServingJob job;
  job.model = read_model(root, top.file(), catalogs.models);
  const JsonObject so = top.object("serving");
  // /serving is read through two tables (the deployment's and the scheduler's): each reads its
  // keys, and a key neither declares is an error here.
  std::vector<std::string> keys = param_keys(serving_deployment_params);
  for (auto& k : param_keys(serving_scheduler_params)) keys.push_back(std::move(k));
  for (auto& k : param_keys(serving_fleet_params)) keys.push_back(std::move(k));
  for (auto& k : param_keys(serving_fleet_sim_params)) keys.push_back(std::move(k));
  for (auto& k : param_keys(serving_fleet_policy_params)) keys.push_back(std::move(k));
  so.only(keys);
  const Cluster cluster = build_cluster(sc.cluster);
  job.deployment = deployment_from_json(so, job.model, cluster, builtin_models());
  if (sc.profile) job.deployment = with_profile(std::move(job.deployment), *sc.profile);
  job.scheduler = read_scheduler_config(so);
  // vLLM's default: the model's context length (max_position_embeddings).
  if (job.scheduler.max_model_len == 0) job.scheduler.max_model_len = job.model.max_seq;
  job.traffic = traffic_from_json(top.object("traffic"), top.file(), std::filesystem::path(top.file()).parent_path());
  if (!top.object("traffic").has("seed")) job.traffic.seed = sc.seed;
  check_trace_block_tokens(job.traffic, top.object("traffic"), job.scheduler.block_size, "/serving/block_size");
  // Multi-LoRA is on when the requests carry adapters; slots are sized for max_lora_rank.
  job.scheduler.enable_lora = job.traffic.lora.adapters > 0;
  job.scheduler.lora_adapter_rank = job.traffic.lora.rank;
  if (job.scheduler.enable_lora && job.traffic.lora.rank > job.scheduler.max_lora_rank)
    top.object("traffic").object("lora").fail(
        "rank", std::to_string(job.traffic.lora.rank),
        "at most /serving/max_lora_rank = " + std::to_string(job.scheduler.max_lora_rank));
  read_fleet(so, job, cluster);
  read_disaggregation(so, job, cluster);
  read_fleet_policies(so, job, cluster);
  job.fleet = read_serving_fleet(top, job, catalogs, sc);
  // A pooled host tier couples the replicas: only the fleet loop runs them together.
  if (job.scheduler.kv_offloading_size_gib > 0 && job.scheduler.kv_offloading_scope == KvOffloadScope::pool &&
      !job.fleet && (job.data_parallel_size > 1 || job.disaggregation))
    so.fail("kv_offloading_scope",
            "\"pool\" with " + (job.disaggregation
                                    ? std::string("/serving/disaggregation, whose pools run their replicas apart")
                                    : "data_parallel_size " + std::to_string(job.data_parallel_size) +
                                          ", whose replicas run apart behind a round-robin split"),
            "a routed fleet (/serving/router or /serving/pools) for a pooled tier, or \"replica\"");
  read_cost(so, job);
  return job;
}

}  // namespace

Job read_job(const JsonObject& top, const Json& root, const ScenarioCatalogs& catalogs, const Scenario& sc) {
  switch (sc.kind) {
    case JobKind::training:
      return read_training_job(top, root, catalogs, sc);
    case JobKind::serving:
      return read_serving_job(top, root, catalogs, sc);
  }
  top.fail("kind", "found an unknown job kind", "\"training\" or \"serving\"");
}

const TrainingJob& training_job(const Scenario& sc) {
  if (const auto* t = std::get_if<TrainingJob>(&sc.job)) {
    if (t->auto_layout) {
      throw InputError(sc.file, "/training/parallelism", "is \"auto\": a layout for `ctwin sweep` to choose",
                       "`ctwin sweep " + sc.file + "`, or a layout object (tp, pp, dp, ...) to simulate one");
    }
    return *t;
  }
  throw InputError(sc.file, "/kind", std::string("found \"") + job_kind_names.name(sc.kind) + "\"",
                   "\"training\" for this command");
}

const ServingJob& serving_job(const Scenario& sc) {
  if (const auto* j = std::get_if<ServingJob>(&sc.job)) {
    // Read and checked, but the fleet simulation does not run these yet: refuse rather than ignore.
    if (j->admission && j->disaggregation) {
      throw InputError(sc.file, "/serving/admission", "is set beside /serving/disaggregation",
                       "admission control of an aggregated or routed fleet (the disaggregated pools do not run it)");
    }
    return *j;
  }
  throw InputError(sc.file, "/kind", std::string("found \"") + job_kind_names.name(sc.kind) + "\"",
                   "\"serving\" for this command");
}

TrainingOptions training_options(const Scenario& sc) {
  TrainingOptions opt;
  opt.flow_network = sc.fidelity == NetworkFidelity::flow;
  opt.collectives = sc.collectives;
  if (sc.profile) {
    const Dtype dtype = std::get<TrainingJob>(sc.job).training.precision.compute;
    opt.cost_model = profile_cost_model(*sc.profile, sc.cluster.gpu, dtype);
    if (!sc.profile->tables.collectives.empty())
      opt.measured_collectives =
          std::make_shared<const std::vector<MeasuredCollective>>(sc.profile->tables.collectives);
  }
  return opt;
}

}  // namespace ctwin
