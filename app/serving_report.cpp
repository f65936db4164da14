#include "serving_report.hpp"

#include <algorithm>
#include <cstdio>

#include "report_format.hpp"

#include "workloads/model.hpp"
#include "workloads/serving_lora.hpp"

namespace ctwin {

namespace {

using J = nlohmann::ordered_json;

J latency_json(const LatencySummary& l) {
  return J{{"p50", l.p50}, {"p90", l.p90}, {"p99", l.p99}, {"mean", l.mean}, {"count", l.count}};
}

std::string gib(double b) { return format_gib(b); }
// Latencies read best in milliseconds, whatever their size.
std::string ms(double s) { return format_ms(s, 1); }

// "BF16" for unquantized weights and an "auto" KV cache, as vLLM runs them; else the scheme.
std::string weights_text(Quantization q) { return q == Quantization::none ? "BF16" : quantization_names.name(q); }
std::string kv_text(KvCacheDtype k) { return k == KvCacheDtype::automatic ? "BF16" : kv_cache_dtype_names.name(k); }

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * f);
  return buf;
}

J pool_json(const ServingDeployment& d, int replicas, const ServingResult& r) {
  return J{{"replicas", replicas},
           {"tensor_parallel_size", d.tp},
           {"pipeline_parallel_size", d.pp},
           {"gpus", replicas * d.gpus()},
           {"makespan_s", r.makespan_s},
           {"iterations", r.iterations},
           {"kv_peak_utilization", r.kv_peak_utilization},
           {"preemptions", r.preemptions_recompute + r.preemptions_swap},
           {"rejected", r.rejected_requests},
           {"prefill_tokens_computed", r.prefill_tokens_computed}};
}

// /disaggregation: the pools, the TTFT's parts, the KV transfers and goodput over both pools' GPUs.
J disaggregation_json(const DisaggregationSpec& s, const DisaggregatedRun& d) {
  const int gpus = d.prefill_gpus + d.decode_gpus;
  J j{{"prefill", pool_json(s.prefill, s.prefill_replicas, d.prefill_pool)},
      {"decode", pool_json(s.decode, s.decode_replicas, d.decode_pool)},
      {"gpus", gpus},
      {"ttft_convention", "first token emitted by the prefill pool; TPOT and e2e include the KV transfer"},
      {"ttft_breakdown_s",
       J{{"prefill_queueing", latency_json(d.prefill_queueing_s)}, {"prefill", latency_json(d.prefill_s)}}},
      {"kv_transfer", J{{"link_gbyte_per_s", s.link_bytes_per_s / 1e9},
                        {"decode_link_gbyte_per_s", s.decode_link_bytes_per_s / 1e9},
                        {"link_latency_us", s.link_latency_s * 1e6},
                        {"peak_concurrent_transfers", d.kv_peak_concurrent_transfers},
                        {"transfers", d.kv_transfers},
                        {"bytes_per_token", d.kv_bytes_per_token},
                        {"bytes", d.kv_transfer_bytes},
                        {"link_busy_s", d.kv_transfer_busy_s},
                        {"time_s", latency_json(d.transfer_s)}}},
      {"decode_queueing_s", latency_json(d.decode_queueing_s)},
      {"goodput_requests_per_s_per_gpu", d.merged.goodput_requests_per_s / gpus}};
  // Layerwise streaming: time_s is the exposed part (first token -> KV landed), overlapped_time_s
  // the part hidden behind the prefill (the stream's start -> first token).
  if (s.kv_transfer == KvTransferMode::layerwise) {
    J& k = j["kv_transfer"];
    k["mode"] = kv_transfer_mode_names.name(s.kv_transfer);
    k["overlapped_time_s"] = latency_json(d.transfer_overlapped_s);
  }
  return j;
}

// A routed fleet pool's price of a GPU-hour: its own gpu_hour_usd, else /serving/cost's for a
// pool on the cluster's GPU, else its GPU's catalog price.
double pool_gpu_hour_usd(const ServingJob& job, const FleetPool& p) {
  if (p.gpu_hour_usd >= 0) return p.gpu_hour_usd;
  const GpuSpec& g = p.deployment.cluster.spec.gpu;
  return g.name == job.deployment.cluster.spec.gpu.name ? job.cost.gpu_hour_usd : g.gpu_hour_usd;
}

// A routed fleet's pool as priced: the replica-seconds it held (starting, serving, draining and
// down: FleetPoolResult::replica_s) on its own GPU's power model and price.
ServingPool fleet_pool(const ServingJob& job, const FleetPool& p, const FleetPoolResult& r) {
  ServingPool sp;
  sp.replicas = r.replicas_made;
  sp.gpus_per_replica = p.deployment.gpus();
  sp.gpu_time = r.merged.gpu_time;
  sp.power = power_model(p.deployment.cluster.spec.gpu);
  sp.gpu_hour_usd = pool_gpu_hour_usd(job, p);
  sp.replica_s = r.replica_s.billed_s();
  return sp;
}

