#include "realrun/cpu_collectives.hpp"

#include <barrier>
#include <stdexcept>
#include <thread>

namespace ctwin::realrun {

std::size_t ring_all_reduce(std::vector<std::span<float>> buffers) {
  const std::size_t n = buffers.size();
  if (n == 0) return 0;
  const std::size_t len = buffers[0].size();
  for (const auto& b : buffers) {
    if (b.size() != len) throw std::invalid_argument("ring_all_reduce: buffers differ in length");
  }
  if (n == 1) return 0;
  // Chunk c spans [c*len/n, (c+1)*len/n).
  auto lo = [&](std::size_t c) { return c * len / n; };
  auto hi = [&](std::size_t c) { return (c + 1) * len / n; };
  std::barrier sync(static_cast<std::ptrdiff_t>(n));
  std::vector<std::size_t> sent(n, 0);
  auto rank_main = [&](std::size_t r) {
    const std::size_t left = (r + n - 1) % n;
    // Reduce-scatter: at step s, rank r receives chunk (r - s - 1) from its left neighbour and adds it.
    for (std::size_t s = 0; s + 1 < n; ++s) {
      const std::size_t c = (r + 2 * n - s - 1) % n;
      for (std::size_t i = lo(c); i < hi(c); ++i) buffers[r][i] += buffers[left][i];
      sent[left] += (hi(c) - lo(c)) * sizeof(float);
      sync.arrive_and_wait();
    }
    // All-gather: rank r owns the full sum of chunk (r + 1) % n; pass completed chunks along.
    for (std::size_t s = 0; s + 1 < n; ++s) {
      const std::size_t c = (r + 2 * n - s) % n;
      for (std::size_t i = lo(c); i < hi(c); ++i) buffers[r][i] = buffers[left][i];
      sent[left] += (hi(c) - lo(c)) * sizeof(float);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::jthread> threads;
  threads.reserve(n);
  for (std::size_t r = 0; r < n; ++r) threads.emplace_back(rank_main, r);
  threads.clear();  // joins
  return sent[0];
}

}  // namespace ctwin::realrun
