// /serving/router, /serving/pools and /serving/failures: a coupled fleet behind a router
// (workloads/serving_fleet_sim.hpp), each pool a copy of /serving with its own GPU, TP, PP,
// replicas and scheduler limits.
#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/serving_fleet_params.hpp"
#include "workloads/serving_scheduler_params.hpp"

namespace ctwin {
namespace {

FleetPool read_pool(const JsonObject& po, const JsonObject& top, const ServingJob& job,
                    const ScenarioCatalogs& catalogs, const Scenario& sc) {
  const ParamReader r(po, serving_pool_params);
  FleetPool p;
  p.name = r.string("name");
  p.replicas = static_cast<int>(r.integer("replicas"));
  p.cold_start_s = r.number("cold_start_s");
  p.gpu_hour_usd = r.number("gpu_hour_usd", -1);
  // The pool's replica: /serving with the pool's keys written over it.
  Json serving = top.raw("serving");
  for (const char* k : {"router", "pools", "failures", "data_parallel_size"}) serving.erase(k);
  for (const char* k : {"tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs", "max_num_batched_tokens"})
    if (r.has(k)) serving[k] = r.integer(k);
  ClusterSpec cs = sc.cluster;
  const bool own_gpu = r.has("gpu") && r.string("gpu") != cs.gpu.name;
  if (own_gpu) {
    const std::string name = r.string("gpu");
    const auto it = catalogs.gpus.find(name);
    if (it == catalogs.gpus.end()) {
      std::vector<std::string> names;
      for (const auto& [n, e] : catalogs.gpus) names.push_back(n);
      const std::string guess = closest(name, names);
      po.fail("gpu", "unknown GPU \"" + name + "\"" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?"),
              "a GPU of the catalog (topology/catalog/gpus.json or /catalog/gpus)");
    }
    cs.gpu = gpu_from_json(JsonObject(it->second.value, it->second.path, it->second.file), name);
  }
  const Cluster cluster = build_cluster(cs);
  const std::string file = top.file();
  const JsonObject so(serving, po.path(), file);
  p.deployment = deployment_from_json(so, job.model, cluster, builtin_models());
  if (sc.profile && !own_gpu) p.deployment = with_profile(std::move(p.deployment), *sc.profile);
  p.scheduler = read_scheduler_config(so);
  if (p.scheduler.max_model_len == 0) p.scheduler.max_model_len = job.model.max_seq;
  // Multi-LoRA follows the traffic (its adapters), as /serving's replica does (scenario_job.cpp).
  p.scheduler.enable_lora = job.scheduler.enable_lora;
  p.scheduler.lora_adapter_rank = job.scheduler.lora_adapter_rank;
  return p;
}

}  // namespace

std::optional<FleetSpec> read_serving_fleet(const JsonObject& top, const ServingJob& job,
                                            const ScenarioCatalogs& catalogs, const Scenario& sc) {
  const JsonObject so = top.object("serving");
  // Autoscaling and admission run on the fleet simulation: one pool of /serving's replicas by default.
  const bool routed = so.has("router") || so.has("pools") || so.has("failures");
  if (!routed && (job.disaggregation || (!job.autoscaling && !job.admission))) return std::nullopt;
  const char* given = so.has("pools") ? "pools" : so.has("router") ? "router" : "failures";
  if (job.disaggregation) {
    so.fail(given, "found beside /serving/disaggregation", "either a routed fleet or disaggregated pools");
  }
  FleetSpec f;
  if (so.has("pools")) {
    if (so.has("data_parallel_size")) {
      so.fail("data_parallel_size", "found beside /serving/pools, whose pools set their own replicas",
              "no data_parallel_size (each pool's replicas), or no pools");
    }
    const Json& v = so.raw("pools");
    if (!v.is_array() || v.empty() || v.size() > 64) so.fail("pools", "found " + shown(v), "a list of 1 to 64 pools");
    long long cluster_gpus = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string key = "pools/" + std::to_string(i);
      if (!v[i].is_object()) so.fail(key, "found " + shown(v[i]), "a pool object");
      const JsonObject po(v[i], so.child(key), top.file());
      FleetPool p = read_pool(po, top, job, catalogs, sc);
      for (const FleetPool& q : f.pools)
        if (q.name == p.name) po.fail("name", "found \"" + p.name + "\" twice", "a name of its own");
      if (p.deployment.cluster.spec.gpu.name == sc.cluster.gpu.name)
        cluster_gpus += 1ll * p.replicas * p.deployment.gpus();
      f.pools.push_back(std::move(p));
    }
    const long long have = build_cluster(sc.cluster).gpu_count();
    if (cluster_gpus > have) {
      so.fail("pools",
              "found pools on the cluster's " + sc.cluster.gpu.name + " with " + std::to_string(cluster_gpus) +
                  " GPUs in all, but the cluster has " + std::to_string(have),
              "pools within the cluster's GPUs (fewer replicas, or more nodes)");
    }
  } else {
    FleetPool p;
    p.name = "replicas";
    p.deployment = job.deployment;
    p.scheduler = job.scheduler;
    p.replicas = job.data_parallel_size;
    p.cold_start_s = param_decl(serving_pool_params, "cold_start_s").def;
    f.pools.push_back(std::move(p));
  }
  if (so.has("router")) {
    const ParamReader r(so.object("router"), serving_router_params);
    f.router.policy = r.choice("policy", router_policy_names);
    f.router.metrics_interval_s = r.number("metrics_interval_s");
    f.router.cache_threshold = r.number("cache_threshold");
    f.router.balance_abs_threshold = r.integer("balance_abs_threshold");
    f.router.balance_rel_threshold = r.number("balance_rel_threshold");
    f.router.max_tree_tokens = r.integer("max_tree_tokens");
    f.router.seed = static_cast<std::uint64_t>(r.integer("seed", static_cast<long long>(sc.seed)));
  } else {
    f.router.seed = sc.seed;
  }
  if (so.has("failures")) {
    const JsonObject fo = so.object("failures");
    const ParamReader r(fo, serving_failures_params);
    f.retry = r.choice("retry", retry_policy_names);
    f.max_retries = static_cast<int>(r.integer("max_retries"));
    f.random_failures.mtbf_hours = r.number("mtbf_hours");
    f.random_failures.restart_s = r.number("restart_s", -1);
    f.random_failures.seed = sc.seed;
    if (r.has("events")) {
      const Json& v = fo.raw("events");
      if (!v.is_array() || v.size() > 100000) fo.fail("events", "found " + shown(v), "a list of event objects");
      std::vector<int> made;
      for (const FleetPool& p : f.pools) made.push_back(p.replicas);
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string key = "events/" + std::to_string(i);
        if (!v[i].is_object()) fo.fail(key, "found " + shown(v[i]), "an event object");
        const JsonObject eo(v[i], fo.child(key), top.file());
        const ParamReader er(eo, serving_failure_event_params);
        FleetEvent e;
        e.t_s = er.number("t_s");
        e.kind = er.choice("kind", fleet_event_kind_names);
        e.pool = 0;
        if (er.has("pool")) {
          const std::string name = er.string("pool");
          e.pool = -1;
          std::string names;
          for (std::size_t k = 0; k < f.pools.size(); ++k) {
            if (f.pools[k].name == name) e.pool = static_cast<int>(k);
            names += (k ? ", \"" : "\"") + f.pools[k].name + "\"";
          }
          if (e.pool < 0) eo.fail("pool", "found \"" + name + "\", no such pool", "one of " + names);
        }
        e.replica = static_cast<int>(er.integer("replica"));
        e.restart_s = er.number("restart_s");
        int& n = made[static_cast<std::size_t>(e.pool)];
        if (e.kind == FleetEventKind::add) {
          ++n;
        } else if (e.replica >= n) {
          eo.fail("replica", "found " + std::to_string(e.replica) + ", but the pool has " + std::to_string(n),
                  "an index from 0 to " + std::to_string(n - 1));
        }
        f.events.push_back(e);
      }
    }
  }
  return f;
}

}  // namespace ctwin