// The run priced (workloads/serving_energy.hpp): one pool of the fleet's replicas, or the
// disaggregated run's two, all paid for over the run's makespan; a routed fleet's pools each for
// the replica-seconds they held.
ServingEconomics economics(const ServingJob& job, const ServingFleetRun& fleet) {
  const ServingResult& r = fleet.run.result;
  const GpuSpec& gpu = job.deployment.cluster.spec.gpu;
  const auto pool = [&](int replicas, const ServingDeployment& d, const GpuTimeSplit& t) {
    return ServingPool{replicas, d.gpus(), t, power_model(gpu), job.cost.gpu_hour_usd};
  };
  std::vector<ServingPool> pools;
  if (fleet.disaggregated) {
    const DisaggregationSpec& x = *job.disaggregation;
    pools.push_back(pool(x.prefill_replicas, x.prefill, fleet.disaggregated->prefill_pool.gpu_time));
    pools.push_back(pool(x.decode_replicas, x.decode, fleet.disaggregated->decode_pool.gpu_time));
  } else if (fleet.fleet) {
    const FleetRun& f = *fleet.fleet;
    for (std::size_t p = 0; p < f.pools.size(); ++p) pools.push_back(fleet_pool(job, job.fleet->pools[p], f.pools[p]));
    return serving_economics(pools, f.end_s, r.input_tokens, r.output_tokens, job.cost.electricity_usd_per_kwh);
  } else {
    pools.push_back(pool(fleet.replicas, job.deployment, r.gpu_time));
  }
  return serving_economics(pools, r.makespan_s, r.input_tokens, r.output_tokens, job.cost.electricity_usd_per_kwh);
}

// One routed fleet pool priced alone, on its own tokens.
ServingEconomics pool_economics(const ServingJob& job, const FleetRun& f, std::size_t p) {
  const ServingPool sp = fleet_pool(job, job.fleet->pools[p], f.pools[p]);
  const ServingResult& r = f.pools[p].merged;
  return serving_economics(std::span(&sp, 1), f.end_s, r.input_tokens, r.output_tokens,
                           job.cost.electricity_usd_per_kwh);
}

// /cost/by_pool: each routed pool's replica-seconds, GPU-hours, price, energy and cost per token.
J fleet_cost_json(const ServingJob& job, const FleetRun& f) {
  J a = J::array();
  for (std::size_t p = 0; p < f.pools.size(); ++p) {
    const ServingEconomics e = pool_economics(job, f, p);
    const FleetPoolResult& x = f.pools[p];
    const ReplicaSeconds& rs = x.replica_s;
    const GpuSpec& gpu = job.fleet->pools[p].deployment.cluster.spec.gpu;
    a.push_back(J{{"name", x.name},
                  {"gpu", gpu.name},
                  {"gpu_hour_usd", pool_gpu_hour_usd(job, job.fleet->pools[p])},
                  {"gpus_per_replica", job.fleet->pools[p].deployment.gpus()},
                  {"replica_s", J{{"starting", rs.starting_s},
                                  {"serving", rs.serving_s},
                                  {"draining", rs.draining_s},
                                  {"down", rs.down_s},
                                  {"billed", rs.billed_s()}}},
                  {"gpu_hours", e.gpu_hours},
                  {"gpu_usd", e.gpu_usd},
                  {"total_usd", e.total_usd},
                  {"input_tokens", x.merged.input_tokens},
                  {"output_tokens", x.merged.output_tokens},
                  {"usd_per_million_input_tokens", e.usd_per_million_input_tokens},
                  {"usd_per_million_output_tokens", e.usd_per_million_output_tokens},
                  {"usd_per_million_tokens", e.usd_per_million_tokens},
                  {"energy_j", e.energy_j},
                  {"average_power_w_per_gpu", e.average_power_w},
                  {"joules_per_token", e.joules_per_token},
                  {"joules_per_output_token", e.joules_per_output_token},
                  {"tdp_w", gpu.tdp_w},
                  {"idle_w", gpu.idle_w},
                  {"crashes", x.crashes}});
  }
  return a;
}

J pool_economics_json(const PoolEconomics& p) {
  return J{{"gpus", p.gpus},
           {"gpu_hours", p.gpu_hours},
           {"gpu_usd", p.gpu_usd},
           {"energy_j", p.energy.total_j()},
           {"idle_gpu_s", p.idle_gpu_s},
           {"average_power_w", p.average_power_w}};
}

// /cost and /energy; a disaggregated run adds each pool's figures under /cost/pools.
void economics_json(J& j, const ServingJob& job, const ServingFleetRun& fleet) {
  const ServingEconomics e = economics(job, fleet);
  const GpuSpec& gpu = job.deployment.cluster.spec.gpu;
  j["cost"] = J{{"gpu_hour_usd", job.cost.gpu_hour_usd},
                {"gpu_hours", e.gpu_hours},
                {"gpu_usd", e.gpu_usd},
                {"electricity_usd_per_kwh", job.cost.electricity_usd_per_kwh},
                {"electricity_usd", e.electricity_usd},
                {"total_usd", e.total_usd},
                {"prefill_share", e.prefill_share},
                {"input_usd", e.input_usd},
                {"output_usd", e.output_usd},
                {"usd_per_million_input_tokens", e.usd_per_million_input_tokens},
                {"usd_per_million_output_tokens", e.usd_per_million_output_tokens},
                {"usd_per_million_tokens", e.usd_per_million_tokens},
                {"split_convention", "input and output tokens share the cost by prefill vs decode GPU time"},
                {"price_source", gpu.price_source}};
  EnergyParts sum;  // both pools'
  for (const PoolEconomics& p : e.pools) {
    const EnergyParts& q = p.energy;
    sum.prefill_j += q.prefill_j, sum.decode_j += q.decode_j, sum.draft_j += q.draft_j, sum.comm_j += q.comm_j;
    sum.swap_j += q.swap_j, sum.overhead_j += q.overhead_j, sum.idle_j += q.idle_j;
  }
  const PowerModel pm = power_model(gpu);
  j["energy"] = J{{"tdp_w", gpu.tdp_w},
                  {"idle_w", gpu.idle_w},
                  {"utilization", J{{"prefill", pm.prefill_utilization},
                                    {"decode", pm.decode_utilization},
                                    {"transfer", pm.transfer_utilization},
                                    {"overhead", pm.overhead_utilization}}},
                  {"energy_j", e.energy_j},
                  {"energy_kwh", e.energy_kwh},
                  {"average_power_w_per_gpu", e.average_power_w},
                  {"joules_per_output_token", e.joules_per_output_token},
                  {"joules_per_token", e.joules_per_token},
                  {"by_part_j", J{{"prefill", sum.prefill_j},
                                  {"decode", sum.decode_j},
                                  {"draft", sum.draft_j},
                                  {"comm", sum.comm_j},
                                  {"swap", sum.swap_j},
                                  {"overhead", sum.overhead_j},
                                  {"idle", sum.idle_j}}},
                  {"power_source", gpu.power_source}};
  if (fleet.disaggregated) {
    j["cost"]["pools"] = J{{"prefill", pool_economics_json(e.pools[0])}, {"decode", pool_economics_json(e.pools[1])}};
  }
  if (fleet.fleet) {
    j["cost"]["billing_convention"] =
        "each pool pays for the replica-seconds it held (starting, serving, draining, and down while a crashed "
        "replica restarts in place) x its GPUs per replica, at its own GPU's price and power";
    j["cost"]["by_pool"] = fleet_cost_json(job, *fleet.fleet);
  }
}

