// Colour arithmetic the frame builder uses on palette and kind colours.
#pragma once

#include <cmath>
#include <cstdint>

#include "viz/colors.hpp"

namespace ctwin::viz {

inline std::uint32_t darken(std::uint32_t c, float f) {
  auto s = [f](std::uint8_t v) { return static_cast<std::uint8_t>(static_cast<float>(v) * f); };
  return rgba(s(red_of(c)), s(green_of(c)), s(blue_of(c)), static_cast<std::uint8_t>(c >> 24));
}

// a * (1 - t) + b * t per channel, opaque.
inline std::uint32_t blend(std::uint32_t a, std::uint32_t b, float t) {
  auto m = [t](std::uint8_t x, std::uint8_t y) {
    return static_cast<std::uint8_t>(std::lround(static_cast<float>(x) * (1 - t) + static_cast<float>(y) * t));
  };
  return rgba(m(red_of(a), red_of(b)), m(green_of(a), green_of(b)), m(blue_of(a), blue_of(b)));
}

// Overlapped communication: the kind's colour faded towards the lane background.
inline std::uint32_t fade(std::uint32_t c) { return blend(c, palette::kLaneBackground, 0.6f); }

}  // namespace ctwin::viz
