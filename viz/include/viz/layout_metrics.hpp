// Pixel sizes of the viewer's layout. The window layout (canvas_layout, the GL viewer's
// panels), the frame builder and the tests' reference arithmetic all use these.
#pragma once

#include <cstddef>

namespace ctwin::viz {

inline constexpr float kToolbarHeight = 32;      // search box and buttons above the canvas
inline constexpr float kSidePanelWidth = 320;    // details, legend and summary on the right
inline constexpr float kAxisHeight = 26;         // time axis at the top of a canvas
inline constexpr float kMinimapHeight = 36;      // whole-run overview at the bottom of a canvas
inline constexpr float kLabelWidth = 168;        // lane names on the left of a canvas
inline constexpr float kGroupHeaderHeight = 20;  // one per TraceLane::group
inline constexpr float kLaneHeight = 18;         // an event row
inline constexpr float kExposedBandPx = 3;       // the red band over exposed communication
inline constexpr float kLaneGap = 2;             // space under each lane
inline constexpr float kLanePitch = kLaneHeight + kLaneGap;
inline constexpr float kCounterHeight = 30;  // a counter track (memory per GPU)
inline constexpr float kCounterPitch = kCounterHeight + kLaneGap;
inline constexpr float kSummaryColumnPx = 4;      // utilization bars of a collapsed group
inline constexpr float kMinVisiblePx = 3;         // narrower events are folded together
inline constexpr float kMaxFoldPx = 12;           // a folded run is cut here, so its colour stays local
inline constexpr float kLabelMinPx = 36;          // wider events get their name drawn
inline constexpr std::size_t kArrowBudget = 300;  // more on screen: only the selected op's
inline constexpr int kMinimapBins = 1024;         // resolution of the precomputed overview

}  // namespace ctwin::viz