std::string economics_text(const ServingJob& job, const ServingFleetRun& fleet) {
  const ServingEconomics e = economics(job, fleet);
  const GpuSpec& gpu = job.deployment.cluster.spec.gpu;
  char buf[512];
  std::string s;
  if (fleet.fleet) {
    std::snprintf(buf, sizeof buf,
                  "\n  cost          %.3f GPU-hours, each pool at its GPU's price = $%.4f%s; $%.4f per M input tokens, "
                  "$%.4f per M output tokens ($%.4f per M tokens); prefill %s of the working GPU time\n",
                  e.gpu_hours, e.total_usd, e.electricity_usd > 0 ? " with electricity" : "",
                  e.usd_per_million_input_tokens, e.usd_per_million_output_tokens, e.usd_per_million_tokens,
                  pct(e.prefill_share).c_str());
  } else if (job.cost.gpu_hour_usd > 0) {
    std::snprintf(buf, sizeof buf,
                  "\n  cost          %.3f GPU-hours at $%.3f = $%.4f%s; $%.4f per M input tokens, $%.4f per M output "
                  "tokens ($%.4f per M tokens); prefill %s of the working GPU time\n",
                  e.gpu_hours, job.cost.gpu_hour_usd, e.total_usd, e.electricity_usd > 0 ? " with electricity" : "",
                  e.usd_per_million_input_tokens, e.usd_per_million_output_tokens, e.usd_per_million_tokens,
                  pct(e.prefill_share).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "\n  cost          %.3f GPU-hours; no price for %s (/serving/cost/gpu_hour_usd)\n",
                  e.gpu_hours, gpu.name.c_str());
  }
  s += buf;
  if (gpu.tdp_w > 0) {
    std::snprintf(buf, sizeof buf,
                  "  energy        %.3f kWh, %.0f W per GPU on average (TDP %.0f W, idle %.0f W); %.3f J per output "
                  "token, %.3f J per token\n",
                  e.energy_kwh, e.average_power_w, gpu.tdp_w, gpu.idle_w, e.joules_per_output_token,
                  e.joules_per_token);
  } else {
    std::snprintf(buf, sizeof buf, "  energy        no power figures for %s (catalog tdp_w, idle_w)\n",
                  gpu.name.c_str());
  }
  s += buf;
  if (fleet.fleet) {
    const FleetRun& f = *fleet.fleet;
    for (std::size_t p = 0; p < f.pools.size(); ++p) {
      const ServingEconomics pe = pool_economics(job, f, p);
      const ReplicaSeconds& rs = f.pools[p].replica_s;
      std::snprintf(buf, sizeof buf,
                    "  pool %-8s %.3f GPU-hours (replica-s: %.0f starting, %.0f serving, %.0f draining, %.0f down) "
                    "at $%.3f = $%.4f; $%.4f per M input, $%.4f per M output tokens; %.3f kWh, %.3f J per token\n",
                    f.pools[p].name.c_str(), pe.gpu_hours, rs.starting_s, rs.serving_s, rs.draining_s, rs.down_s,
                    pool_gpu_hour_usd(job, job.fleet->pools[p]), pe.total_usd, pe.usd_per_million_input_tokens,
                    pe.usd_per_million_output_tokens, pe.energy_kwh, pe.joules_per_token);
      s += buf;
    }
  }
  if (fleet.disaggregated) {
    const PoolEconomics &p = e.pools[0], &d = e.pools[1];
    std::snprintf(buf, sizeof buf,
                  "  pools         prefill %.3f GPU-hours, $%.4f, %.0f W per GPU; decode %.3f GPU-hours, $%.4f, %.0f W "
                  "per GPU\n",
                  p.gpu_hours, p.gpu_usd, p.average_power_w, d.gpu_hours, d.gpu_usd, d.average_power_w);
    s += buf;
  }
  return s;
}

// The replica-seconds GPU-time shares are taken over: a routed fleet's replicas while they served
// or drained (an autoscaled fleet's count changes, and may start at zero; for a fixed fleet this
// is replicas x makespan), otherwise every replica over the makespan.
double replica_span_s(const ServingFleetRun& fleet) {
  const ServingResult& r = fleet.run.result;
  if (fleet.fleet) {
    double s = 0;
    for (const FleetPoolResult& p : fleet.fleet->pools) s += p.replica_s.serving_s + p.replica_s.draining_s;
    if (s > 0) return s;
  }
  return (r.makespan_s > 0 ? r.makespan_s : 1) * std::max(1, fleet.replicas);
}

