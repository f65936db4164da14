#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "realrun/cpu_collectives.hpp"
#include "realrun/cuda_backend.hpp"

#include "tolerance.hpp"

using namespace ctwin::realrun;
using ctwin::test::abs_approx;

TEST_CASE("the CPU ring all-reduce sums every rank's buffer into every rank") {
  for (int n : {1, 2, 3, 8}) {
    const std::size_t len = 1000;  // not a multiple of n: uneven chunks
    std::vector<std::vector<float>> data(n, std::vector<float>(len));
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < len; ++i) data[r][i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
    }
    std::vector<std::span<float>> spans(data.begin(), data.end());
    const std::size_t sent = ring_all_reduce(spans);
    // Closed form: sum over r of (r+1) * (i % 7) = n(n+1)/2 * (i % 7).
    bool ok = true;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < len; ++i) ok = ok && data[r][i] == static_cast<float>(n * (n + 1) / 2 * (i % 7));
    }
    CHECK(ok);
    // Each rank sends 2(n-1)/n of the buffer: the all-reduce bus factor. Chunks are whole
    // elements, so each of the 2(n-1) chunks sent is within one float of len/n.
    const double expected = n == 1 ? 0.0 : 2.0 * (n - 1) / n * len * sizeof(float);
    CHECK(static_cast<double>(sent) == abs_approx(expected, 2.0 * (n - 1) * sizeof(float)));  // bytes
  }
}

TEST_CASE("the GPU backend is reported as built exactly when CUDA was found at configure time") {
#ifdef CTWIN_HAVE_CUDA
  CHECK(gpu_backend_built());
#else
  CHECK_FALSE(gpu_backend_built());
#endif
}
