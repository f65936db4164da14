// Disaggregated serving (xPyD, as DistServe, Splitwise and vLLM's disaggregated prefill run
// it): a pool of prefill replicas computes each prompt and its first token, the prompt's KV
// moves over the network to a pool of decode replicas, which generate the rest. Simulated in
// three passes, exact because the prefill pool never waits on the decode pool (no backpressure
// is modelled): (1) the prefill pool runs every request as a prefill-only one (output_tokens 1)
// behind a round-robin split; (2) each request's KV leaves when its prompt completes, as a flow
// from its prefill replica's link to its decode replica's link (round-robin by request, as
// vLLM's disaggregation proxy picks both instances per request), and concurrent transfers share
// those links by max-min fairness (sim/flow.hpp), so two transfers leaving one prefill replica,
// or landing on one decode replica, slow each other; (3) each decode replica admits its
// requests as Request::prefilled ones in the order their KV lands. docs/serving.md,
// "Disaggregated prefill".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/names.hpp"
#include "workloads/serving_replicas.hpp"

namespace ctwin {

// When a request's KV leaves the prefill replica. after_prefill: whole, once its prompt completes.
// layerwise: streamed as the prefill computes it (Mooncake, vLLM's KV connectors, DistServe's
// pipelined transfer): the prompt's prefill span [first scheduled, first token] is split evenly
// into K x L steps (K the replica's iterations over that span, one chunk each; L the model's
// layers), each step's bytes ready at its end. Modelled as two flows per request (see
// run_disaggregated): the stream of all but the last step's bytes, from the first step's end, held
// to the production rate B / span; then the last step's bytes, once they exist and the stream is
// through. Alone on a link of bandwidth bw and latency lat a transfer lands at
//   lat + max(first_token + B / (K L bw), first_scheduled + span / (K L) + B / bw).
enum class KvTransferMode { after_prefill, layerwise };
inline constexpr auto kv_transfer_mode_names = make_names<KvTransferMode>(
    {{KvTransferMode::after_prefill, "after_prefill"}, {KvTransferMode::layerwise, "layerwise"}});

struct DisaggregationSpec {
  ServingDeployment prefill;  // one prefill replica (its TP, PP; the deployment's host costs)
  ServingDeployment decode;   // one decode replica; its KV dtype sets the bytes moved
  int prefill_replicas = 1;
  int decode_replicas = 1;
  // One prefill replica's link to the decode pool, all its GPUs' ports together (also the most a
  // single transfer can take), and the fixed latency of one transfer.
  double link_bytes_per_s = 0;
  double link_latency_s = 0;
  // One decode replica's link from the prefill pool, all its GPUs' ports together; 0: no limit
  // on the decode side (only the prefill replicas' links are shared).
  double decode_link_bytes_per_s = 0;
  KvTransferMode kv_transfer = KvTransferMode::after_prefill;
};

// A prefill replica's KV link as the cluster gives it: when both pools fit one node, the
// node fabric (intra_gbyte_per_s, else the GPU's PCIe where the node has none) with its hop
// latency, else the NIC's with the inter-node hop; per GPU, times the GPUs that send at once
// (each of the prefill replica's GPUs sends its shard over its own port, min(prefill GPUs,
// decode GPUs) of them in parallel).
struct KvLink {
  double bytes_per_s = 0;         // a prefill replica's side
  double decode_bytes_per_s = 0;  // a decode replica's side: per GPU, times its GPUs
  double latency_s = 0;
  bool same_node = false;
};
KvLink default_kv_link(const ClusterSpec& c, int prefill_replica_gpus, int prefill_replicas, int decode_replica_gpus,
                       int decode_replicas);

// One transfer of `bytes` alone on its links: bytes / bytes_per_s + latency_s.
double kv_transfer_s(double bytes, double bytes_per_s, double latency_s);

struct DisaggregatedRun {
  KvCapacity prefill_capacity, decode_capacity;  // one replica's of each pool; a refusal refuses the run
  ServingResult prefill_pool;                    // the prefill pool's own merged result (output 1 each)
  ServingResult decode_pool;                     // the decode pool's (its TTFT: KV landed -> admitted)
  // The user's view: TTFT = arrival -> the prefill pool's first token; TPOT = (decode finish -
  // first token) / (output - 1), transfer and decode queueing included; E2E = decode finish -
  // arrival; counts of the requests (not of both pools' passes); makespan the later pool's;
  // iterations, GPU time and KV statistics summed over both pools.
  ServingResult merged;
  // Over the completed requests: the TTFT's parts (request overhead aside), and what follows.
  LatencySummary prefill_queueing_s;  // scheduler saw it -> its prefill first scheduled
  LatencySummary prefill_s;           // first scheduled -> first token (the prompt's iterations)
  LatencySummary transfer_s;          // first token -> KV landed (link queueing + bytes / bw + latency)
  // layerwise only (zero otherwise): the transfer's time before the first token, hidden behind
  // the prefill (its first step's end -> first token); transfer_s is then the exposed part.
  LatencySummary transfer_overlapped_s;
  LatencySummary decode_queueing_s;      // KV landed -> admitted by a decode replica
  double kv_bytes_per_token = 0;         // the model's, at the decode pool's KV dtype
  double kv_transfer_bytes = 0;          // moved in all
  double kv_transfer_busy_s = 0;         // sum over transfers of bytes / the prefill link's bandwidth
  int kv_peak_concurrent_transfers = 0;  // most transfers in flight at once
  std::int64_t kv_transfers = 0;
  int prefill_gpus = 0, decode_gpus = 0;  // each pool's, all replicas
};

// Observers of a disaggregated run (serving_fleet_trace.hpp records a trace from them); all empty
// by default, and the run's result is the same with them. pool: 0 prefill, 1 decode; replica:
// the index in its pool. A decode replica's requests are renumbered and arrive when their KV lands.
struct DisaggHooks {
  std::function<void(int pool, int replica, const IterationRecord&)> on_iteration;
  std::function<void(int pool, int replica, const RequestRecord&)> on_request;
  // One request's KV from prefill replica `from` to decode replica `to`: leaves at `start` (its
  // first token; layerwise, its first layer's), lands at `end`.
  std::function<void(int from, int to, std::int64_t request, Time start, Time end, double bytes)> on_transfer;
};

// Runs the prefill pool, the transfers and the decode pool; open-loop traffic only
// (std::invalid_argument for a closed loop). `prefill_sched` and `decode_sched` may differ.
DisaggregatedRun run_disaggregated(const DisaggregationSpec& spec, const SchedulerConfig& prefill_sched,
                                   const SchedulerConfig& decode_sched, const TrafficSpec& traffic,
                                   ServingLoop loop = ServingLoop::fast, const DisaggHooks& observe = {});

}  // namespace ctwin
