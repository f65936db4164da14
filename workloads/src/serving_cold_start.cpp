#include "workloads/serving_cold_start.hpp"

#include <algorithm>
#include <stdexcept>

#include "workloads/serving_memory.hpp"

namespace ctwin {

double replica_weight_bytes(const ServingDeployment& d) {
  double bytes = 0;
  for (int stage = 0; stage < d.pp; ++stage) bytes += serving_weight_bytes(d, stage) * d.tp;
  return bytes;
}

double weight_load_bytes_per_s(const ColdStartSpec& s) {
  return s.network_bytes_per_s > 0 ? std::min(s.storage_bytes_per_s, s.network_bytes_per_s) : s.storage_bytes_per_s;
}

double cold_start_s(const ColdStartSpec& s, double weight_bytes) {
  const double bw = weight_load_bytes_per_s(s);
  if (!(bw > 0)) throw std::invalid_argument("cold_start_s: the storage bandwidth must be > 0");
  return s.container_start_s + weight_bytes / bw + s.engine_init_s;
}

WarmPool::WarmPool(int size, double cold_start_s, double warm_start_s)
    : cold_(seconds(cold_start_s)),
      warm_(seconds(warm_start_s)),
      ready_at_(static_cast<std::size_t>(std::max(0, size))) {}

Time WarmPool::start(Time now) {
  const auto first = std::min_element(ready_at_.begin(), ready_at_.end());
  if (first == ready_at_.end()) return now + cold_;
  const Time leaves = std::max(now, *first);
  const Time serves = leaves + warm_;
  if (serves >= now + cold_) return now + cold_;
  *first = leaves + cold_;  // the replacement starts as the warm replica leaves
  return serves;
}

int WarmPool::ready(Time now) const {
  return static_cast<int>(std::count_if(ready_at_.begin(), ready_at_.end(), [&](Time t) { return t <= now; }));
}

}  // namespace ctwin
