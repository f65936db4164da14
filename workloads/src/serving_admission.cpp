#include "workloads/serving_admission.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace ctwin {

TokenBucket::TokenBucket(double rate_per_s, double burst) : rate_per_s_(rate_per_s), burst_(burst), tokens_(burst) {
  if (!(rate_per_s > 0) || !(burst >= 1)) throw std::invalid_argument("TokenBucket: need rate > 0 and burst >= 1");
}

double TokenBucket::tokens(Time now) const {
  const double elapsed_s = static_cast<double>((now - last_).ps) * 1e-12;
  return std::min(burst_, tokens_ + rate_per_s_ * std::max(0.0, elapsed_s));
}

bool TokenBucket::take(Time now) {
  tokens_ = tokens(now);
  last_ = std::max(last_, now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

std::int64_t AdmissionCounters::count(AdmissionResult r) const {
  std::int64_t n = 0;
  for (std::int64_t x : by_result[static_cast<std::size_t>(r)]) n += x;
  return n;
}

std::int64_t AdmissionCounters::count(AdmissionResult r, int cls) const {
  const auto& v = by_result[static_cast<std::size_t>(r)];
  return cls >= 0 && static_cast<std::size_t>(cls) < v.size() ? v[static_cast<std::size_t>(cls)] : 0;
}

std::int64_t AdmissionCounters::rejected() const {
  std::int64_t n = 0;
  for (std::size_t r = 1; r < kAdmissionResults; ++r) n += count(static_cast<AdmissionResult>(r));
  return n;
}

Admission::Admission(AdmissionSpec spec) : spec_(std::move(spec)) {
  for (const AdmissionClass& c : spec_.classes) {
    if (!(c.shed_fraction > 0 && c.shed_fraction <= 1))
      throw std::invalid_argument("Admission: shed_fraction must be in (0, 1]");
    if (c.rate_limit)
      buckets_.emplace_back(TokenBucket(c.rate_limit->rate_per_s, c.rate_limit->burst));
    else
      buckets_.emplace_back();
  }
}

const AdmissionClass& Admission::cls(int c) const {
  static const AdmissionClass defaults;
  return c >= 0 && static_cast<std::size_t>(c) < spec_.classes.size() ? spec_.classes[static_cast<std::size_t>(c)]
                                                                      : defaults;
}

void Admission::observe_ttft(Time at, double ttft_s) { ttfts_.emplace_back(at, ttft_s); }

std::optional<double> Admission::ttft_p90(Time now) {
  const Time cutoff = now - seconds(spec_.ttft_window_s);
  while (!ttfts_.empty() && ttfts_.front().first <= cutoff) ttfts_.pop_front();
  std::vector<double> v;
  // Observations may come out of order: the front's pruning is only a saving, the window is this.
  for (const auto& [at, ttft] : ttfts_)
    if (at > cutoff && at <= now) v.push_back(ttft);
  if (v.empty()) return std::nullopt;
  // Nearest rank: the ceil(0.9 n)-th smallest.
  const std::size_t k = static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

AdmissionResult Admission::admit(const Request& r, Time now, const FleetView& fleet) {
  const AdmissionClass& c = cls(r.cls);
  const double f = c.shed_fraction;
  AdmissionResult result = AdmissionResult::accepted;
  std::optional<TokenBucket>* bucket = r.cls >= 0 && static_cast<std::size_t>(r.cls) < buckets_.size()
                                           ? &buckets_[static_cast<std::size_t>(r.cls)]
                                           : nullptr;
  if (bucket && *bucket && !(*bucket)->take(now)) {
    result = AdmissionResult::rate_limit;
  } else if (spec_.max_queued > 0 && static_cast<double>(fleet.queued) >= static_cast<double>(spec_.max_queued) * f) {
    result = AdmissionResult::queue_length;
  } else if (spec_.max_wait_s > 0 && fleet.estimated_wait_s > spec_.max_wait_s * f) {
    result = AdmissionResult::estimated_wait;
  } else if (spec_.max_ttft_p90_s > 0) {
    const std::optional<double> p90 = ttft_p90(now);
    if (p90 && *p90 > spec_.max_ttft_p90_s * f) result = AdmissionResult::ttft_p90;
  }
  auto& counts = counters_.by_result[static_cast<std::size_t>(result)];
  const std::size_t k = static_cast<std::size_t>(std::max(0, r.cls));
  if (counts.size() <= k) counts.resize(k + 1, 0);
  ++counts[k];
  return result;
}

}  // namespace ctwin
