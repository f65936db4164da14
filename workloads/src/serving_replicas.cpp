#include "workloads/serving_replicas.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <stdexcept>
#include <thread>

namespace ctwin {

RoundRobinShare::RoundRobinShare(std::unique_ptr<TrafficSource> stream, int replica, int replicas)
    : stream_(std::move(stream)), replicas_(replicas) {
  if (replicas < 1 || replica < 0 || replica >= replicas)
    throw std::invalid_argument("RoundRobinShare: replica must be in [0, replicas)");
  stream_->skip(replica);
}

std::int64_t RoundRobinShare::skip(std::int64_t n) {
  std::int64_t k = 0;
  for (; k < n && next_arrival(); ++k) stream_->skip(replicas_);  // its own, then the others'
  return k;
}

Request RoundRobinShare::pop() {
  const Request r = stream_->pop();
  stream_->skip(replicas_ - 1);  // the next replicas_ - 1 requests belong to the other replicas
  return r;
}

std::vector<std::unique_ptr<TrafficSource>> make_round_robin_shares(const TrafficSpec& spec, int replicas) {
  if (replicas < 1) throw std::invalid_argument("make_round_robin_shares: replicas must be >= 1");
  if (spec.arrival.process == ArrivalProcess::closed_loop)
    throw std::invalid_argument("make_round_robin_shares: a closed-loop source cannot be split round-robin");
  std::vector<std::unique_ptr<TrafficSource>> shares;
  for (int k = 0; k < replicas; ++k)
    shares.push_back(std::make_unique<RoundRobinShare>(make_traffic(spec), k, replicas));
  return shares;
}

void ServingLatencyHistograms::record(const RequestRecord& r) {
  if (r.rejected) return;
  // As simulate_replica's finish(): TPOT over requests with at least two tokens.
  ttft_s.add((r.first_token - r.request.arrival).seconds());
  e2e_s.add((r.finish - r.request.arrival).seconds());
  queueing_s.add((r.first_scheduled - r.received).seconds());
  if (r.request.output_tokens > 1)
    tpot_s.add((r.finish - r.first_token).seconds() / static_cast<double>(r.request.output_tokens - 1));
  met_slo += r.met_slo ? 1 : 0;
}

void ServingLatencyHistograms::merge(const ServingLatencyHistograms& o) {
  ttft_s.merge(o.ttft_s);
  tpot_s.merge(o.tpot_s);
  e2e_s.merge(o.e2e_s);
  queueing_s.merge(o.queueing_s);
  met_slo += o.met_slo;
}

LatencySummary latency_summary(const QuantileHistogram& h) {
  return {h.quantile(0.5), h.quantile(0.9), h.quantile(0.99), h.mean(), h.count()};
}

ServingResult merge_serving_results(const std::vector<ServingResult>& replicas,
                                    const ServingLatencyHistograms& merged) {
  ServingResult m;
  double kv_time = 0;  // utilization x seconds, over all replicas
  for (const ServingResult& r : replicas) {
    m.arrived_requests += r.arrived_requests;
    m.completed_requests += r.completed_requests;
    m.rejected_requests += r.rejected_requests;
    m.iterations += r.iterations;
    m.input_tokens += r.input_tokens;
    m.output_tokens += r.output_tokens;
    m.prefill_tokens_computed += r.prefill_tokens_computed;
    m.makespan_s = std::max(m.makespan_s, r.makespan_s);
    m.kv_peak_utilization = std::max(m.kv_peak_utilization, r.kv_peak_utilization);
    kv_time += r.kv_mean_utilization * r.makespan_s;
    m.preemptions_recompute += r.preemptions_recompute;
    m.preemptions_swap += r.preemptions_swap;
    m.swapped_blocks += r.swapped_blocks;
    m.kv_load_link_s += r.kv_load_link_s;
    m.kv_stats.prefix_queries += r.kv_stats.prefix_queries;
    m.kv_stats.prefix_query_tokens += r.kv_stats.prefix_query_tokens;
    m.kv_stats.prefix_hit_tokens += r.kv_stats.prefix_hit_tokens;
    m.kv_stats.evicted_blocks += r.kv_stats.evicted_blocks;
    m.kv_stats.offload_hit_tokens += r.kv_stats.offload_hit_tokens;
    m.kv_stats.offload_remote_hit_tokens += r.kv_stats.offload_remote_hit_tokens;
    GpuTimeSplit& g = m.gpu_time;
    g.prefill_s += r.gpu_time.prefill_s;
    g.decode_s += r.gpu_time.decode_s;
    g.comm_s += r.gpu_time.comm_s;
    g.overhead_s += r.gpu_time.overhead_s;
    g.draft_s += r.gpu_time.draft_s;
    g.swap_s += r.gpu_time.swap_s;
    g.lora_s += r.gpu_time.lora_s;
    g.lora_load_s += r.gpu_time.lora_load_s;
    g.kv_load_s += r.gpu_time.kv_load_s;
    g.idle_s += r.gpu_time.idle_s;
    add_lora_stats(m.lora, r.lora);
  }
  m.ttft_s = latency_summary(merged.ttft_s);
  m.tpot_s = latency_summary(merged.tpot_s);
  m.e2e_s = latency_summary(merged.e2e_s);
  m.queueing_s = latency_summary(merged.queueing_s);
  if (m.makespan_s > 0) {
    m.requests_per_s = static_cast<double>(m.completed_requests) / m.makespan_s;
    m.input_tokens_per_s = static_cast<double>(m.input_tokens) / m.makespan_s;
    m.output_tokens_per_s = static_cast<double>(m.output_tokens) / m.makespan_s;
    m.goodput_requests_per_s = static_cast<double>(merged.met_slo) / m.makespan_s;
    if (!replicas.empty()) m.kv_mean_utilization = kv_time / (m.makespan_s * static_cast<double>(replicas.size()));
  }
  const auto judged = m.completed_requests + m.rejected_requests;
  m.slo_attainment = judged ? static_cast<double>(merged.met_slo) / static_cast<double>(judged) : 0;
  if (m.kv_stats.prefix_query_tokens > 0)
    m.prefix_hit_rate =
        static_cast<double>(m.kv_stats.prefix_hit_tokens) / static_cast<double>(m.kv_stats.prefix_query_tokens);
  return m;
}

ServingReplicasRun run_serving_replicas(const ServingDeployment& d, const SchedulerConfig& sched,
                                        const TrafficSpec& traffic, int replicas, ServingLoop loop, int threads) {
  if (threads < 0) throw std::invalid_argument("run_serving_replicas: threads must be >= 0");
  auto shares = make_round_robin_shares(traffic, replicas);
  const auto n = static_cast<std::size_t>(replicas);
  std::vector<ServingReplicaRun> runs(n);
  std::vector<ServingLatencyHistograms> hists(n);
  std::vector<std::exception_ptr> errors(n);
  // Replicas are independent: workers take them in index order, each replica builds its own KV
  // cache and cost model (whose memo tables are the only mutable state; the deployment is only
  // read), and the results land at their index, so the merge below is the same whatever the
  // thread count or timing.
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < n;) {
      try {
        ServingHooks hooks;
        hooks.on_request = [&h = hists[k]](const RequestRecord& r) { h.record(r); };
        runs[k] = run_serving_replica(d, sched, *shares[k], traffic.seed, hooks, loop);
      } catch (...) {
        errors[k] = std::current_exception();
      }
      shares[k].reset();  // its generator's state is no longer needed
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const auto workers = std::min<std::size_t>(n, threads > 0 ? static_cast<std::size_t>(threads) : hw);
  std::vector<std::thread> pool;
  for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);

  ServingReplicasRun run;
  run.capacity = runs.front().capacity;
  if (!run.capacity.refusal.empty()) return run;  // identical replicas: all refused alike
  ServingLatencyHistograms merged;
  for (std::size_t k = 0; k < n; ++k) {
    run.replicas.push_back(std::move(runs[k].result));
    add_host_tier_stats(run.offload, runs[k].offload);
    merged.merge(hists[k]);
  }
  run.merged = merge_serving_results(run.replicas, merged);
  return run;
}

}  // namespace ctwin
