#include "workloads/serving_lora.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "workloads/model_dims.hpp"

namespace ctwin {

LoraLayerWidths lora_layer_widths(const ModelSpec& m) {
  const ModelDims d = model_dims(m);
  const double h = d.hidden;
  LoraLayerWidths w;
  // q, k, v read the hidden state; o reads the attention context.
  w.d_in = 3 * h + d.o_in;
  w.d_out = d.q_dim + d.kv_dim + d.v_dim + h;
  w.projections = 4;
  // The dense MLP: gate and up (or up alone) h -> ffn, down ffn -> h. MoE experts: not adapted.
  const double ffn = m.moe.enabled() ? 0 : static_cast<double>(m.ffn_hidden);
  if (ffn > 0) {
    const int up = is_gated(m.activation) ? 2 : 1;
    w.d_in += up * h + ffn;
    w.d_out += up * ffn + h;
    w.projections += up + 1;
  }
  return w;
}

double lora_in_out_per_layer(const ModelSpec& m) {
  const LoraLayerWidths w = lora_layer_widths(m);
  return w.d_in + w.d_out;
}

double lora_adapter_params(const ModelSpec& m, int rank) {
  return static_cast<double>(rank) * lora_in_out_per_layer(m) * m.layers;
}

double lora_adapter_bytes(const ModelSpec& m, int rank, double dtype_bytes) {
  return lora_adapter_params(m, rank) * dtype_bytes;
}

double lora_flops(const ModelSpec& m, int rank, double tokens) { return 2 * tokens * lora_adapter_params(m, rank); }

LoraPopularityTable::LoraPopularityTable(const LoraTrafficSpec& s) : base_fraction_(s.base_fraction) {
  if (s.adapters <= 0) return;
  cum_.reserve(static_cast<std::size_t>(s.adapters));
  double total = 0;
  for (std::int32_t i = 0; i < s.adapters; ++i) {
    total += s.popularity == LoraPopularity::zipf ? std::pow(i + 1.0, -s.zipf_s) : 1.0;
    cum_.push_back(total);
  }
  for (double& c : cum_) c /= total;
}

std::int32_t LoraPopularityTable::pick(double u_base, double u_adapter) const {
  if (cum_.empty() || u_base < base_fraction_) return -1;
  const auto it = std::upper_bound(cum_.begin(), cum_.end(), u_adapter);
  return static_cast<std::int32_t>(std::min<std::ptrdiff_t>(it - cum_.begin(), std::ssize(cum_) - 1));
}

void add_lora_stats(LoraStats& a, const LoraStats& b) {
  a.lookups += b.lookups;
  a.gpu_hits += b.gpu_hits;
  a.host_loads += b.host_loads;
  a.storage_loads += b.storage_loads;
  a.gpu_evictions += b.gpu_evictions;
  a.host_evictions += b.host_evictions;
  a.load_bytes += b.load_bytes;
  a.load_s += b.load_s;
}

LoraAdapterCache::LoraAdapterCache(int gpu_slots, int host_capacity)
    : gpu_slots_(gpu_slots), host_capacity_(host_capacity) {
  if (gpu_slots < 1 || host_capacity < gpu_slots)
    throw std::invalid_argument("LoRA cache needs max_loras >= 1 and max_cpu_loras >= max_loras");
}

LoraAdapterCache::Entry& LoraAdapterCache::entry(std::int32_t a) {
  if (a < 0) throw std::invalid_argument("LoRA adapter id must be >= 0");
  if (static_cast<std::size_t>(a) >= entries_.size()) entries_.resize(static_cast<std::size_t>(a) + 1);
  return entries_[static_cast<std::size_t>(a)];
}

const LoraAdapterCache::Entry* LoraAdapterCache::find(std::int32_t a) const {
  if (a < 0 || static_cast<std::size_t>(a) >= entries_.size()) return nullptr;
  return &entries_[static_cast<std::size_t>(a)];
}

bool LoraAdapterCache::on_gpu(std::int32_t a) const {
  const Entry* e = find(a);
  return e && e->gpu;
}
bool LoraAdapterCache::on_host(std::int32_t a) const {
  const Entry* e = find(a);
  return e && e->host;
}
bool LoraAdapterCache::pinned(std::int32_t a) const {
  const Entry* e = find(a);
  return e && e->pins > 0;
}

std::int32_t LoraAdapterCache::lru_victim(bool gpu) const {
  std::int32_t best = -1;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.pins > 0 || !(gpu ? e.gpu : e.host)) continue;
    if (best < 0 || e.last_use < entries_[static_cast<std::size_t>(best)].last_use) best = static_cast<std::int32_t>(i);
  }
  return best;
}

std::optional<LoraSource> LoraAdapterCache::acquire(std::int32_t a) {
  Entry& e = entry(a);
  LoraSource src = LoraSource::gpu;
  if (!e.gpu) {
    // A slot: a free one, else the least recently used unpinned adapter's.
    std::int32_t gpu_victim = -1;
    if (on_gpu_ >= gpu_slots_) {
      gpu_victim = lru_victim(true);
      if (gpu_victim < 0) return std::nullopt;
    }
    if (gpu_victim >= 0) {
      entries_[static_cast<std::size_t>(gpu_victim)].gpu = false;
      --on_gpu_;
      ++stats_.gpu_evictions;
    }
    src = LoraSource::host;
    if (!e.host) {
      src = LoraSource::storage;
      if (on_host_ >= host_capacity_) {
        // Never a pinned one; with host_capacity >= gpu_slots an unpinned host entry exists
        // (at most gpu_slots - 1 others are pinned).
        const std::int32_t v = lru_victim(false);
        if (v < 0) throw std::logic_error("LoRA host cache full of pinned adapters");
        Entry& ve = entries_[static_cast<std::size_t>(v)];
        if (ve.gpu) {
          ve.gpu = false;
          --on_gpu_;
          ++stats_.gpu_evictions;
        }
        ve.host = false;
        --on_host_;
        ++stats_.host_evictions;
      }
      e.host = true;
      ++on_host_;
    }
    e.gpu = true;
    ++on_gpu_;
  }
  ++stats_.lookups;
  switch (src) {
    case LoraSource::gpu:
      ++stats_.gpu_hits;
      break;
    case LoraSource::host:
      ++stats_.host_loads;
      break;
    case LoraSource::storage:
      ++stats_.storage_loads;
      break;
  }
  if (e.pins++ == 0) ++pinned_adapters_;
  e.last_use = clock_++;
  return src;
}

void LoraAdapterCache::unpin(std::int32_t a) {
  Entry& e = entry(a);
  if (e.pins <= 0) throw std::logic_error("LoRA adapter unpinned more often than pinned");
  if (--e.pins == 0) --pinned_adapters_;
  e.last_use = clock_++;
}

}  // namespace ctwin
