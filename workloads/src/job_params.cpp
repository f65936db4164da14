// /job's reader: every key through its job_params.hpp table.
#include "workloads/job_params.hpp"

#include <string>

namespace ctwin {

std::vector<ParamTable> job_param_tables() {
  return {
      {"/job", "a whole training job: tokens to train, failures, checkpoints, restarts (issue 19)", job_params},
      {"/job/failure_rates/CAUSE",
       "one failure cause (gpu, hbm, nvlink, nic, host, switch, link_flap, storage, "
       "software, user, planned)",
       job_failure_rate_params},
      {"/job/failures/N", "one scheduled failure", job_scheduled_failure_params},
      {"/job/detection", "fault to the job knowing", job_detection_params},
      {"/job/restart", "the restart path: reschedule, start, NCCL init (the load is the storage model's)",
       job_restart_params},
      {"/job/checkpoint", "checkpoint interval and mode", job_checkpoint_params},
      {"/job/storage", "the checkpoint store: aggregate and per-client bandwidth", job_storage_params},
      {"/job/elasticity", "lost nodes: wait, hot spare, or shrink data parallelism", job_elasticity_params},
      {"/job/stragglers", "slow GPUs and lemon-node eviction", job_straggler_params},
      {"/job/data_loader", "the input pipeline per node", job_data_loader_params},
      {"/job/monte_carlo", "replications, seed, checkpoint-interval search", job_monte_carlo_params},
  };
}

namespace {

void read_cause(const JsonObject& o, FailureCause cause, FailureCauseSpec& c) {
  const ParamReader r(o, job_failure_rate_params);
  const char* keys[] = {"rate_per_gpu_day", "rate_per_node_day", "rate_per_job_day"};
  const RateUnit units[] = {RateUnit::per_gpu_day, RateUnit::per_node_day, RateUnit::per_job_day};
  int given = -1;
  for (int i = 0; i < 3; ++i) {
    if (!r.has(keys[i])) continue;
    if (given >= 0) {
      o.fail(keys[i], std::string("found beside ") + keys[given], "one rate key per cause");
    }
    given = i;
    c.rate = r.number(keys[i], 0.0);
    c.unit = units[i];
  }
  c.distribution = r.choice("distribution", failure_distribution_names, c.distribution);
  c.weibull_shape = r.number("weibull_shape", c.weibull_shape);
  if (r.has("weibull_shape") && c.distribution != FailureDistribution::weibull) {
    o.fail("weibull_shape", "found with distribution \"exponential\"", "distribution \"weibull\" beside it");
  }
  c.scope = r.choice("scope", failure_scope_names, c.scope);
  c.detected_by = r.choice("detected_by", detected_by_names, c.detected_by);
  c.absorbed = r.boolean("absorbed", c.absorbed);
  if (c.absorbed && cause != FailureCause::link_flap) {
    o.fail("absorbed", "found true for a cause other than link_flap", "false (only NCCL retries absorb a link flap)");
  }
  c.retry_s = r.number("retry_s", c.retry_s);
}

}  // namespace

JobSpec read_job_spec(const JsonObject& o) {
  const ParamReader r(o, job_params);
  JobSpec s;
  if (r.has("train_tokens") && r.has("train_steps")) {
    o.fail("train_steps", "found beside train_tokens", "one of train_tokens and train_steps");
  }
  if (!r.has("train_tokens") && !r.has("train_steps")) {
    o.fail("train_tokens", "missing (and no train_steps)", "tokens to train (or train_steps)");
  }
  if (r.has("train_tokens")) s.train_tokens = r.number("train_tokens", 0.0);
  if (r.has("train_steps")) s.train_steps = r.integer("train_steps", 0);
  s.nodes_per_switch = static_cast<int>(r.integer("nodes_per_switch"));

  if (o.has("failure_rates")) {
    const JsonObject f = o.object("failure_rates");
    std::vector<std::string> names(failure_cause_names.names.begin(), failure_cause_names.names.end());
    f.only(names);
    for (const auto& e : failure_cause_names.entries) {
      const std::string key(e.name);
      if (f.has(key)) read_cause(f.object(key), e.value, s.causes[static_cast<std::size_t>(e.value)]);
    }
  }
  if (o.has("failures")) {
    const Json& v = o.raw("failures");
    constexpr std::size_t kMax = 1 << 20;
    if (!v.is_array() || v.size() > kMax) {
      o.fail("failures", "found " + shown(v), "an array of at most 1048576 {at_s, cause, nodes, first_node}");
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string k = "failures/" + std::to_string(i);
      if (!v[i].is_object()) o.fail(k, "found " + shown(v[i]), "an object {at_s, cause, nodes, first_node}");
      const JsonObject fo(v[i], o.child(k), o.file());
      const ParamReader fr(fo, job_scheduled_failure_params);
      ScheduledFailure f;
      f.at_s = fr.number("at_s");
      f.cause = fr.choice("cause", failure_cause_names);
      f.nodes = fr.has("nodes") ? static_cast<int>(fr.integer("nodes", 0)) : -1;
      f.first_node = static_cast<int>(fr.integer("first_node"));
      s.failures.push_back(f);
    }
  }
  if (o.has("detection")) {
    const ParamReader d(o.object("detection"), job_detection_params);
    s.detection.nccl_timeout_s = d.number("nccl_timeout_s");
    s.detection.heartbeat_interval_s = d.number("heartbeat_interval_s");
    s.detection.heartbeat_misses = static_cast<int>(d.integer("heartbeat_misses"));
    s.detection.watchdog_s = d.number("watchdog_s");
  }
  if (o.has("restart")) {
    const ParamReader d(o.object("restart"), job_restart_params);
    s.restart.reschedule_with_spare_s = d.number("reschedule_with_spare_s");
    s.restart.reschedule_without_spare_s = d.number("reschedule_without_spare_s");
    s.restart.repair_s = d.number("repair_s");
    s.restart.container_start_s = d.number("container_start_s");
    s.restart.nccl_init_base_s = d.number("nccl_init_base_s");
    s.restart.nccl_init_per_rank_s = d.number("nccl_init_per_rank_s");
  }
  if (o.has("checkpoint")) {
    const ParamReader d(o.object("checkpoint"), job_checkpoint_params);
    s.checkpoint.interval_steps = d.integer("interval_steps");
    s.checkpoint.interval_s = d.number("interval_s");
    s.checkpoint.mode = d.choice("mode", checkpoint_mode_names);
    s.checkpoint.storage_every = static_cast<int>(d.integer("storage_every"));
  }
  if (o.has("storage")) {
    const ParamReader d(o.object("storage"), job_storage_params);
    s.storage.write_bytes_per_s = d.number("write_gbyte_per_s") * 1e9;
    s.storage.read_bytes_per_s = d.number("read_gbyte_per_s") * 1e9;
    s.storage.per_client_bytes_per_s = d.number("per_client_gbyte_per_s") * 1e9;
  }
  if (o.has("elasticity")) {
    const ParamReader d(o.object("elasticity"), job_elasticity_params);
    s.elasticity.policy = d.choice("policy", elastic_policy_names);
    s.elasticity.spare_nodes = static_cast<int>(d.integer("spare_nodes"));
    s.elasticity.keep_global_batch = d.boolean("keep_global_batch");
    s.elasticity.min_dp = static_cast<int>(d.integer("min_dp"));
  }
  if (o.has("stragglers")) {
    const ParamReader d(o.object("stragglers"), job_straggler_params);
    s.stragglers.slow_node_fraction = d.number("slow_node_fraction");
    s.stragglers.slowdown = d.number("slowdown");
    s.stragglers.evict_after_slow_steps = d.integer("evict_after_slow_steps");
    s.stragglers.slow_onset_per_node_day = d.number("slow_onset_per_node_day");
    s.stragglers.diurnal_amplitude = d.number("diurnal_amplitude");
    s.stragglers.diurnal_peak_hour = d.number("diurnal_peak_hour");
  }
  if (o.has("data_loader")) {
    const ParamReader d(o.object("data_loader"), job_data_loader_params);
    s.data_loader.workers = static_cast<int>(d.integer("workers"));
    s.data_loader.decode_s_per_sample = d.number("decode_s_per_sample");
    s.data_loader.read_bytes_per_s = d.number("read_gbyte_per_s") * 1e9;
    s.data_loader.bytes_per_sample = d.number("bytes_per_sample");
    s.data_loader.prefetch_batches = static_cast<int>(d.integer("prefetch_batches"));
    if (s.data_loader.workers > 0 && s.data_loader.decode_s_per_sample <= 0 &&
        (s.data_loader.read_bytes_per_s <= 0 || s.data_loader.bytes_per_sample <= 0)) {
      o.fail("data_loader", "found workers without decode_s_per_sample or read_gbyte_per_s and bytes_per_sample",
             "a decode cost or a read limit, or workers 0");
    }
  }
  if (o.has("monte_carlo")) {
    const ParamReader d(o.object("monte_carlo"), job_monte_carlo_params);
    s.monte_carlo.replications = static_cast<int>(d.integer("replications"));
    s.monte_carlo.seed = static_cast<std::uint64_t>(d.integer("seed"));
    s.monte_carlo.search_points = static_cast<int>(d.integer("search_points"));
    s.monte_carlo.search_replications = static_cast<int>(d.integer("search_replications"));
  }
  return s;
}

}  // namespace ctwin
