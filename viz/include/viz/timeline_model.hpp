// The timeline viewer's model: everything that decides what a frame shows, in plain C++ with
// no GL or ImGui, so it is unit-tested and benchmarked on its own (Tracy's two phases: build
// draw lists here, then the GL viewer, viz/src/gl_render_list.cpp, only draws them).
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
//
// The model's sources, one concern each (viz/src/): timeline_model.cpp (construction),
// trace_index.cpp (per-lane index, visible range, busy time), layout.cpp (groups, labels,
// rows, --fold of identical ranks), utilization.cpp (utilization grids, minimap),
// comm_overlap.cpp (exposed vs overlapped communication, folded runs' time shares, the
// summary panel's rows), search.cpp,
// hit_test.cpp, and the frame builder: frame.cpp (backgrounds, labels, axis, overlays),
// frame_lanes.cpp (events and folding), frame_counters.cpp, frame_arrows.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/trace.hpp"
#include "viz/colors.hpp"
#include "viz/draw_list.hpp"
#include "viz/layout_metrics.hpp"
#include "viz/text_format.hpp"
#include "viz/view.hpp"

namespace ctwin::viz {

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
// Kinds that are communication (collectives and point-to-point), as TraceEvent::kind strings.
bool is_comm_kind(std::string_view kind);

// Communication time split by whether the same GPU's compute was busy meanwhile.
struct CommTotals {
  double exposed_ps = 0;     // communication while the GPU computes nothing
  double overlapped_ps = 0;  // communication hidden under compute
};

// Summed time of one op kind over a run of events.
struct KindShare {
  std::uint32_t kind = 0;  // interned string
  double ps = 0;
};

// The parallel dimensions `ctwin view --fold` folds, by name: tp, pp, dp, cp, ep.
// Returns false (and leaves `out` alone) for an unknown name; "none" is valid and folds nothing.
bool parse_fold_dims(std::string_view list, std::vector<std::string>& out, std::string& bad);
// The names parse_fold_dims accepts, for error messages.
inline constexpr std::string_view kFoldDimNames = "tp, pp, dp, cp, ep or none";

enum class RowKind : std::uint8_t { group_header, lane, counter, summary };

struct Row {
  RowKind kind;
  std::uint32_t index;  // group (header, summary), lane or counter track
  float y;              // top, relative to the first row
  float h;
};

// Groups of more lanes than this start collapsed (256 lanes are some 5,000 pixels of rows).
inline constexpr std::size_t kAutoCollapseLanes = 256;

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
  // Whole-run utilization (mean over lanes), kMinimapBins values in [0, 1].
  const std::vector<float>& overview() const { return overview_; }

  // Communication: an event of a comm kind is exposed where no compute event of the same GPU
  // (TraceLane::process) runs, overlapped where one does.
  bool is_comm(const TraceEvent& e) const { return comm_kind_[e.kind] != 0; }
  const CommTotals& comm_totals() const { return comm_totals_; }
  // Exposed picoseconds of one event (0 unless it is communication).
  double exposed_ps(std::uint32_t event) const;
  // Appends the exposed parts [a, b) of one communication event to `out`.
  void exposed_parts(std::uint32_t event, std::vector<std::pair<double, double>>& out) const;

  // Time per kind over events [first, last) of Trace::events (one lane's run), largest
  // first: exact per kind up to kShareExactMax events; above, exact per category (compute,
  // communication) from prefix sums, each category under the kind of its longest member
  // among kShareSamples evenly spaced ones. O(kShareExactMax) either way.
  static constexpr std::size_t kShareExactMax = 32;
  static constexpr std::size_t kShareSamples = 8;
  void time_shares(std::size_t first, std::size_t last, std::vector<KindShare>& out) const;

  // Folding identical ranks: lanes of GPUs whose parallel coordinates differ only in the
  // given dimensions (and with the same stream) are drawn as one lane, the rank with those
  // coordinates 0, labelled with the count. Needs the layout a training trace records in
  // Trace::summary ("tp_size", "tp_stride", ... over TraceLane::pid as the rank); returns the
  // number of lanes hidden (0 when the trace records no layout). Empty `dims` unfolds.
  std::size_t set_fold(std::span<const std::string> dims);
  // Lanes a drawn lane stands for (1 unless folded); 0 for a lane hidden by folding.
  std::uint32_t fold_count(std::uint32_t lane) const { return fold_count_.empty() ? 1 : fold_count_[lane]; }
  // Lanes drawn as rows (not hidden by folding).
  std::size_t visible_lanes() const;

  // The summary panel's rows: Trace::summary (less the rank strides, which only --fold
  // reads) and then this trace's communication per GPU, mean over the GPUs with events:
  // "trace_exposed_comm_s" and "trace_overlapped_comm_s". Label them with summary_label().
  std::vector<std::pair<std::string, double>> summary_rows() const;

  // Colour of an event (its kind's colour, cached per string).
  std::uint32_t color_of(const TraceEvent& e) const { return kind_colors_[e.kind]; }
  // Kinds present in the trace, in first-appearance order (for the legend).
  const std::vector<std::uint32_t>& kinds() const { return kinds_; }

  // Search by name (case-sensitive substring); returns the number of matching events.
  std::size_t set_search(std::string_view needle);
  bool name_matches(std::uint32_t name) const { return !search_.empty() && name_match_[name] != 0; }
  const std::string& search() const { return search_; }
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
  // Construction stages, in order (each reports its progress itself or through the caller).
  void index_events(const ProgressFn& report);  // trace_index.cpp: checks, sorts, indexes lanes
  void group_lanes();                           // layout.cpp: groups, counter tracks, labels
  void build_overview();                        // utilization.cpp: the minimap's whole-run bins
  void build_comm_overlap();                    // comm_overlap.cpp: compute-busy intervals per GPU
  void build_utilization_grid();                // utilization.cpp: per-group busy-time grid
  void layout();                                // layout.cpp: rows from groups and collapse state
  void build_lane(std::uint32_t lane, float y, const View& v, const Canvas& c, DrawList& out) const;
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
  std::vector<std::int64_t> comm_prefix_;   // events + 1: same, of communication events
  std::vector<std::uint32_t> kind_colors_;  // per string index
  std::vector<std::uint8_t> comm_kind_;     // per string index: 1 for a communication kind
  std::vector<std::uint32_t> lane_gpu_;     // per lane: index into gpu_busy_
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> gpu_busy_;  // merged compute intervals
  CommTotals comm_totals_;
  std::vector<std::uint32_t> fold_count_;                 // per lane, empty when nothing is folded
  std::vector<std::uint32_t> fold_rep_;                   // per lane: the lane drawn for it (itself unless hidden)
  mutable std::vector<KindShare> shares_;                 // scratch for a merged run's stacked bar
  mutable std::vector<std::pair<double, double>> parts_;  // scratch for exposed parts
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
  std::vector<std::uint32_t> matches_;  // matching events sorted by (start, lane)
  std::vector<std::string> lane_labels_, group_labels_, counter_labels_, counter_max_labels_;
  std::size_t summary_bins_ = 1024;
  double bin_ps_ = 1;
  std::vector<std::vector<double>> group_busy_;  // per group: busy ps before each grid point
  mutable std::vector<double> scratch_;          // per-lane busy time while building a summary row
  mutable std::vector<std::size_t> cursors_;     // per-lane search cursor for the same sweep
};

}  // namespace ctwin::viz
