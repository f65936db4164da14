#include "calibrate/alpha_beta.hpp"

#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace ctwin::calibrate {

AlphaBetaFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds) {
  const auto n = static_cast<Eigen::Index>(bytes.size());
  if (bytes.size() != seconds.size() || n < 2) throw std::invalid_argument("fit_alpha_beta: need >= 2 paired samples");
  // Rows scaled by 1/t_i: minimises sum(((alpha + beta*b_i) - t_i) / t_i)^2.
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double t = seconds[static_cast<std::size_t>(i)];
    if (!(t > 0)) throw std::invalid_argument("fit_alpha_beta: times must be positive");
    a(i, 0) = 1.0 / t;
    a(i, 1) = bytes[static_cast<std::size_t>(i)] / t;
    y(i) = 1.0;
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(y);
  if (a.colPivHouseholderQr().rank() < 2) throw std::invalid_argument("fit_alpha_beta: need two distinct sizes");
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
