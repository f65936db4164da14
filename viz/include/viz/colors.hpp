// Colours of the viewer: packed RGBA, the fixed palette, and the colour of each op kind.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace ctwin::viz {

// Colours are 0xAABBGGRR: r in the low byte (the layout ImGui's IM_COL32 uses, so the GL
// side passes them through unchanged).
constexpr std::uint32_t rgba(std::uint8_t r, std::uint8_t g, std::uint8_t b, std::uint8_t a = 255) {
  return static_cast<std::uint32_t>(r) | static_cast<std::uint32_t>(g) << 8 | static_cast<std::uint32_t>(b) << 16 |
         static_cast<std::uint32_t>(a) << 24;
}
constexpr std::uint8_t red_of(std::uint32_t c) { return static_cast<std::uint8_t>(c & 0xff); }
constexpr std::uint8_t green_of(std::uint32_t c) { return static_cast<std::uint8_t>((c >> 8) & 0xff); }
constexpr std::uint8_t blue_of(std::uint32_t c) { return static_cast<std::uint8_t>((c >> 16) & 0xff); }

namespace palette {
inline constexpr std::uint32_t kBackground = rgba(24, 26, 31);
inline constexpr std::uint32_t kLaneBackground = rgba(33, 36, 43);
inline constexpr std::uint32_t kLabelBackground = rgba(28, 30, 36);
inline constexpr std::uint32_t kGroupHeader = rgba(48, 53, 64);
inline constexpr std::uint32_t kAxisBackground = rgba(40, 44, 52);
inline constexpr std::uint32_t kGrid = rgba(60, 65, 76);
inline constexpr std::uint32_t kText = rgba(220, 224, 232);
inline constexpr std::uint32_t kDimText = rgba(150, 156, 168);
inline constexpr std::uint32_t kCounterFill = rgba(86, 156, 214, 200);
inline constexpr std::uint32_t kSummaryFill = rgba(120, 190, 140);
inline constexpr std::uint32_t kMinimapFill = rgba(110, 140, 200);
inline constexpr std::uint32_t kMinimapWindow = rgba(255, 255, 255, 60);
inline constexpr std::uint32_t kArrow = rgba(235, 235, 245, 170);
inline constexpr std::uint32_t kSelection = rgba(255, 255, 255);
inline constexpr std::uint32_t kHover = rgba(255, 255, 255, 140);
inline constexpr std::uint32_t kSearchHit = rgba(255, 230, 0);
inline constexpr std::uint32_t kExposedBand = rgba(255, 70, 70);  // top band of exposed communication
inline constexpr std::uint32_t kRangeSelect = rgba(120, 170, 255, 60);
}  // namespace palette

// The colour of an op kind (TraceEvent::kind, a string): a fixed table for the kinds
// ClusterTwin writes (compute kinds warm, collectives cool, point-to-point green), a stable
// hash of the name for any other.
std::uint32_t kind_color(std::string_view kind);
// The kinds the fixed table knows, in legend order.
std::span<const std::string_view> known_kinds();

}  // namespace ctwin::viz