// /lora: the adapters, the cache's hits and loads, and the LoRA share of GPU time (fleet sums;
// shares over replica_span_s).
J lora_json(const ServingJob& job, const ServingResult& r, double span) {
  const LoraStats& l = r.lora;
  const SchedulerConfig& c = job.scheduler;
  return J{{"adapters", job.traffic.lora.adapters},
           {"popularity", lora_popularity_names.name(job.traffic.lora.popularity)},
           {"rank", job.traffic.lora.rank},
           {"base_fraction", job.traffic.lora.base_fraction},
           {"max_loras", c.max_loras},
           {"max_cpu_loras", c.max_cpu_loras},
           {"max_lora_rank", c.max_lora_rank},
           {"adapter_bytes", lora_adapter_bytes(job.model, c.lora_adapter_rank, 2)},
           {"lookups", l.lookups},
           {"gpu_hits", l.gpu_hits},
           {"host_loads", l.host_loads},
           {"storage_loads", l.storage_loads},
           {"gpu_hit_rate", l.lookups ? static_cast<double>(l.gpu_hits) / static_cast<double>(l.lookups) : 0.0},
           {"gpu_evictions", l.gpu_evictions},
           {"host_evictions", l.host_evictions},
           {"load_bytes", l.load_bytes},
           {"load_time_s", l.load_s},
           {"kernel_time_s", r.gpu_time.lora_s},
           {"gpu_time_share", (r.gpu_time.lora_s + r.gpu_time.lora_load_s) / span},
           {"kernel_share", r.gpu_time.lora_s / span},
           {"load_share", r.gpu_time.lora_load_s / span}};
}

}  // namespace

std::vector<std::string> serving_warnings(const Scenario& sc, const ServingFleetRun& fleet) {
  std::vector<std::string> w = sc.warnings;
  const ServingReplicaRun& run = fleet.run;
  const ServingResult& r = run.result;
  // Admission control's rejections are reported under /fleet/admission, not as too long.
  const std::int64_t too_long =
      r.rejected_requests - (fleet.fleet && fleet.fleet->admission ? fleet.fleet->admission->rejected() : 0);
  if (too_long > 0) {
    w.push_back(std::to_string(too_long) +
                " requests rejected: a prompt plus its output beyond max_model_len, or more KV blocks than the "
                "cache holds (" +
                std::to_string(run.capacity.num_gpu_blocks) + " blocks)");
  }
  const std::int64_t preempted = r.preemptions_recompute + r.preemptions_swap;
  if (preempted > 0) {
    w.push_back(std::to_string(preempted) +
                " preemptions: the KV cache ran out of blocks; a lower max_num_seqs or a larger "
                "gpu_memory_utilization avoids them");
  }
  if (run.capacity.max_concurrency > 0 && run.capacity.max_concurrency < 1) {
    w.push_back("the KV cache holds less than one request of max_model_len tokens");
  }
  return w;
}

