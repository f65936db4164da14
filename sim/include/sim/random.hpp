// Deterministic, counter-based random numbers: a value depends only on its key, so a draw
// (a kernel's jitter, a straggler) is reproducible whatever order the simulation asks in.
#pragma once

#include <cstdint>

namespace ctwin {

// splitmix64's output function (Steele, Lea and Flood 2014): a bijective 64-bit mix.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1), never 0 or 1, from the top 53 bits of mix64(key).
constexpr double uniform01(std::uint64_t key) { return (static_cast<double>(mix64(key) >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace ctwin
