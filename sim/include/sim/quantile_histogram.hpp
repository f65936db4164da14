// Streamed percentiles in memory flat in the sample count: a log-bucketed histogram (as
// DDSketch, Masson et al. 2019). Bucket i holds (gamma^(i-1), gamma^i] with
// gamma = (1 + a) / (1 - a); a bucket's estimate 2 gamma^i / (gamma + 1) is within a relative
// error a of every value in it. Memory grows with log(max/min), never with the count.
#pragma once

#include <cstdint>
#include <vector>

namespace ctwin {

class QuantileHistogram {
 public:
  // relative_error: the bound a on quantile estimates of positive values (0 < a < 0.5).
  explicit QuantileHistogram(double relative_error = 0.005);

  void add(double value);  // value >= 0 (0 and negatives count as 0)
  // Adds every sample of `other` (same relative error, else std::invalid_argument): afterwards
  // this histogram equals one fed both sample sets (buckets are counts, so merging is exact).
  void merge(const QuantileHistogram& other);
  std::int64_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double min() const { return min_; }
  double max() const { return max_; }
  double relative_error() const { return alpha_; }
  // The q-quantile (0 <= q <= 1) as the sample of rank ceil(q n) (1-based; rank 1 for q = 0)
  // of the sorted samples, within relative_error() of it (the min and max exactly); 0 when empty.
  double quantile(double q) const;

 private:
  double alpha_;
  double gamma_;
  double log_gamma_;
  std::int64_t count_ = 0;
  std::int64_t zeros_ = 0;
  double sum_ = 0;
  double min_ = 0;
  double max_ = 0;
  std::int32_t offset_ = 0;           // bucket index of counts_[0]
  std::vector<std::int64_t> counts_;  // grows to the range seen
};

}  // namespace ctwin
