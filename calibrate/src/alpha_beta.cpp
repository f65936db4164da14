#include "calibrate/alpha_beta.hpp"

#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace ctwin::calibrate {

std::optional<AlphaBetaFit> fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds) {
  const auto n = static_cast<Eigen::Index>(bytes.size());
  if (bytes.size() != seconds.size()) throw std::invalid_argument("fit_alpha_beta: bytes and seconds differ in length");
  if (n < 2) return std::nullopt;
  // Rows scaled by 1/t_i: minimises sum(((alpha + beta*b_i) - t_i) / t_i)^2.
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double t = seconds[static_cast<std::size_t>(i)];
    if (!(t > 0) || !std::isfinite(t)) return std::nullopt;
    a(i, 0) = 1.0 / t;
    a(i, 1) = bytes[static_cast<std::size_t>(i)] / t;
    y(i) = 1.0;
  }
  const auto qr = a.colPivHouseholderQr();
  if (qr.rank() < 2) return std::nullopt;
  const Eigen::Vector2d x = qr.solve(y);
  if (!x.allFinite()) return std::nullopt;
  AlphaBetaFit f;
  f.alpha_s = x(0);
  f.bandwidth_gbps = x(1) > 0 ? 1.0 / x(1) / 1e9 : INFINITY;
  double ss = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double r = (a.row(i).dot(x)) - 1.0;
    ss += r * r;
  }
  f.rms_rel_error = std::sqrt(ss / static_cast<double>(n));
  return f;
}

}  // namespace ctwin::calibrate
