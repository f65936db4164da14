// The timeline viewer's model: everything that decides what a frame shows, in plain C++ with
// no GL or ImGui, so it is unit-tested and benchmarked on its own (Tracy's two phases: build
// draw lists here, then viz/src/viewer.cpp only draws them).
//
// A frame is built into a DrawList of rectangles, lines and text items in pixel coordinates.
// Its cost is bounded by the screen, not by the trace:
//   - each lane keeps its events sorted by start; the visible range is found by binary search
//     (start >= t0 - the lane's longest event, start < t1);
//   - a run of events narrower than kMinVisiblePx is folded into one item, found by jumping
//     with binary search, so a lane costs O(width / kMinVisiblePx * log n) however dense;
//   - lanes outside the vertical scroll window are skipped;
//   - the DrawList and scratch buffers keep their capacity between frames (no allocation
//     per frame once warmed up).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.hpp"

namespace ctwin::viz {

// ---------------------------------------------------------------- layout constants (pixels)
// The whole-window layout (viewer.cpp) and the tests' reference arithmetic both use these.
inline constexpr float kToolbarHeight = 32;      // search box and buttons above the canvas
inline constexpr float kSidePanelWidth = 320;    // details, legend and summary on the right
inline constexpr float kAxisHeight = 26;         // time axis at the top of a canvas
inline constexpr float kMinimapHeight = 36;      // whole-run overview at the bottom of a canvas
inline constexpr float kLabelWidth = 168;        // lane names on the left of a canvas
inline constexpr float kGroupHeaderHeight = 20;  // one per TraceLane::group
inline constexpr float kLaneHeight = 18;         // an event row
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

// ---------------------------------------------------------------- colours
// Colours are 0xAABBGGRR (ImGui's IM_COL32 layout): r in the low byte.
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
inline constexpr std::uint32_t kRangeSelect = rgba(120, 170, 255, 60);
}  // namespace palette

// The colour of an op kind: a fixed table for the kinds ClusterTwin writes (compute kinds
// warm, collectives cool, point-to-point green), a stable hash of the name for any other.
std::uint32_t kind_color(std::string_view kind);
// The kinds the fixed table knows, in legend order.
std::span<const std::string_view> known_kinds();

// ---------------------------------------------------------------- text
// "0", "12.5 ns", "3.25 ms", "1.2 s": picoseconds in the unit that keeps 1-3 integer digits.
std::string format_time(double ps);
// Same into a caller's buffer; returns the length written (no allocation).
std::size_t format_time(double ps, char* buf, std::size_t size);
// "512 B", "1.5 KiB", "80 GiB".
std::string format_bytes(double bytes);
// "1.2 GFLOP", "3.4 TFLOP".
std::string format_flops(double flops);

// ---------------------------------------------------------------- draw lists
enum class ItemKind : std::uint8_t {
  background,    // canvas, lane and label backgrounds
  event,         // one op: `event` is its index in Trace::events
  merged,        // `count` ops folded together, first is `event`
  group_header,  // `index` is the group
  summary,       // utilization bar of a collapsed group (`index` is the group)
  counter,       // counter bar (`index` is the counter track)
  axis,
  minimap,
  overlay,  // selection, hover and search outlines
};

struct DrawRect {
  float x0, y0, x1, y1;
  std::uint32_t color;
  ItemKind kind;
  bool filled = true;  // false: outline only
  std::uint32_t event = kNoIndex;
  std::uint32_t count = 0;  // ops covered (event, merged)
  std::uint32_t index = kNoIndex;
};

struct DrawLine {
  float x0, y0, x1, y1;
  std::uint32_t color;
  float thickness;
  bool arrow_head = false;  // a head at (x1, y1)
};

struct DrawText {
  float x, y;
  std::uint32_t color;
  float clip_x0, clip_x1;        // drawn clipped to [clip_x0, clip_x1)
  std::uint32_t offset, length;  // into DrawList::text
};

struct DrawList {
  std::vector<DrawRect> rects;  // in draw order
  std::vector<DrawLine> lines;  // drawn after the rects
  std::vector<DrawText> texts;  // drawn last
  std::string text;             // the characters of all texts

  void clear();
  void reserve(std::size_t rects, std::size_t lines, std::size_t texts, std::size_t chars);
  std::string_view text_of(const DrawText& t) const { return std::string_view(text).substr(t.offset, t.length); }
  void add_text(float x, float y, std::uint32_t color, float clip_x0, float clip_x1, std::string_view s);
};

// ---------------------------------------------------------------- view
// Where a trace is drawn on the screen and which part of it is shown.
struct Canvas {
  float x = 0, y = 0, w = 0, h = 0;
};

