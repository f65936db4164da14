#include "sim/quantile_histogram.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ctwin {

QuantileHistogram::QuantileHistogram(double relative_error)
    : alpha_(relative_error),
      gamma_((1 + relative_error) / (1 - relative_error)),
      log_gamma_(std::log((1 + relative_error) / (1 - relative_error))) {
  if (!(relative_error > 0 && relative_error < 0.5))
    throw std::invalid_argument("QuantileHistogram: relative error must be in (0, 0.5)");
}

void QuantileHistogram::add(double value) {
  if (!(value > 0)) value = 0;
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += value;
  if (value == 0) {
    ++zeros_;
    return;
  }
  // Bucket i = ceil(log_gamma(value)): value lies in (gamma^(i-1), gamma^i].
  const auto i = static_cast<std::int32_t>(std::ceil(std::log(value) / log_gamma_));
  if (counts_.empty()) {
    offset_ = i;
    counts_.assign(1, 0);
  } else if (i < offset_) {
    counts_.insert(counts_.begin(), static_cast<std::size_t>(offset_ - i), 0);
    offset_ = i;
  } else if (i - offset_ >= static_cast<std::int32_t>(counts_.size())) {
    counts_.resize(static_cast<std::size_t>(i - offset_ + 1), 0);
  }
  ++counts_[static_cast<std::size_t>(i - offset_)];
}

void QuantileHistogram::merge(const QuantileHistogram& other) {
  if (other.alpha_ != alpha_) throw std::invalid_argument("QuantileHistogram::merge: relative errors differ");
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
  zeros_ += other.zeros_;
  if (other.counts_.empty()) return;
  if (counts_.empty()) {
    offset_ = other.offset_;
    counts_ = other.counts_;
    return;
  }
  const std::int32_t lo = std::min(offset_, other.offset_);
  const std::int32_t hi = std::max(offset_ + static_cast<std::int32_t>(counts_.size()),
                                   other.offset_ + static_cast<std::int32_t>(other.counts_.size()));
  if (lo < offset_) counts_.insert(counts_.begin(), static_cast<std::size_t>(offset_ - lo), 0);
  offset_ = lo;
  counts_.resize(static_cast<std::size_t>(hi - lo), 0);
  for (std::size_t k = 0; k < other.counts_.size(); ++k)
    counts_[static_cast<std::size_t>(other.offset_ - offset_) + k] += other.counts_[k];
}

double QuantileHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(q * static_cast<double>(count_))));
  if (rank == 1) return min_;  // the extremes are kept exactly
  if (rank == count_) return max_;
  std::int64_t seen = zeros_;
  if (rank <= seen) return 0;
  for (std::size_t k = 0; k < counts_.size(); ++k) {
    seen += counts_[k];
    if (seen >= rank) {
      const double est = 2 * std::pow(gamma_, static_cast<double>(offset_) + static_cast<double>(k)) / (gamma_ + 1);
      return std::clamp(est, min_, max_);
    }
  }
  return max_;
}

}  // namespace ctwin
