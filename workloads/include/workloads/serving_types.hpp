// The seams of the serving simulator (docs/serving.md), shared by its parts so each can be
// built and tested on its own: requests and where they come from (serving_traffic), what one
// iteration of a replica runs and what it costs (serving_cost), and the KV cache the
// scheduler allocates from (kv_cache, serving_scheduler, serving_sim).
// Tokens and blocks are exact integers, as the serving engines count them; times are the
// engine's picoseconds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/names.hpp"
#include "sim/time.hpp"

namespace ctwin {

// A class of requests with its own SLOs and priority (vLLM's priority scheduling: a lower
// value is served first; ties by arrival).
struct RequestClass {
  std::string name = "default";
  double ttft_slo_s = 0;  // time to first token; 0: no SLO
  double tpot_slo_s = 0;  // mean time per output token after the first; 0: no SLO
  double e2e_slo_s = 0;   // end to end; 0: no SLO
  int priority = 0;
  double share = 1;  // fraction of the requests in this class (the traffic normalises)
};

// One request. Token contents are not modelled, only their identity for prefix caching: the
// first `shared_prefix_tokens` of the prompt are the same for every request of `prefix_group`
// (a system prompt, or a session's earlier turns), the rest are unique to the request. Two
// requests of one group share their leading shared_prefix_tokens; a block of block_size tokens
// is reusable when it lies wholly inside the shorter of the two shared prefixes.
struct Request {
  std::int64_t id = 0;  // 0, 1, 2, ... in arrival order; unique in a run
  Time arrival{};
  std::int32_t prompt_tokens = 0;         // >= 1
  std::int32_t output_tokens = 0;         // tokens to generate, >= 1 (the first comes from prefill)
  std::int32_t shared_prefix_tokens = 0;  // 0 .. prompt_tokens
  std::int64_t prefix_group = -1;         // -1: nothing shared
  std::int32_t cls = 0;                   // index into the traffic's classes
  std::int32_t client = -1;               // closed loop: the user who sent it; -1 open loop
  // Disaggregated serving's decode pool: the prompt's KV was computed elsewhere and arrives with
  // the request, its first token already emitted. The scheduler allocates the prompt's blocks
  // but computes no prefill, and the request decodes output_tokens - 1 more tokens (>= 2 output
  // tokens). A recompute preemption later recomputes prompt and output as for any request.
  bool prefilled = false;
  std::int32_t lora = -1;  // the LoRA adapter it runs with (serving_lora.hpp); -1: the base model
  // A replayed trace's per-block prefix identity (the Mooncake traces' hash_ids): block b covers
  // prompt tokens [b*prefix_block_tokens, (b+1)*prefix_block_tokens) and prefix_blocks[b] names
  // it together with every block before it (a chain hash: equal ids at b mean equal tokens up to
  // the end of block b). When present (prefix_block_count > 0) it replaces prefix_group: a cache
  // page lying wholly inside both a hash block and the prompt is keyed by (that block's id, its
  // offset in the block); every other page is the request's own. The ids live in a pool the
  // traffic source owns, valid while it lives; prefix_block_tokens is a multiple of block_size.
  const std::uint64_t* prefix_blocks = nullptr;
  std::int32_t prefix_block_count = 0;
  std::int32_t prefix_block_tokens = 0;
};

// Where requests come from, streamed in arrival order so memory stays flat in the request count.
// Open-loop sources know every arrival in advance; a closed-loop one learns its users' next
// arrivals from completed().
class TrafficSource {
 public:
  virtual ~TrafficSource() = default;
  // The earliest arrival not yet popped, or nullopt when none is known now (closed loop: every
  // user is waiting for a response).
  virtual std::optional<Time> next_arrival() const = 0;
  // That request (precondition: next_arrival() has a value).
  virtual Request pop() = 0;
  // A request finished (its last token) at t; a closed-loop user sends its next one after a
  // think time. Open-loop sources ignore it.
  virtual void completed(const Request& r, Time t) {
    (void)r;
    (void)t;
  }
  // Drops the next n requests unseen (fewer when the stream ends first); how many it dropped.
  // A round-robin share skips the other replicas' requests with it; a generator that can draw a
  // request's arrival without its lengths makes it cheap.
  virtual std::int64_t skip(std::int64_t n) {
    std::int64_t k = 0;
    for (; k < n && next_arrival(); ++k) pop();
    return k;
  }
  // No request will ever come again.
  virtual bool exhausted() const = 0;
  // The classes requests refer to by index (at least one).
  virtual const std::vector<RequestClass>& classes() const = 0;
};

// What one iteration (one forward pass of the whole batch) of one replica runs, in the sums the
// cost model needs. A prefill chunk of c new tokens after p cached (or earlier-chunk) tokens
// adds c query tokens, c*p + c*(c+1)/2 attended pairs and p + c K/V tokens read; a decode
// sequence with context n adds (1 + spec_k) query tokens, as many pairs per query as it sees,
// and n K/V tokens read.
struct BatchShape {
  std::int64_t prefill_seqs = 0;    // sequences with a prefill chunk this iteration
  std::int64_t prefill_tokens = 0;  // new prompt tokens computed (sum of the chunks)
  double prefill_attended_pairs = 0;
  double prefill_kv_tokens = 0;    // K/V tokens read by the prefill chunks (context + chunk)
  std::int64_t decode_seqs = 0;    // sequences generating
  std::int64_t decode_tokens = 0;  // their query tokens: decode_seqs * (1 + spec_k)
  double decode_attended_pairs = 0;
  double decode_kv_tokens = 0;  // sum of the decode sequences' context lengths
  // Speculative decoding: the draft proposes spec_k tokens per decode sequence (spec_k draft
  // steps, or one n-gram lookup) and the target verifies 1 + spec_k per sequence.
  std::int32_t spec_k = 0;
  // Multi-LoRA (serving_lora.hpp): the tokens of requests with an adapter, the distinct adapters
  // among them, and the rank the kernels run at (vLLM pads every slot to max_lora_rank).
  std::int64_t lora_tokens = 0;
  std::int32_t lora_adapters = 0;
  std::int32_t lora_rank = 0;
  // Sliding-window layers (ModelSpec::attention_window): set `window` before adding sequences;
  // the windowed sums then hold what a windowed layer's kernels score and read (a query sees
  // at most `window` keys, itself included).
  std::int64_t window = 0;
  double prefill_window_pairs = 0;
  double prefill_window_kv_tokens = 0;
  double decode_window_pairs = 0;
  double decode_window_kv_tokens = 0;
  // Tokens the batch holds (for activation size), and whether it may run as a captured CUDA
  // graph (vLLM captures decode-only batches up to a size).
  std::int64_t tokens() const { return prefill_tokens + decode_tokens; }
};

// Keys the queries at positions first..last (1-based) see through a window of w tokens: the
// sum of min(q, w), exact in closed form.
inline double windowed_keys(std::int64_t first, std::int64_t last, std::int64_t w) {
  if (last < first) return 0;
  const auto tri = [](double a, double b) { return (a + b) * (b - a + 1) / 2; };  // a + ... + b
  const double f = static_cast<double>(first), l = static_cast<double>(last), ww = static_cast<double>(w);
  if (last <= w) return tri(f, l);
  if (first > w) return (l - f + 1) * ww;
  return tri(f, ww) + (l - ww) * ww;
}

// A prefill chunk of `chunk` new tokens after `computed` cached (or earlier-chunk) tokens, added
// to b: token i (1-based) of the chunk sees computed + i keys.
inline void add_prefill_chunk(BatchShape& b, std::int64_t chunk, std::int64_t computed) {
  const double p = static_cast<double>(computed), c = static_cast<double>(chunk);
  ++b.prefill_seqs;
  b.prefill_tokens += chunk;
  b.prefill_attended_pairs += c * p + c * (c + 1) / 2;
  b.prefill_kv_tokens += p + c;
  if (b.window > 0) {
    b.prefill_window_pairs += windowed_keys(computed + 1, computed + chunk, b.window);
    b.prefill_window_kv_tokens += static_cast<double>(std::min(computed + chunk, chunk + b.window - 1));
  }
}

// A decode sequence of context n (its K/V tokens once this step's 1 + k are written) verifying
// 1 + k tokens, added to b: query j (0-based) sees n - k + j keys.
inline void add_decode_sequence(BatchShape& b, std::int64_t n, int k) {
  const double nn = static_cast<double>(n), kk = k;
  ++b.decode_seqs;
  b.decode_tokens += 1 + k;
  b.decode_kv_tokens += nn;
  b.decode_attended_pairs += (1 + kk) * nn - kk * (kk + 1) / 2;
  if (b.window > 0) {
    b.decode_window_pairs += windowed_keys(n - k, n, b.window);
    b.decode_window_kv_tokens += static_cast<double>(std::min<std::int64_t>(n, b.window + k));
  }
}

// An iteration's time and where it went (seconds; the parts add up to total_s).
struct IterationTime {
  double total_s = 0;
  double prefill_s = 0;   // prefill compute (GEMMs and attention of the prefill tokens' share)
  double decode_s = 0;    // decode compute (weights and KV reads of the decode tokens' share)
  double comm_s = 0;      // exposed tensor/pipeline/expert-parallel communication
  double overhead_s = 0;  // CPU scheduling, sampling, launch (CUDA graphs shrink it)
  double draft_s = 0;     // speculative decoding's proposer
  double lora_s = 0;      // the LoRA adapters' shrink and expand GEMMs (Punica's SGMV)
  // The target model's forward pass on the GPUs (what `ctwin realrun` replays and times): the
  // total less the host overhead and the proposer.
  double forward_s() const { return prefill_s + decode_s + comm_s + lora_s; }
};

// Prices an iteration from its shape (serving_cost.hpp holds the roofline-and-collectives one).
// Must be cheap (about a microsecond): an hour of traffic is a million iterations.
class IterationCostModel {
 public:
  virtual ~IterationCostModel() = default;
  virtual IterationTime iteration(const BatchShape& b) const = 0;
};

// ---------------------------------------------------------------------------------------------
// The scheduler's parameters, named as vLLM names them (vllm/config.py, EngineArgs).

enum class BatchingMode : std::uint8_t { continuous, static_batching };
enum class SchedulingPolicy : std::uint8_t { fcfs, priority };
enum class PreemptionMode : std::uint8_t { recompute, swap };
// When a waiting request may start (TensorRT-LLM's capacity_scheduler_policy): max_utilization
// admits it once its next chunk fits and preempts when blocks run out (vLLM's policy);
// guaranteed_no_evict admits it only when its whole prompt + output fits, reserved up front, so
// nothing is ever preempted (TRT-LLM's default).
enum class CapacityPolicy : std::uint8_t { max_utilization, guaranteed_no_evict };
// none; vLLM's hashed full blocks with LRU eviction; SGLang's RadixAttention (token radix tree).
enum class PrefixCaching : std::uint8_t { none, hash_lru, radix };
// Where a replica's host tier of KV (KV offloading) lives: in its own host memory (vLLM's
// native CPU offloading, LMCache's local CPU backend), or pooled over the pool's replicas, any
// replica finding what any other stored (Mooncake's store, LMCache with a shared remote backend).
enum class KvOffloadScope : std::uint8_t { replica, pool };

inline constexpr auto batching_mode_names =
    make_names<BatchingMode>({{BatchingMode::continuous, "continuous"}, {BatchingMode::static_batching, "static"}});
inline constexpr auto scheduling_policy_names =
    make_names<SchedulingPolicy>({{SchedulingPolicy::fcfs, "fcfs"}, {SchedulingPolicy::priority, "priority"}});
inline constexpr auto preemption_mode_names =
    make_names<PreemptionMode>({{PreemptionMode::recompute, "recompute"}, {PreemptionMode::swap, "swap"}});
inline constexpr auto capacity_policy_names =
    make_names<CapacityPolicy>({{CapacityPolicy::max_utilization, "max_utilization"},
                                {CapacityPolicy::guaranteed_no_evict, "guaranteed_no_evict"}});
inline constexpr auto prefix_caching_names = make_names<PrefixCaching>(
    {{PrefixCaching::none, "none"}, {PrefixCaching::hash_lru, "hash_lru"}, {PrefixCaching::radix, "radix"}});
inline constexpr auto kv_offload_scope_names =
    make_names<KvOffloadScope>({{KvOffloadScope::replica, "replica"}, {KvOffloadScope::pool, "pool"}});

struct SchedulerConfig {
  int max_num_seqs = 256;                              // sequences in one batch
  std::int64_t max_num_batched_tokens = 8192;          // token budget of one iteration
  int block_size = 16;                                 // tokens per KV block
  double gpu_memory_utilization = 0.9;                 // share of GPU memory vLLM may use
  bool enable_chunked_prefill = true;                  // split prompts over iterations within the budget
  PrefixCaching prefix_caching = PrefixCaching::none;  // enable_prefix_caching: hash_lru
  double swap_space_gib = 4;                           // host memory per GPU for swapped-out KV
  // KV offloading (0: off): host memory for a tier of prefix-cache pages behind the GPU cache,
  // over all the replica's GPUs (vLLM's kv_offloading_size); pooled: each replica adds its share.
  double kv_offloading_size_gib = 0;
  KvOffloadScope kv_offloading_scope = KvOffloadScope::replica;
  std::int64_t max_model_len = 0;  // prompt + output limit; 0: the model's max_seq
  BatchingMode batching = BatchingMode::continuous;
  SchedulingPolicy policy = SchedulingPolicy::fcfs;
  PreemptionMode preemption = PreemptionMode::recompute;
  CapacityPolicy capacity = CapacityPolicy::max_utilization;
  // Speculative decoding (0: off): proposed tokens per step and the chance each is accepted
  // (per position when given; else one rate for all).
  int num_speculative_tokens = 0;
  double acceptance_rate = 0;
  std::vector<double> acceptance_per_position;
  // Multi-LoRA (vLLM's LoRAConfig; on when the traffic's requests carry adapters): distinct
  // adapters in one batch (= GPU adapter slots), the host-memory adapter cache (>= max_loras),
  // the rank every slot is sized and computed at, the rank of the traffic's adapters (the bytes
  // a load moves), and the storage read rate of an adapter not in the host cache.
  bool enable_lora = false;
  int max_loras = 1;
  int max_cpu_loras = 1;
  int max_lora_rank = 16;
  int lora_adapter_rank = 16;
  double lora_load_bytes_per_s = 2e9;
};

// ---------------------------------------------------------------------------------------------
// The paged KV cache of one replica (kv_cache.hpp makes one): num_blocks blocks of block_size
// tokens on the GPUs, and host blocks for swapped-out requests. A request is known by its id.

struct KvCacheStats {
  std::int64_t prefix_queries = 0;       // prompts looked up
  std::int64_t prefix_query_tokens = 0;  // their prompt tokens
  std::int64_t prefix_hit_tokens = 0;    // of which found cached
  std::int64_t evicted_blocks = 0;       // cached blocks reclaimed for new allocations
  // KV offloading: of the hit tokens, those loaded from the host tier (not on the GPUs), and of
  // those, the ones another replica stored (a pooled tier: read over the network).
  std::int64_t offload_hit_tokens = 0;
  std::int64_t offload_remote_hit_tokens = 0;
};

// Pages a prefix lookup loaded from the host tier since the caller last asked (KvCache::take_loads):
// stored by this replica (host link) or by another (a pooled tier, over the network).
struct KvLoads {
  std::int64_t local_blocks = 0;
  std::int64_t remote_blocks = 0;
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Tokens at the start of r's prompt already cached and reusable, or 0 without prefix caching;
  // never the whole prompt (the last prompt token is recomputed to produce logits, as in vLLM).
  // Changes nothing (no statistics either).
  virtual std::int64_t cached_prefix_tokens(const Request& r) const = 0;
  // Grows r's allocation to hold `tokens` tokens. The first call for r takes its cached prefix
  // (as cached_prefix_tokens says, counted in the statistics) and allocates the rest; with
  // prefix caching the full blocks of r's shared prefix become reusable from then on. Returns
  // false and changes nothing when the free blocks, after evicting unreferenced cached ones, do
  // not suffice.
  virtual bool allocate(const Request& r, std::int64_t tokens) = 0;
  // Releases r's GPU blocks (a finished or recompute-preempted request); with prefix caching its
  // shared-prefix blocks stay cached until evicted.
  virtual void release(const Request& r) = 0;
  // Swap preemption: moves r's blocks to host blocks (false, nothing changed, when host blocks do
  // not suffice), and back (false when GPU blocks do not suffice). Returns the blocks moved.
  virtual std::optional<std::int64_t> swap_out(const Request& r) = 0;
  virtual std::optional<std::int64_t> swap_in(const Request& r) = 0;

  virtual int block_size() const = 0;
  virtual std::int64_t num_blocks() const = 0;       // GPU blocks in all
  virtual std::int64_t used_blocks() const = 0;      // referenced by requests
  virtual std::int64_t cached_blocks() const = 0;    // unreferenced, holding a reusable prefix
  virtual std::int64_t num_host_blocks() const = 0;  // swap space
  virtual std::int64_t used_host_blocks() const = 0;
  virtual std::int64_t blocks_of(const Request& r) const = 0;  // GPU blocks r holds
  virtual const KvCacheStats& stats() const = 0;
  // KV offloading: the pages loaded from the host tier since the last call, whose transfers the
  // caller times; none without a host tier.
  virtual KvLoads take_loads() { return {}; }
};

}  // namespace ctwin