struct View {
  double t0_ps = 0;      // time at the left edge of the event area
  double ps_per_px = 1;  // zoom
  float scroll_y = 0;    // pixels of rows scrolled off the top

  double time_at(const Canvas& c, float x) const { return t0_ps + (x - c.x - kLabelWidth) * ps_per_px; }
  float x_at(const Canvas& c, double t_ps) const {
    return static_cast<float>(c.x + kLabelWidth + (t_ps - t0_ps) / ps_per_px);
  }
  // The time shown at the right edge of the event area.
  double t1_ps(const Canvas& c) const { return t0_ps + (c.w - kLabelWidth) * ps_per_px; }
};

// Zoom by `factor` (< 1 zooms in) keeping the time under `x` where it is.
void zoom_around(View& v, const Canvas& c, float x, double factor);
// Show [t0, t1) across the event area.
void show_range(View& v, const Canvas& c, double t0_ps, double t1_ps);

struct FrameOptions {
  std::uint32_t selected_event = kNoIndex;
  std::uint32_t hovered_event = kNoIndex;
  bool arrows = true;
  bool counters = true;
  bool minimap = true;
  float range_x0 = 0, range_x1 = 0;  // a drag-selection being made, drawn when x1 > x0
  std::string_view title;            // shown in the axis' left cell instead of the view's span
};

// ---------------------------------------------------------------- model
enum class RowKind : std::uint8_t { group_header, lane, counter, summary };

struct Row {
  RowKind kind;
  std::uint32_t index;  // group (header, summary), lane or counter track
  float y;              // top, relative to the first row
  float h;
};

struct Group {
  std::uint32_t name = 0;               // interned string (TraceLane::group)
  std::vector<std::uint32_t> lanes;     // in lane order
  std::vector<std::uint32_t> counters;  // counter tracks of this group's processes
  bool collapsed = false;
};

struct Hit {
  RowKind row_kind = RowKind::lane;
  std::uint32_t row_index = kNoIndex;  // lane, counter or group
  std::uint32_t event = kNoIndex;      // first event under the cursor
  std::uint32_t count = 0;             // events in the item under the cursor (merged runs > 1)
};

// Progress of a long operation: fraction in [0, 1] and a stage name; may be called from a
// background thread.
using ProgressFn = std::function<void(double fraction, const char* stage)>;

class TimelineModel {
 public:
  // Takes the trace; sorts its events by (lane, start) if they are not already.
  explicit TimelineModel(Trace trace, const ProgressFn& progress = {});

  const Trace& trace() const { return trace_; }
  std::int64_t begin_ps() const { return begin_ps_; }
  std::int64_t end_ps() const { return end_ps_; }

  // Events of one lane, sorted by start, and their indices in Trace::events.
  std::span<const TraceEvent> lane_events(std::uint32_t lane) const;
  std::size_t lane_first(std::uint32_t lane) const { return lane_begin_[lane]; }
  // Indices [first, last) into Trace::events of the lane's events overlapping [t0, t1).
  std::pair<std::size_t, std::size_t> visible_range(std::uint32_t lane, double t0_ps, double t1_ps) const;
  // Busy picoseconds of a lane in [0, t) (events assumed not to overlap within a lane).
  double busy_before(std::uint32_t lane, double t_ps) const;
  // Same, for a left-to-right sweep: `cursor` starts at an index whose start is < t_ps (or
  // the lane's first) and is advanced; each call gallops forward from it.
  double busy_before(std::uint32_t lane, double t_ps, std::size_t& cursor) const;
  // The event of `lane` under time t, allowing `tolerance_ps` either side; the nearest one.
  std::uint32_t event_at(std::uint32_t lane, double t_ps, double tolerance_ps) const;

  const std::vector<Group>& groups() const { return groups_; }
  const std::vector<Row>& rows() const { return rows_; }
  float content_height() const { return content_height_; }
  void set_collapsed(std::uint32_t group, bool collapsed);
  void set_all_collapsed(bool collapsed);
  // The row a lane is drawn in (its group's summary row when collapsed).
  std::uint32_t row_of_lane(std::uint32_t lane) const { return lane_row_[lane]; }
  const std::string& lane_label(std::uint32_t lane) const { return lane_labels_[lane]; }
  const std::string& group_label(std::uint32_t group) const { return group_labels_[group]; }
  const std::string& counter_label(std::uint32_t counter) const { return counter_labels_[counter]; }
  double counter_max(std::uint32_t counter) const { return counter_max_[counter]; }
  // Whole-run utilization (mean over lanes), kMinimapBins values in [0, 1].
  const std::vector<float>& overview() const { return overview_; }