namespace {

// A routed fleet's pools and router (serving_fleet_sim.hpp), under /fleet.
void add_fleet_json(J& j, const FleetSpec& spec, const FleetRun& run) {
  j["routing"] = router_policy_names.name(spec.router.policy);
  J pools = J::array();
  for (std::size_t p = 0; p < run.pools.size(); ++p) {
    const FleetPoolResult& x = run.pools[p];
    const ServingDeployment& d = spec.pools[p].deployment;
    const ServingResult& r = x.merged;
    pools.push_back(J{{"name", x.name},
                      {"gpu", d.cluster.spec.gpu.name},
                      {"tensor_parallel_size", d.tp},
                      {"pipeline_parallel_size", d.pp},
                      {"replicas", spec.pools[p].replicas},
                      {"replicas_made", x.replicas_made},
                      {"routed", x.routed},
                      {"completed", r.completed_requests},
                      {"output_tokens_per_s", r.output_tokens_per_s},
                      {"ttft_s", latency_json(r.ttft_s)},
                      {"tpot_s", latency_json(r.tpot_s)},
                      {"kv_mean_utilization", r.kv_mean_utilization},
                      {"prefix_hit_rate", r.prefix_hit_rate},
                      {"offload_hit_tokens", r.kv_stats.offload_hit_tokens},
                      {"offload_capacity_pages", x.offload.capacity_pages}});
  }
  j["pools"] = pools;
  j["router"] = J{{"policy", router_policy_names.name(spec.router.policy)},
                  {"metrics_interval_s", spec.router.metrics_interval_s},
                  {"routed", run.router.routed},
                  {"router_prefix_hit_rate", run.router.hit_rate()},
                  {"replica_prefix_hit_rate", run.merged.prefix_hit_rate},
                  {"cache_routed", run.router.cache_routed},
                  {"retried", run.retried},
                  {"lost", run.lost},
                  {"unrouted", run.unrouted},
                  {"crashes", run.crashes},
                  {"random_crashes", run.random_crashes}};
  if (spec.random_failures.mtbf_hours > 0) {
    j["random_failures"] = J{{"mtbf_hours", spec.random_failures.mtbf_hours},
                             {"restart_s", spec.random_failures.restart_s},
                             {"crashes", run.random_crashes}};
  }
  {
    // Scale from zero: the requests the router held until a replica had cold-started.
    j["cold_start_waits"] = J{{"requests", run.held}, {"ttft_s", latency_json(run.held_ttft_s)}};
  }
  if (!run.timeline.empty()) {
    // One row per control tick: per pool what the autoscaler saw and asked for.
    J rows = J::array();
    for (const FleetTick& t : run.timeline) {
      std::vector<int> serving, starting;
      std::vector<std::int64_t> waiting, arrivals;
      J p99 = J::array();
      for (const FleetPoolMetrics& m : t.pools) {
        serving.push_back(m.serving);
        starting.push_back(m.starting);
        waiting.push_back(m.waiting);
        arrivals.push_back(m.arrivals);
        p99.push_back(m.ttft_p99_s ? J(*m.ttft_p99_s) : J());
      }
      rows.push_back(J{{"t_s", t.t_s},
                       {"serving", serving},
                       {"starting", starting},
                       {"desired", t.desired},
                       {"waiting", waiting},
                       {"arrivals", arrivals},
                       {"ttft_p99_s", p99}});
    }
    j["timeline"] = rows;
  }
  if (run.admission) {
    J by_reason = J::object(), by_class = J::object();
    for (std::size_t r = 1; r < kAdmissionResults; ++r) {
      const auto res = static_cast<AdmissionResult>(r);
      by_reason[admission_result_names.name(res)] = run.admission->count(res);
      const auto& v = run.admission->by_result[r];
      for (std::size_t c = 0; c < v.size(); ++c) {
        const std::string key = std::to_string(c);
        by_class[key] = (by_class.contains(key) ? by_class[key].get<std::int64_t>() : 0) + v[c];
      }
    }
    j["admission"] = J{{"accepted", run.admission->count(AdmissionResult::accepted)},
                       {"rejected", run.admission->rejected()},
                       {"rejected_by_reason", by_reason},
                       {"rejected_by_class", by_class}};
  }
}

// The control ticks as a short table: every Nth, at most about 20 rows.
std::string timeline_text(const FleetRun& run) {
  if (run.timeline.empty()) return "";
  std::string s = "\n  t (s)   serving  starting  desired   waiting  arrivals/s  TTFT p99 (interval)\n";
  char buf[256];
  const std::size_t n = run.timeline.size();
  const std::size_t every = (n + 19) / 20;
  for (std::size_t i = 0; i < n; i += every) {
    const FleetTick& t = run.timeline[i];
    int serving = 0, starting = 0, desired = 0;
    std::int64_t waiting = 0, arrivals = 0;
    std::optional<double> p99;
    for (std::size_t p = 0; p < t.pools.size(); ++p) {
      const FleetPoolMetrics& m = t.pools[p];
      serving += m.serving;
      starting += m.starting;
      desired += t.desired.empty() ? m.serving + m.starting + m.down : t.desired[p];
      waiting += m.waiting;
      arrivals += m.arrivals;
      if (m.ttft_p99_s) p99 = std::max(p99.value_or(0), *m.ttft_p99_s);  // the slowest pool's
    }
    const double interval_s = i > 0 ? t.t_s - run.timeline[i - 1].t_s : t.t_s;
    std::snprintf(buf, sizeof buf, "  %6.0f  %7d  %8d  %7d  %8lld  %10.1f  %s\n", t.t_s, serving, starting, desired,
                  static_cast<long long>(waiting), interval_s > 0 ? static_cast<double>(arrivals) / interval_s : 0.0,
                  p99 ? ms(*p99).c_str() : "-");
    s += buf;
  }
  return s;
}

std::string fleet_text(const FleetSpec& spec, const FleetRun& run) {
  std::string s =
      "\n  pool             GPU             TP  PP  replicas  completed    TTFT p50    TTFT p99    TPOT p50  "
      "prefix hits\n";
  char buf[512];
  for (std::size_t p = 0; p < run.pools.size(); ++p) {
    const FleetPoolResult& x = run.pools[p];
    const ServingDeployment& d = spec.pools[p].deployment;
    const ServingResult& r = x.merged;
    std::snprintf(buf, sizeof buf, "  %-16s %-15s %2d  %2d  %8d  %9lld  %10s  %10s  %10s  %11s\n", x.name.c_str(),
                  d.cluster.spec.gpu.name.c_str(), d.tp, d.pp, x.replicas_made,
                  static_cast<long long>(r.completed_requests), ms(r.ttft_s.p50).c_str(), ms(r.ttft_s.p99).c_str(),
                  ms(r.tpot_s.p50).c_str(), pct(r.prefix_hit_rate).c_str());
    s += buf;
  }
  std::int64_t lo = -1, hi = 0;
  for (const std::int64_t n : run.router.routed) {
    lo = lo < 0 ? n : std::min(lo, n);
    hi = std::max(hi, n);
  }
  std::snprintf(buf, sizeof buf, "\n  router        %s: %lld to %lld requests per replica",
                router_policy_names.name(spec.router.policy), static_cast<long long>(std::max<std::int64_t>(lo, 0)),
                static_cast<long long>(hi));
  s += buf;
  if (spec.router.policy == RouterPolicy::prefix_aware) {
    std::snprintf(buf, sizeof buf, "; its prefix tree matched %s of prompt tokens (replicas' caches hit %s)",
                  pct(run.router.hit_rate()).c_str(), pct(run.merged.prefix_hit_rate).c_str());
    s += buf;
  }
  s += "\n";
  if (run.admission) {
    std::snprintf(buf, sizeof buf, "  admission     %lld accepted, %lld rejected",
                  static_cast<long long>(run.admission->count(AdmissionResult::accepted)),
                  static_cast<long long>(run.admission->rejected()));
    s += buf;
    for (std::size_t r = 1; r < kAdmissionResults; ++r) {
      const auto res = static_cast<AdmissionResult>(r);
      if (run.admission->count(res) == 0) continue;
      std::snprintf(buf, sizeof buf, "; %lld %s", static_cast<long long>(run.admission->count(res)),
                    admission_result_names.name(res));
      s += buf;
    }
    s += "\n";
  }
  if (run.crashes > 0 || run.unrouted > 0) {
    std::snprintf(buf, sizeof buf,
                  "  failures      %lld crashes (%lld random): %lld requests retried, %lld lost, %lld unrouted\n",
                  static_cast<long long>(run.crashes), static_cast<long long>(run.random_crashes),
                  static_cast<long long>(run.retried), static_cast<long long>(run.lost),
                  static_cast<long long>(run.unrouted));
    s += buf;
  }
  if (run.held > 0) {
    std::snprintf(buf, sizeof buf,
                  "  cold starts   %lld requests held at the router until a replica started: TTFT p50 %s, p99 %s\n",
                  static_cast<long long>(run.held), ms(run.held_ttft_s.p50).c_str(), ms(run.held_ttft_s.p99).c_str());
    s += buf;
  }
  s += timeline_text(run);
  return s;
}

// KV offloading ran: a host tier was configured (its pages) or pages came from one.
bool offload_on(const ServingReplicaRun& run) {
  return run.offload.capacity_pages > 0 || run.result.kv_stats.offload_hit_tokens > 0;
}

// Tokens as a share of the prompt tokens the prefix cache looked up.
double prompt_share(const ServingResult& r, std::int64_t tokens) {
  return static_cast<double>(tokens) / static_cast<double>(std::max<std::int64_t>(1, r.kv_stats.prefix_query_tokens));
}

std::string offload_text(const ServingJob& job, const ServingReplicaRun& run) {
  const ServingResult& r = run.result;
  const KvHostTierStats& t = run.offload;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  KV offload    host tier of %.0f GiB per replica%s, %lld pages; %s of prompt tokens loaded from it "
                "(%s from other replicas' pages), %.3f s of transfers; %lld pages written, %lld evicted\n",
                job.scheduler.kv_offloading_size_gib,
                job.scheduler.kv_offloading_scope == KvOffloadScope::pool ? ", pooled over the pool" : "",
                static_cast<long long>(t.capacity_pages), pct(prompt_share(r, r.kv_stats.offload_hit_tokens)).c_str(),
                pct(prompt_share(r, r.kv_stats.offload_remote_hit_tokens)).c_str(), r.kv_load_link_s,
                static_cast<long long>(t.stored_pages), static_cast<long long>(t.evicted_pages));
  return buf;
}

}  // namespace

