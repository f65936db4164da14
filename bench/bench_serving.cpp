// Simulation speed of LLM serving: an hour of traffic at 100 requests/s with Azure-conversation-
// like lengths on one Llama-3-8B replica (one H100), the same on 16 replicas behind a round-robin
// split at 16 x 100 requests/s, and memory against the horizon. The baseline is the reference
// replica loop (every request advanced every iteration) on the same workload, in this process.
// Last in the report (run first, in a forked child process), "fleet": 128 Llama-3-70B TP8
// replicas (1,024 H100) behind a router at 500 requests/s for the hour, with its own baseline
// (bench_serving_fleet.cpp).
#include <sys/resource.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "bench.hpp"
#include "bench_clusters.hpp"
#include "bench_serving_common.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_replicas.hpp"

namespace ctwin {

// The resident set now, MiB (/proc/self/status VmRSS; 0 where there is none).
double rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0;
}

// Poisson arrivals; lengths lognormal with the medians of the Azure LLM inference trace 2023
// (conversation: prompt median 1020 tokens, output median 129; Patel et al., Splitwise, ISCA
// 2024). The sigmas (1.0 and 0.8) are assumed, not fitted: the trace is not in the repository.
TrafficSpec azure_conversation(double rate_per_s, double duration_s) {
  TrafficSpec t;
  t.seed = 1;
  t.arrival.process = ArrivalProcess::poisson;
  t.arrival.rate_per_s = rate_per_s;
  t.duration_s = duration_s;
  t.input.dist = LengthDist::lognormal;
  t.input.mu = std::log(1020.0);
  t.input.sigma = 1.0;
  t.input.max = 6000;
  t.output.dist = LengthDist::lognormal;
  t.output.mu = std::log(129.0);
  t.output.sigma = 0.8;
  t.output.max = 2000;
  return t;
}

namespace {

// The process's peak resident set so far, MiB (getrusage).
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

ServingDeployment llama8b_h100() {
  ClusterSpec s = bench_dgx_h100(1);
  apply_profile(builtin_profile(s.gpu.name), s);
  ServingDeployment d;
  d.model = builtin_models().models.at("llama3-8b");
  d.cluster = build_cluster(s);
  d.overhead = builtin_profile(s.gpu.name).serving;
  return d;
}

// As scenarios/serving-llama3-8b-h100.json: vLLM's defaults with chunked prefill.
SchedulerConfig vllm_scheduler(const ModelSpec& m) {
  SchedulerConfig c;
  c.max_num_seqs = 256;
  c.max_num_batched_tokens = 8192;
  c.enable_chunked_prefill = true;
  c.gpu_memory_utilization = 0.9;
  c.max_model_len = m.max_seq;
  return c;
}

struct Timed {
  double wall_s = 0;
  double cpu_s = 0;
  double rss_growth_mib = 0;  // highest resident set while running, less the one before
  ServingResult r;
};

// One replica, the resident set sampled every 4,096 finished requests.
Timed timed_replica(const ServingDeployment& d, const SchedulerConfig& c, const TrafficSpec& t, ServingLoop loop,
                    const BenchOptions& o, const char* what) {
  if (o.progress) std::fprintf(stderr, "bench serving: %s ...\n", what);
  Timed out;
  const double rss0 = rss_mib();
  double peak = rss0;
  std::int64_t n = 0;
  ServingHooks hooks;
  hooks.on_request = [&](const RequestRecord&) {
    if ((++n & 4095) == 0) peak = std::max(peak, rss_mib());
  };
  const double c0 = bench_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  out.r = run_serving_replica(d, c, t, hooks, loop).result;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_s = bench_cpu_s() - c0;
  out.rss_growth_mib = std::max(peak, rss_mib()) - rss0;
  return out;
}

nlohmann::ordered_json figures(const Timed& t) {
  nlohmann::ordered_json j;
  j["wall_s"] = t.wall_s;
  j["cpu_s"] = t.cpu_s;
  j["simulated_s"] = t.r.makespan_s;
  j["simulated_s_per_wall_s"] = t.r.makespan_s / t.wall_s;
  j["simulated_s_per_cpu_s"] = t.r.makespan_s / t.cpu_s;
  j["iterations"] = t.r.iterations;
  j["iterations_per_s"] = static_cast<double>(t.r.iterations) / t.wall_s;
  j["requests"] = t.r.completed_requests + t.r.rejected_requests;
  j["served_requests_per_s"] = t.r.requests_per_s;
  j["rss_growth_mib"] = t.rss_growth_mib;
  j["ttft_p99_s"] = t.r.ttft_s.p99;
  return j;
}

}  // namespace