  // Colour of an event (its kind's colour, cached per string).
  std::uint32_t color_of(const TraceEvent& e) const { return kind_colors_[e.kind]; }
  // Kinds present in the trace, in first-appearance order (for the legend).
  const std::vector<std::uint32_t>& kinds() const { return kinds_; }

  // Search by name (case-sensitive substring); returns the number of matching events.
  std::size_t set_search(std::string_view needle);
  bool name_matches(std::uint32_t name) const { return !search_.empty() && name_match_[name] != 0; }
  const std::string& search() const { return search_; }
  // Matching events sorted by (start, lane).
  const std::vector<std::uint32_t>& matches() const { return matches_; }
  // The next (or previous) match strictly after (before) time t, wrapping; kNoIndex if none.
  std::uint32_t next_match(double t_ps, bool forward) const;

  // Fills `out` with the frame: backgrounds, axis, rows, events, counters, arrows, minimap.
  void build_frame(const View& view, const Canvas& canvas, const FrameOptions& opt, DrawList& out) const;
  // The item under the pixel (x, y) of a frame built with the same view and canvas.
  Hit hit_test(const View& view, const Canvas& canvas, float x, float y) const;
  // The row under y, or nullptr.
  const Row* row_at(const View& view, const Canvas& canvas, float y) const;
  // The vertical extent of the rows area of a canvas.
  static float rows_top(const Canvas& c) { return c.y + kAxisHeight; }
  static float rows_bottom(const Canvas& c) { return c.y + c.h - kMinimapHeight; }
  // The minimap maps the whole run onto the event area's width.
  double minimap_time_at(const Canvas& c, float x) const;
  float minimap_x_at(const Canvas& c, double t_ps) const;

 private:
  void layout();
  void build_axis(const View& v, const Canvas& c, DrawList& out) const;
  void build_lane(std::uint32_t lane, float y, const View& v, const Canvas& c, const FrameOptions& opt,
                  DrawList& out) const;
  void build_summary(const Group& g, std::uint32_t gi, float y, const View& v, const Canvas& c, DrawList& out) const;
  void build_counter(std::uint32_t counter, float y, const View& v, const Canvas& c, DrawList& out) const;
  void build_arrows(const View& v, const Canvas& c, const FrameOptions& opt, DrawList& out) const;
  void build_minimap(const View& v, const Canvas& c, DrawList& out) const;
  float row_y(const View& v, const Canvas& c, std::uint32_t row) const;

  Trace trace_;
  std::int64_t begin_ps_ = 0, end_ps_ = 1;
  std::vector<std::size_t> lane_begin_;     // lanes + 1 offsets into trace_.events
  std::vector<std::int64_t> lane_max_dur_;  // longest event per lane
  std::vector<std::int64_t> busy_prefix_;   // events + 1: sum of durations before index i
  std::vector<std::uint32_t> kind_colors_;  // per string index
  std::vector<std::uint32_t> kinds_;
  std::vector<Group> groups_;
  std::vector<std::uint32_t> lane_group_;
  std::vector<Row> rows_;
  std::vector<std::uint32_t> lane_row_;
  float content_height_ = 0;
  std::vector<double> counter_max_;
  std::vector<float> overview_;
  std::int64_t arrow_max_span_ = 0;
  std::string search_;
  std::vector<std::uint8_t> name_match_;
  std::vector<std::uint32_t> matches_;
  std::vector<std::string> lane_labels_, group_labels_, counter_labels_, counter_max_labels_;
  std::size_t summary_bins_ = 1024;
  double bin_ps_ = 1;
  std::vector<std::vector<double>> group_busy_;  // per group: busy ps before each grid point
  mutable std::vector<double> scratch_;          // per-lane busy time while building a summary row
  mutable std::vector<std::size_t> cursors_;     // per-lane search cursor for the same sweep
};

// Reads a .ctt or .json trace, reporting the fraction of the file read.
Trace read_trace_with_progress(const std::string& path, const ProgressFn& progress);

// Loads a trace and builds its model on a background thread; the UI polls progress().
class TraceLoader {
 public:
  explicit TraceLoader(std::string path);
  ~TraceLoader();
  TraceLoader(const TraceLoader&) = delete;
  TraceLoader& operator=(const TraceLoader&) = delete;

  bool done() const { return done_.load(std::memory_order_acquire); }
  double progress() const { return progress_.load(std::memory_order_relaxed); }
  std::string stage() const;
  // After done(): the model, or rethrows the load's exception (InputError for a bad file).
  std::unique_ptr<TimelineModel> take();
  // Blocks until done.
  void wait();

 private:
  struct State;
  std::string path_;
  std::atomic<bool> done_{false};
  std::atomic<double> progress_{0};
  std::unique_ptr<State> state_;
};

}  // namespace ctwin::viz