J serving_report_json(const Scenario& sc, const ServingFleetRun& fleet) {
  const ServingJob& job = serving_job(sc);
  const ServingReplicaRun& run = fleet.run;
  const int gpus = fleet.disaggregated || fleet.fleet ? job.gpus() : fleet.replicas * job.deployment.gpus();
  const ServingResult& r = run.result;
  const KvCapacity& c = run.capacity;
  J j;
  j["kind"] = "serving";
  j["scenario"] = sc.name;
  j["ttft_s"] = latency_json(r.ttft_s);
  j["tpot_s"] = latency_json(r.tpot_s);
  j["e2e_s"] = latency_json(r.e2e_s);
  j["queueing_s"] = latency_json(r.queueing_s);
  j["throughput"] = J{{"requests_per_s", r.requests_per_s},
                      {"input_tokens_per_s", r.input_tokens_per_s},
                      {"output_tokens_per_s", r.output_tokens_per_s},
                      {"output_tokens_per_s_per_gpu", r.output_tokens_per_s / gpus}};
  j["goodput_requests_per_s"] = r.goodput_requests_per_s;
  j["slo_attainment"] = r.slo_attainment;
  j["kv_cache"] = J{{"peak_utilization", r.kv_peak_utilization},
                    {"mean_utilization", r.kv_mean_utilization},
                    {"blocks", c.num_gpu_blocks},
                    {"block_size", job.scheduler.block_size},
                    {"tokens", c.tokens},
                    {"host_blocks", c.num_cpu_blocks},
                    {"max_concurrency", c.max_concurrency},
                    {"prefix_hit_rate", r.prefix_hit_rate},
                    {"prefix_hit_tokens", r.kv_stats.prefix_hit_tokens},
                    {"evicted_blocks", r.kv_stats.evicted_blocks}};
  j["memory_per_gpu"] = J{{"weights_bytes", c.weight_bytes},
                          {"activation_bytes", c.activation_bytes},
                          {"non_torch_bytes", c.non_torch_bytes},
                          {"kv_cache_bytes", static_cast<double>(c.num_gpu_blocks) * c.block_bytes},
                          {"capacity_bytes", job.deployment.cluster.spec.gpu.hbm_bytes}};
  if (offload_on(run)) {
    const KvHostTierStats& t = run.offload;
    j["kv_cache"]["offload"] = J{{"scope", kv_offload_scope_names.name(job.scheduler.kv_offloading_scope)},
                                 {"size_gib_per_replica", job.scheduler.kv_offloading_size_gib},
                                 {"capacity_pages", t.capacity_pages},
                                 {"hit_tokens", r.kv_stats.offload_hit_tokens},
                                 {"hit_rate", prompt_share(r, r.kv_stats.offload_hit_tokens)},
                                 {"remote_hit_tokens", r.kv_stats.offload_remote_hit_tokens},
                                 {"load_s", r.kv_load_link_s},
                                 {"stall_s", r.gpu_time.kv_load_s},
                                 {"stored_pages", t.stored_pages},
                                 {"evicted_pages", t.evicted_pages},
                                 {"peak_pages", t.peak_pages}};
  }
  j["preemptions"] = r.preemptions_recompute + r.preemptions_swap;
  j["preemptions_by_mode"] = J{{"recompute", r.preemptions_recompute}, {"swap", r.preemptions_swap}};
  j["swapped_blocks"] = r.swapped_blocks;
  j["requests"] = J{{"arrived", r.arrived_requests},    {"completed", r.completed_requests},
                    {"rejected", r.rejected_requests},  {"input_tokens", r.input_tokens},
                    {"output_tokens", r.output_tokens}, {"prefill_tokens_computed", r.prefill_tokens_computed}};
  const GpuTimeSplit& g = r.gpu_time;
  j["gpu_time_s"] = J{{"prefill", g.prefill_s}, {"decode", g.decode_s}, {"comm", g.comm_s}, {"overhead", g.overhead_s},
                      {"draft", g.draft_s},     {"swap", g.swap_s},     {"idle", g.idle_s}};
  if (offload_on(run)) j["gpu_time_s"]["kv_load"] = g.kv_load_s;
  if (job.scheduler.enable_lora) {
    j["gpu_time_s"]["lora"] = g.lora_s;
    j["gpu_time_s"]["lora_load"] = g.lora_load_s;
  }
  j["makespan_s"] = r.makespan_s;
  j["iterations"] = r.iterations;
  const ServingDeployment& d = job.deployment;
  j["replica"] = J{{"model", job.model.name},
                   {"gpu", d.cluster.spec.gpu.name},
                   {"gpus", d.gpus()},
                   {"tensor_parallel_size", d.tp},
                   {"pipeline_parallel_size", d.pp},
                   {"expert_parallel", d.ep()},
                   {"quantization", quantization_names.name(d.quantization)},
                   {"kv_cache_dtype", kv_cache_dtype_names.name(d.kv_dtype)},
                   {"cuda_graphs", d.cuda_graphs}};
  j["fleet"] = J{{"replicas", fleet.replicas},
                 {"gpus", gpus},
                 {"routing", "round_robin"},
                 {"goodput_requests_per_s_per_gpu", r.goodput_requests_per_s / gpus}};
  if (fleet.disaggregated) j["disaggregation"] = disaggregation_json(*job.disaggregation, *fleet.disaggregated);
  if (fleet.fleet) add_fleet_json(j["fleet"], *job.fleet, *fleet.fleet);
  economics_json(j, job, fleet);
  if (job.scheduler.enable_lora) j["lora"] = lora_json(job, r, replica_span_s(fleet));
  j["warnings"] = serving_warnings(sc, fleet);
  return j;
}