nlohmann::ordered_json bench_serving(const BenchOptions& o) {
  const ServingDeployment d = llama8b_h100();
  const SchedulerConfig c = vllm_scheduler(d.model);
  const double rate = 100, hour = o.quick ? 60 : 3600;
  const double ref_horizon = o.quick ? 20 : 300;  // the reference is slow: a shorter horizon
  const int replicas = o.quick ? 4 : 16;
  // The fleet first, in a child process forked from a heap no run has used yet (reported last).
  const nlohmann::ordered_json fleet_json = bench_serving_fleet(o);
  nlohmann::ordered_json j;
  j["workload"] = "llama3-8b on one H100, Poisson, lognormal lengths (Azure conversation 2023 medians)";
  j["rate_per_s"] = rate;
  j["horizon_s"] = hour;
  // Memory first, before the larger runs leave freed heap behind to hide growth in.
  const Timed stable_short =
      timed_replica(d, c, azure_conversation(12, hour / 6), ServingLoop::fast, o, "fast, 12/s, 1/6");
  const Timed stable = timed_replica(d, c, azure_conversation(12, hour), ServingLoop::fast, o, "fast, 12/s");
  const Timed short_run = timed_replica(d, c, azure_conversation(rate, hour / 6), ServingLoop::fast, o, "fast, 1/6");
  const Timed fast = timed_replica(d, c, azure_conversation(rate, hour), ServingLoop::fast, o, "fast, 1 replica");
  j["fast"] = figures(fast);
  const Timed ref_fast =
      timed_replica(d, c, azure_conversation(rate, ref_horizon), ServingLoop::fast, o, "fast, reference horizon");
  const Timed ref =
      timed_replica(d, c, azure_conversation(rate, ref_horizon), ServingLoop::reference, o, "reference loop");
  j["reference"] = figures(ref);
  j["reference"]["horizon_s"] = ref_horizon;
  j["fast_same_horizon_wall_s"] = ref_fast.wall_s;
  j["fast_equals_reference"] = ref_fast.r.iterations == ref.r.iterations && ref_fast.r.makespan_s == ref.r.makespan_s &&
                               ref_fast.r.ttft_s.p99 == ref.r.ttft_s.p99 &&
                               ref_fast.r.completed_requests == ref.r.completed_requests;
  // Per simulated second, so that the differing horizons compare.
  j["ratio"] = (fast.r.makespan_s / fast.wall_s) / (ref.r.makespan_s / ref.wall_s);
  j["ratio_cpu"] = (fast.r.makespan_s / fast.cpu_s) / (ref.r.makespan_s / ref.cpu_s);
  if (o.progress) std::fprintf(stderr, "bench serving: %d replicas ...\n", replicas);
  const double rss0 = peak_rss_mib();
  const double c0 = bench_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  const ServingReplicasRun fleet =
      run_serving_replicas(d, c, azure_conversation(rate * replicas, hour), replicas, ServingLoop::fast);
  const double fleet_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::ordered_json f;
  f["replicas"] = replicas;
  f["rate_per_s"] = rate * replicas;
  const double fleet_cpu = bench_cpu_s() - c0;
  f["wall_s"] = fleet_wall;
  f["cpu_s"] = fleet_cpu;
  f["simulated_s"] = fleet.merged.makespan_s;
  f["simulated_s_per_wall_s"] = fleet.merged.makespan_s / fleet_wall;
  f["simulated_s_per_cpu_s"] = fleet.merged.makespan_s / fleet_cpu;
  f["iterations"] = fleet.merged.iterations;
  f["iterations_per_s"] = static_cast<double>(fleet.merged.iterations) / fleet_wall;
  f["requests"] = fleet.merged.completed_requests + fleet.merged.rejected_requests;
  f["served_requests_per_s"] = fleet.merged.requests_per_s;
  f["peak_rss_growth_mib"] = peak_rss_mib() - rss0;  // over the whole process's peak so far
  f["ttft_p99_s"] = fleet.merged.ttft_s.p99;
  f["threads"] = std::min(replicas, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The split's cost: each replica reads the whole stream, skipping the others' requests (their
  // arrivals drawn, not their lengths). Measured on one share: its pops and skips, no replica.
  {
    const TrafficSpec t = azure_conversation(rate * replicas, hour);
    const double g0 = bench_cpu_s();
    std::int64_t n = 0;
    for (const auto src = make_traffic(t); src->next_arrival(); ++n) src->pop();
    const double g = bench_cpu_s() - g0;
    const double s0 = bench_cpu_s();
    for (const auto share = std::move(make_round_robin_shares(t, replicas)[0]); share->next_arrival();) share->pop();
    const double share_cpu = bench_cpu_s() - s0;
    f["stream_requests"] = n;
    f["stream_generation_cpu_s"] = g;                      // the whole stream, every request popped
    f["one_share_read_cpu_s"] = share_cpu;                 // one replica's share read from its own copy
    f["split_overhead_cpu_s"] = share_cpu * replicas - g;  // all shares against one stream read once
  }
  j["round_robin"] = f;
  // Memory against the horizon: at the benchmark's load (over the replica's capacity, so the
  // waiting queue itself grows with the arrivals) and at a load it carries (12 requests/s).
  const auto memory = [](const Timed& a, const Timed& b) {
    nlohmann::ordered_json m;
    m["short_rss_growth_mib"] = a.rss_growth_mib;
    m["full_rss_growth_mib"] = b.rss_growth_mib;
    m["requests_ratio"] = static_cast<double>(b.r.completed_requests + b.r.rejected_requests) /
                          static_cast<double>(a.r.completed_requests + a.r.rejected_requests);
    m["rss_growth_ratio"] = a.rss_growth_mib > 0 ? b.rss_growth_mib / a.rss_growth_mib : 0.0;
    return m;
  };
  nlohmann::ordered_json m;
  m["short_horizon_s"] = hour / 6;
  m["at_benchmark_load"] = memory(short_run, fast);
  m["stable_rate_per_s"] = 12;
  m["at_stable_load"] = memory(stable_short, stable);
  j["stable_load"] = figures(stable);  // one replica at 12 requests/s for the horizon
  j["memory"] = m;
  j["fleet"] = fleet_json;
  return j;
}

}  // namespace ctwin
