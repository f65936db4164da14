// N identical serving replicas behind a round-robin split (request i of the stream goes to
// replica i mod N), each simulated on its own, and their results merged into one fleet result:
// counts and tokens summed, latency percentiles from the merged histograms (as exact as one
// histogram fed every sample), the makespan the longest. The fleet issue's routers replace the
// split; the merge stays.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/quantile_histogram.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {

// Replica `replica` of `replicas`'s share of a stream: the stream's requests replica,
// replica + replicas, ... (by position, which is the request id for make_traffic's sources).
// Each replica reads its own copy of the stream and skips the others' requests
// (TrafficSource::skip: their arrivals only, for make_traffic's open-loop generators): O(1)
// memory, no buffering. Open-loop streams only: a closed-loop source would
// wait for completions that happen on other replicas (make_round_robin_shares refuses one).
class RoundRobinShare final : public TrafficSource {
 public:
  RoundRobinShare(std::unique_ptr<TrafficSource> stream, int replica, int replicas);
  std::optional<Time> next_arrival() const override { return stream_->next_arrival(); }
  Request pop() override;
  std::int64_t skip(std::int64_t n) override;
  bool exhausted() const override { return stream_->exhausted(); }
  const std::vector<RequestClass>& classes() const override { return stream_->classes(); }

 private:
  std::unique_ptr<TrafficSource> stream_;
  int replicas_;
};

// One share per replica of make_traffic(spec); throws std::invalid_argument for closed-loop
// arrivals or replicas < 1.
std::vector<std::unique_ptr<TrafficSource>> make_round_robin_shares(const TrafficSpec& spec, int replicas);

// The streamed latency statistics of finished requests, as simulate_replica computes them, kept
// as histograms so that replicas merge exactly.
struct ServingLatencyHistograms {
  QuantileHistogram ttft_s, tpot_s, e2e_s, queueing_s;
  std::int64_t met_slo = 0;  // completed requests meeting every SLO of their class

  void record(const RequestRecord& r);  // a rejected request adds nothing
  void merge(const ServingLatencyHistograms& other);
};

LatencySummary latency_summary(const QuantileHistogram& h);

// The fleet result from each replica's result and the merged histograms: counts, tokens,
// iterations, preemptions, KV statistics and GPU time (GPU-seconds) summed; the makespan the
// longest; rates (throughput, goodput) the summed counts over that makespan; KV peak the
// highest, KV mean time-weighted over every replica for the fleet makespan.
ServingResult merge_serving_results(const std::vector<ServingResult>& replicas, const ServingLatencyHistograms& merged);

struct ServingReplicasRun {
  KvCapacity capacity;                  // one replica's (all are identical)
  std::vector<ServingResult> replicas;  // by replica index; empty when refused
  ServingResult merged;
  KvHostTierStats offload;  // the replicas' host tiers of KV, summed
};

// `replicas` copies of the deployment behind a round-robin split of `traffic`, simulated with
// the given loop on `threads` threads (0: one per hardware thread, at most one per replica). The
// result does not depend on the thread count. The deployment's cost models are called from
// every thread (the roofline is pure). An exception of a replica is rethrown (the lowest
// replica's) after all have stopped.
ServingReplicasRun run_serving_replicas(const ServingDeployment& d, const SchedulerConfig& sched,
                                        const TrafficSpec& traffic, int replicas, ServingLoop loop = ServingLoop::fast,
                                        int threads = 0);

}  // namespace ctwin