std::string serving_report_text(const Scenario& sc, const ServingFleetRun& fleet) {
  const ServingJob& job = serving_job(sc);
  const ServingReplicaRun& run = fleet.run;
  const ServingResult& r = run.result;
  const KvCapacity& c = run.capacity;
  const ServingDeployment& d = job.deployment;
  const int gpus = fleet.disaggregated || fleet.fleet ? job.gpus() : fleet.replicas * d.gpus();
  std::string s;
  char buf[512];
  if (fleet.disaggregated) {
    const DisaggregationSpec& x = *job.disaggregation;
    std::snprintf(buf, sizeof buf,
                  "%s\n  %s disaggregated on %d x %s: prefill %d replicas of TP %d, decode %d replicas of TP %d "
                  "(PP %d), KV over %.0f GB/s + %.1f us per prefill replica (%.0f GB/s into each decode replica, "
                  "shared max-min), weights %s, KV cache %s\n\n",
                  sc.name.c_str(), job.model.name.c_str(), gpus, d.cluster.spec.gpu.name.c_str(), x.prefill_replicas,
                  x.prefill.tp, x.decode_replicas, x.decode.tp, d.pp, x.link_bytes_per_s / 1e9, x.link_latency_s * 1e6,
                  x.decode_link_bytes_per_s / 1e9, weights_text(d.quantization).c_str(), kv_text(d.kv_dtype).c_str());
  } else if (fleet.fleet && job.autoscaling) {
    // The count changes: say where it starts and its bounds; job.gpus() is the most it may hold.
    const AutoscalerSpec& a = job.autoscaling->hpa;
    std::snprintf(buf, sizeof buf,
                  "%s\n  %s on a fleet of %d replicas at the start, autoscaled between %d and %d a pool (%d GPUs at "
                  "most) behind a %s router, weights %s, KV cache %s\n\n",
                  sc.name.c_str(), job.model.name.c_str(), fleet.replicas, a.min_replicas, a.max_replicas, gpus,
                  router_policy_names.name(job.fleet->router.policy), weights_text(d.quantization).c_str(),
                  kv_text(d.kv_dtype).c_str());
  } else if (fleet.fleet) {
    std::snprintf(buf, sizeof buf,
                  "%s\n  %s on a fleet of %d replicas = %d GPUs behind a %s router, weights %s, KV cache %s\n\n",
                  sc.name.c_str(), job.model.name.c_str(), fleet.replicas, gpus,
                  router_policy_names.name(job.fleet->router.policy), weights_text(d.quantization).c_str(),
                  kv_text(d.kv_dtype).c_str());
  } else if (fleet.replicas == 1) {
    std::snprintf(buf, sizeof buf, "%s\n  %s on %d x %s (TP %d, PP %d), weights %s, KV cache %s\n\n", sc.name.c_str(),
                  job.model.name.c_str(), d.gpus(), d.cluster.spec.gpu.name.c_str(), d.tp, d.pp,
                  weights_text(d.quantization).c_str(), kv_text(d.kv_dtype).c_str());
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s\n  %s on %d replicas of %d x %s (TP %d, PP %d) = %d GPUs, requests split round-robin, "
                  "weights %s, KV cache %s\n\n",
                  sc.name.c_str(), job.model.name.c_str(), fleet.replicas, d.gpus(), d.cluster.spec.gpu.name.c_str(),
                  d.tp, d.pp, gpus, weights_text(d.quantization).c_str(), kv_text(d.kv_dtype).c_str());
  }
  s += buf;
  std::snprintf(buf, sizeof buf, "  requests      %lld completed, %lld rejected, over %.1f s (%lld iterations)\n",
                static_cast<long long>(r.completed_requests), static_cast<long long>(r.rejected_requests), r.makespan_s,
                static_cast<long long>(r.iterations));
  s += buf;
  std::snprintf(buf, sizeof buf, "  throughput    %.2f req/s, %.0f input tok/s, %.0f output tok/s (%.0f per GPU)\n",
                r.requests_per_s, r.input_tokens_per_s, r.output_tokens_per_s, r.output_tokens_per_s / gpus);
  s += buf;
  std::snprintf(buf, sizeof buf,
                "  goodput       %.2f req/s meeting every SLO (%s of requests), %.4f req/s per GPU\n\n",
                r.goodput_requests_per_s, pct(r.slo_attainment).c_str(), r.goodput_requests_per_s / gpus);
  s += buf;
  s += "  latency            p50        p90        p99       mean\n";
  const auto row = [&](const char* name, const LatencySummary& l) {
    std::snprintf(buf, sizeof buf, "  %-12s %10s %10s %10s %10s\n", name, ms(l.p50).c_str(), ms(l.p90).c_str(),
                  ms(l.p99).c_str(), ms(l.mean).c_str());
    s += buf;
  };
  row("TTFT", r.ttft_s);
  row("TPOT", r.tpot_s);
  row("end to end", r.e2e_s);
  row("queueing", r.queueing_s);
  if (fleet.disaggregated) {
    const DisaggregatedRun& x = *fleet.disaggregated;
    row("TTFT: queue", x.prefill_queueing_s);
    row("TTFT: prefill", x.prefill_s);
    const bool layerwise = job.disaggregation->kv_transfer == KvTransferMode::layerwise;
    row(layerwise ? "KV exposed" : "KV transfer", x.transfer_s);
    if (layerwise) row("KV overlapped", x.transfer_overlapped_s);
    row("decode queue", x.decode_queueing_s);
    std::snprintf(buf, sizeof buf,
                  "\n  disaggregated prefill %d GPUs + decode %d GPUs; %lld KV transfers, %s (%.0f KiB per token), "
                  "links busy %.1f s in all\n",
                  x.prefill_gpus, x.decode_gpus, static_cast<long long>(x.kv_transfers),
                  gib(x.kv_transfer_bytes).c_str(), x.kv_bytes_per_token / 1024, x.kv_transfer_busy_s);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "\n  KV cache      %lld blocks of %d tokens%s%s (%s per GPU, %.1fx max_model_len); peak %s, mean %s\n",
                static_cast<long long>(c.num_gpu_blocks), job.scheduler.block_size,
                fleet.replicas > 1 ? " per replica" : "",
                d.model.attention_window > 0 ? " of the full-attention layers, shared with the windowed ones" : "",
                gib(static_cast<double>(c.num_gpu_blocks) * c.block_bytes).c_str(), c.max_concurrency,
                pct(r.kv_peak_utilization).c_str(), pct(r.kv_mean_utilization).c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "  memory/GPU    weights %s, activations %s, other %s of %s\n",
                gib(c.weight_bytes).c_str(), gib(c.activation_bytes).c_str(), gib(c.non_torch_bytes).c_str(),
                gib(d.cluster.spec.gpu.hbm_bytes).c_str());
  s += buf;
  std::snprintf(buf, sizeof buf,
                "  preemptions   %lld (recompute %lld, swap %lld); prefix cache hits %s of prompt tokens\n",
                static_cast<long long>(r.preemptions_recompute + r.preemptions_swap),
                static_cast<long long>(r.preemptions_recompute), static_cast<long long>(r.preemptions_swap),
                pct(r.prefix_hit_rate).c_str());
  s += buf;
  if (offload_on(run)) s += offload_text(job, run);
  const GpuTimeSplit& g = r.gpu_time;
  // Summed over the replicas: shares of the replicas' time (replica_span_s). A routed fleet's
  // replicas also wait outside their own clocks (before a new replica's first request, after its
  // last), so its idle share is what the busy parts leave of the span.
  const double span = replica_span_s(fleet);
  const double idle_s = fleet.fleet ? std::max(0.0, span - g.accounted_s()) : g.idle_s;
  std::snprintf(buf, sizeof buf,
                "\n  GPU time      prefill %s, decode %s, communication %s, scheduling overhead %s, draft %s, swap %s, "
                "idle %s\n",
                pct(g.prefill_s / span).c_str(), pct(g.decode_s / span).c_str(), pct(g.comm_s / span).c_str(),
                pct(g.overhead_s / span).c_str(), pct(g.draft_s / span).c_str(), pct(g.swap_s / span).c_str(),
                pct(idle_s / span).c_str());
  s += buf;
  if (offload_on(run)) {
    std::snprintf(buf, sizeof buf, "                waiting for KV from the host tier with nothing else to run %s\n",
                  pct(g.kv_load_s / span).c_str());
    s += buf;
  }
  if (fleet.fleet) s += fleet_text(*job.fleet, *fleet.fleet);
  s += economics_text(job, fleet);
  if (job.scheduler.enable_lora) {
    const LoraStats& l = r.lora;
    const LoraTrafficSpec& t = job.traffic.lora;
    std::snprintf(buf, sizeof buf,
                  "                LoRA kernels %s, LoRA loads %s (parts beside those above)\n"
                  "\n  LoRA          %d adapters (%s), rank %d (%.1f MB each), max_loras %d, max_cpu_loras %d\n"
                  "                %lld lookups: %lld GPU hits (%s), %lld host loads, %lld storage loads; "
                  "%lld GPU evictions; loads %.2f s\n",
                  pct(g.lora_s / span).c_str(), pct(g.lora_load_s / span).c_str(), t.adapters,
                  lora_popularity_names.name(t.popularity), t.rank, lora_adapter_bytes(job.model, t.rank, 2) / 1e6,
                  job.scheduler.max_loras, job.scheduler.max_cpu_loras, static_cast<long long>(l.lookups),
                  static_cast<long long>(l.gpu_hits),
                  pct(l.lookups ? static_cast<double>(l.gpu_hits) / static_cast<double>(l.lookups) : 0).c_str(),
                  static_cast<long long>(l.host_loads), static_cast<long long>(l.storage_loads),
                  static_cast<long long>(l.gpu_evictions), l.load_s);
    s += buf;
  }
  return s;
}

}  // namespace ctwin
