// Multi-LoRA serving (S-LoRA, Sheng et al. 2023; Punica, Chen et al. 2023; vLLM's LoRAConfig):
// many low-rank adapters on one base model, each request naming its own (Request::lora). This
// file holds the adapters' sizes and costs, their popularity in the traffic, and the replica's
// two-level adapter cache (GPU slots over a host-memory cache over storage); serving_sim.cpp
// applies max_loras and charges the loads, serving_cost.cpp prices the adapters' GEMMs.
//
// Adapted projections: q, k, v, o, gate, up, down of every layer (the "all linear layers" target
// modules of vLLM's supported LoRA layers and of PEFT's common configs). In an MoE model only
// the attention projections are adapted (no expert or dense MLP), and MLA counts its attention as
// dense q/k/v/o widths: approximations, as vLLM's MoE and MLA LoRA support is partial.
// One projection d_in -> d_out of rank r holds A (d_in x r) and B (r x d_out): r (d_in + d_out)
// parameters, and costs 2 r (d_in + d_out) FLOPs per token (shrink x A, then expand by B).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/names.hpp"
#include "workloads/model.hpp"

namespace ctwin {

// One layer's adapted projections: their input widths summed, their output widths summed, and
// how many. An adapter of rank r has r (d_in + d_out) parameters per layer.
struct LoraLayerWidths {
  double d_in = 0, d_out = 0;
  int projections = 0;
};
LoraLayerWidths lora_layer_widths(const ModelSpec& m);
// d_in + d_out of lora_layer_widths.
double lora_in_out_per_layer(const ModelSpec& m);
// Parameters of one adapter of rank r over every layer: r x lora_in_out_per_layer x layers.
double lora_adapter_params(const ModelSpec& m, int rank);
// Its bytes at dtype_bytes per parameter (BF16 adapters: 2).
double lora_adapter_bytes(const ModelSpec& m, int rank, double dtype_bytes);
// The adapters' extra FLOPs for `tokens` tokens at rank r: 2 x tokens x lora_adapter_params.
double lora_flops(const ModelSpec& m, int rank, double tokens);

// Which adapter a request uses.
enum class LoraPopularity : std::uint8_t { uniform, zipf };
inline constexpr auto lora_popularity_names =
    make_names<LoraPopularity>({{LoraPopularity::uniform, "uniform"}, {LoraPopularity::zipf, "zipf"}});

// /traffic/lora: requests carry adapter 0 .. adapters-1 (popularity), or none (base_fraction).
struct LoraTrafficSpec {
  std::int32_t adapters = 0;  // 0: no LoRA (every request on the base model)
  LoraPopularity popularity = LoraPopularity::uniform;
  double zipf_s = 1;         // zipf: adapter i (0-based) drawn with weight 1 / (i + 1)^s
  double base_fraction = 0;  // of the requests, on the base model alone
  std::int32_t rank = 16;    // every adapter's rank
};

// Draws adapters as a LoraTrafficSpec says, from two uniforms in (0, 1).
class LoraPopularityTable {
 public:
  explicit LoraPopularityTable(const LoraTrafficSpec& s);
  // -1 (base model) when u_base < base_fraction, else the adapter whose cumulative weight
  // interval holds u_adapter.
  std::int32_t pick(double u_base, double u_adapter) const;

 private:
  double base_fraction_ = 0;
  std::vector<double> cum_;  // cumulative normalised weights; empty without adapters
};

// Where an adapter came from when a request needed it.
enum class LoraSource : std::uint8_t { gpu, host, storage };

// The replica's adapter statistics (ServingResult::lora).
struct LoraStats {
  std::int64_t lookups = 0;        // admissions of requests with an adapter
  std::int64_t gpu_hits = 0;       // adapter already in a GPU slot
  std::int64_t host_loads = 0;     // copied from the host cache (a GPU miss, host hit)
  std::int64_t storage_loads = 0;  // read from storage, then copied (a miss at both levels)
  std::int64_t gpu_evictions = 0;  // a slot taken from another adapter
  std::int64_t host_evictions = 0;
  double load_bytes = 0;  // over the host link (each load once; storage reads counted again in load_s)
  double load_s = 0;      // time the loads blocked iterations
};

// Adds b's counts and times to a (merging replicas).
void add_lora_stats(LoraStats& a, const LoraStats& b);

// vLLM's LRUCacheWorkerLoRAManager: gpu_slots (max_loras) GPU slots over a host cache of
// host_capacity (max_cpu_loras >= max_loras) adapters, both LRU. A GPU-resident adapter is
// also host-resident (dropping it from the host cache frees its slot). An adapter pinned by a
// running request is never evicted; "recently used" is the last acquire or the last unpin.
class LoraAdapterCache {
 public:
  LoraAdapterCache(int gpu_slots, int host_capacity);
  // Makes `a` GPU-resident and pins it once more: where it came from, or nullopt (nothing
  // changed) when every slot is pinned by other adapters. Counts the statistics.
  std::optional<LoraSource> acquire(std::int32_t a);
  void unpin(std::int32_t a);
  bool on_gpu(std::int32_t a) const;
  bool on_host(std::int32_t a) const;
  bool pinned(std::int32_t a) const;
  int pinned_adapters() const { return pinned_adapters_; }  // distinct adapters with pins
  int gpu_slots() const { return gpu_slots_; }
  LoraStats& stats() { return stats_; }
  const LoraStats& stats() const { return stats_; }

 private:
  struct Entry {
    std::int32_t pins = 0;
    std::int64_t last_use = -1;  // -1: never seen
    bool gpu = false, host = false;
  };
  Entry& entry(std::int32_t a);
  const Entry* find(std::int32_t a) const;
  // The least recently used unpinned adapter with `gpu` (else `host`) residency, or -1.
  std::int32_t lru_victim(bool gpu) const;

  int gpu_slots_, host_capacity_;
  int on_gpu_ = 0, on_host_ = 0, pinned_adapters_ = 0;
  std::int64_t clock_ = 0;
  std::vector<Entry> entries_;  // by adapter id
  LoraStats stats_;
};

}  // namespace ctwin
