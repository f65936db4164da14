// Fits of the latency-bandwidth ("alpha-beta") model t = alpha + bytes / bandwidth to
// measured (bytes, seconds) pairs, as nccl-tests or a GEMM sweep produce them.
#pragma once

#include <optional>
#include <span>

namespace ctwin::calibrate {

struct AlphaBetaFit {
  double alpha_s = 0;         // fixed latency
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes per second)
  double rms_rel_error = 0;   // root-mean-square of (fit - measured) / measured
};

// Weighted least squares minimising relative error, so small messages count as much as large.
// nullopt where the samples cannot separate latency from bandwidth: a time that is not positive
// (measured files may hold zeros), or fewer than two sizes far enough apart to tell the columns
// apart numerically. Throws std::invalid_argument only on spans of different lengths.
std::optional<AlphaBetaFit> fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds);

}  // namespace ctwin::calibrate
