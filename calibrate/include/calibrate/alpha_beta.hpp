// Fits of the latency-bandwidth ("alpha-beta") model t = alpha + bytes / bandwidth to
// measured (bytes, seconds) pairs, as nccl-tests or a GEMM sweep produce them.
#pragma once

#include <span>

namespace ctwin::calibrate {

struct AlphaBetaFit {
  double alpha_s = 0;         // fixed latency
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes per second)
  double rms_rel_error = 0;   // root-mean-square of (fit - measured) / measured
};

// Weighted least squares minimising relative error, so small messages count as much as large.
// Throws std::invalid_argument with fewer than two distinct sizes.
AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds);

}  // namespace ctwin::calibrate
