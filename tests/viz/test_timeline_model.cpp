// The viewer's frame-building model: visible-range search, folding of narrow events, layout,
// hit-testing, search and loading, each against a brute-force or hand-computed reference.
#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "sim/error.hpp"
#include "sim/trace.hpp"
#include "viz/timeline_model.hpp"
#include "viz/trace_loader.hpp"

#include "tolerance.hpp"
#include "trace_events.hpp"

// The model is pure data, usable without GL: none of its headers may pull in OpenGL, GLFW
// or ImGui (the GL side's headers are viz/src/gl_*.hpp and viz/src/viewer_app.hpp).
#if defined(IMGUI_VERSION) || defined(GLFW_VERSION_MAJOR) || defined(GL_VERSION_1_1) || defined(__gl_h_)
#error "a viz model header includes GL, GLFW or ImGui"
#endif

using namespace ctwin;
using ctwin::test::ev;
using ctwin::test::rel_approx;
using namespace ctwin::viz;

namespace {

// One lane of n back-to-back events with random durations and gaps, deterministic.
Trace dense_trace(std::size_t n, std::uint32_t lanes = 1) {
  Trace t;
  for (std::uint32_t l = 0; l < lanes; ++l) t.add_lane("gpu " + std::to_string(l), "compute", "node 0", l, 0);
  const auto gemm = t.intern("gemm"), name = t.intern("op");
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> dur(1000, 100000), gap(0, 20000);
  for (std::uint32_t l = 0; l < lanes; ++l) {
    std::int64_t now = 0;
    for (std::size_t i = 0; i < n; ++i) {
      now += gap(rng);
      t.events.push_back(ev(l, now, dur(rng), name, gemm));
      now += t.events.back().dur_ps;
    }
  }
  return t;
}

Canvas canvas(float w = 1168, float h = 600) { return Canvas{0, 0, w, h}; }

}  // namespace

TEST_CASE("visible_range returns exactly the events overlapping the window (brute-force reference)") {
  TimelineModel m(dense_trace(5000));
  const auto& evs = m.trace().events;
  std::mt19937_64 rng(3);
  const double end = static_cast<double>(m.end_ps());
  std::uniform_real_distribution<double> u(-0.1 * end, 1.1 * end);
  for (int trial = 0; trial < 200; ++trial) {
    double a = u(rng), b = u(rng);
    if (a > b) std::swap(a, b);
    const auto [first, last] = m.visible_range(0, a, b);
    std::size_t expect_first = evs.size(), expect_count = 0;
    for (std::size_t i = 0; i < evs.size(); ++i) {
      const double s = static_cast<double>(evs[i].start_ps), f = s + static_cast<double>(evs[i].dur_ps);
      if (f > a && s < b) {
        expect_first = std::min(expect_first, i);
        ++expect_count;
      }
    }
    CHECK(last - first == expect_count);
    if (expect_count) CHECK(first == expect_first);
  }
}

TEST_CASE("a lane of 100k events zoomed out draws at most width/kMinVisiblePx items and accounts for every event") {
  TimelineModel m(dense_trace(100000));
  const Canvas c = canvas();
  View v;
  show_range(v, c, static_cast<double>(m.begin_ps()), static_cast<double>(m.end_ps()));
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  std::size_t items = 0, covered = 0;
  for (const auto& r : list.rects) {
    if (r.kind == ItemKind::event || r.kind == ItemKind::merged) {
      ++items;
      covered += r.count;
    }
  }
  const float width = c.w - kLabelWidth;
  CHECK(items > 0);
  CHECK(items <= static_cast<std::size_t>(width / kMinVisiblePx) + 1);
  CHECK(covered == 100000);  // folded counts add up to the lane's events: none lost, none twice
}

TEST_CASE("folded runs and single events partition the visible events in order at every zoom") {
  TimelineModel m(dense_trace(20000));
  const Canvas c = canvas();
  const double span = static_cast<double>(m.end_ps() - m.begin_ps());
  for (double frac : {1.0, 0.3, 0.05, 0.004}) {
    View v;
    show_range(v, c, span * 0.2, span * 0.2 + span * frac);
    DrawList list;
    m.build_frame(v, c, FrameOptions{}, list);
    const auto [a, b] = m.visible_range(0, v.t0_ps, v.t1_ps(c));
    std::size_t next = a;
    bool contiguous = true;
    for (const auto& r : list.rects) {
      if (r.kind != ItemKind::event && r.kind != ItemKind::merged) continue;
      contiguous = contiguous && r.event == next;
      next = r.event + r.count;
    }
    CAPTURE(frac);
    CHECK(contiguous);
    CHECK(next == b);
  }
}

TEST_CASE("a wide event is drawn at the pixels its start and end map to") {
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  const auto gemm = t.intern("gemm"), n = t.intern("qkv_proj");
  t.events.push_back(ev(0, 100'000'000, 200'000'000, n, gemm));  // 100 us .. 300 us
  TimelineModel m(std::move(t));
  const Canvas c = canvas(168 + 1000, 400);
  View v;
  show_range(v, c, 0, 1e9);  // 1 ms over 1000 px: 1 us per pixel
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  const auto it =
      std::find_if(list.rects.begin(), list.rects.end(), [](const DrawRect& r) { return r.kind == ItemKind::event; });
  REQUIRE(it != list.rects.end());
  CHECK(it->x0 == rel_approx(168 + 100, 1e-9));
  CHECK(it->x1 == rel_approx(168 + 300, 1e-9));
  CHECK(it->y0 == rel_approx(kAxisHeight + kGroupHeaderHeight, 1e-9));
  CHECK(it->y1 == rel_approx(kAxisHeight + kGroupHeaderHeight + kLaneHeight, 1e-9));
  CHECK(it->color == kind_color("gemm"));
  // Its name is drawn inside it.
  bool named = false;
  for (const auto& tx : list.texts) named = named || (list.text_of(tx) == "qkv_proj" && tx.x > it->x0 && tx.x < it->x1);
  CHECK(named);
}

TEST_CASE("lanes outside the scroll window produce no items") {
  TimelineModel m(dense_trace(200, 100));  // 100 lanes, 20 px each: 2000 px of rows
  const Canvas c = canvas(1168, 300);      // room for about 11 rows
  View v;
  show_range(v, c, static_cast<double>(m.begin_ps()), static_cast<double>(m.end_ps()));
  v.scroll_y = 500;
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  std::vector<std::uint32_t> lanes;
  for (const auto& r : list.rects) {
    if (r.kind == ItemKind::event || r.kind == ItemKind::merged) lanes.push_back(m.trace().events[r.event].lane);
  }
  REQUIRE(!lanes.empty());
  // Row 0 is the group header; lane k sits at y = 20 + 20 k.
  const auto lo = static_cast<std::uint32_t>(std::floor((500 - kGroupHeaderHeight) / kLanePitch));
  const auto hi = static_cast<std::uint32_t>(
      std::ceil((500 + TimelineModel::rows_bottom(c) - TimelineModel::rows_top(c) - kGroupHeaderHeight) / kLanePitch));
  CHECK(*std::min_element(lanes.begin(), lanes.end()) >= lo);
  CHECK(*std::max_element(lanes.begin(), lanes.end()) <= hi);
}

TEST_CASE("building the same frame twice does not reallocate the draw list") {
  TimelineModel m(dense_trace(20000, 8));
  const Canvas c = canvas();
  View v;
  show_range(v, c, static_cast<double>(m.begin_ps()), static_cast<double>(m.end_ps()) / 3);
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  const auto* r = list.rects.data();
  const auto* t = list.texts.data();
  const auto* s = list.text.data();
  const auto n = list.rects.size();
  m.build_frame(v, c, FrameOptions{}, list);
  CHECK(list.rects.data() == r);
  CHECK(list.texts.data() == t);
  CHECK(list.text.data() == s);
  CHECK(list.rects.size() == n);
}

TEST_CASE("hit_test finds the event under the cursor, nothing in a gap, and the group header row") {
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  const auto gemm = t.intern("gemm"), a = t.intern("a"), b = t.intern("b");
  t.events.push_back(ev(0, 0, 100'000'000, a, gemm));
  t.events.push_back(ev(0, 500'000'000, 100'000'000, b, gemm));
  TimelineModel m(std::move(t));
  const Canvas c = canvas(168 + 1000, 400);
  View v;
  show_range(v, c, 0, 1e9);
  const float lane_y = kAxisHeight + kGroupHeaderHeight + kLaneHeight / 2;
  Hit h = m.hit_test(v, c, 168 + 550, lane_y);
  CHECK(h.row_kind == RowKind::lane);
  CHECK(h.event == 1);
  CHECK(h.count == 1);
  CHECK(m.hit_test(v, c, 168 + 50, lane_y).event == 0);
  CHECK(m.hit_test(v, c, 168 + 300, lane_y).event == kNoIndex);
  h = m.hit_test(v, c, 168 + 300, kAxisHeight + 5);
  CHECK(h.row_kind == RowKind::group_header);
  CHECK(h.row_index == 0);
  CHECK(m.event_at(0, 5.5e8, 0) == 1);
  CHECK(m.event_at(0, 3e8, 1e6) == kNoIndex);
}

TEST_CASE("busy_before matches a brute-force sum of clipped durations") {
  TimelineModel m(dense_trace(3000));
  const auto& evs = m.trace().events;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, static_cast<double>(m.end_ps()) * 1.05);
  for (int i = 0; i < 100; ++i) {
    const double t = u(rng);
    double ref = 0;
    for (const auto& e : evs)
      ref += std::clamp(t - static_cast<double>(e.start_ps), 0.0, static_cast<double>(e.dur_ps));
    CHECK(m.busy_before(0, t) == rel_approx(ref, 1e-12));
  }
}

TEST_CASE("a collapsed group becomes one utilization row whose bar height is the group's mean busy fraction") {
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  t.add_lane("gpu 1", "compute", "node 0", 1, 0);
  t.add_lane("gpu 2", "compute", "node 1", 2, 0);
  const auto k = t.intern("gemm"), n = t.intern("x");
  t.events.push_back(ev(0, 0, 1'000'000'000, n, k));  // gpu 0 busy the whole 1 ms
  t.events.push_back(ev(2, 0, 1'000'000'000, n, k));  // gpu 1 idle: node 0 is 50 % busy
  TimelineModel m(std::move(t));
  CHECK(m.rows().size() == 5);  // header, 2 lanes, header, 1 lane
  m.set_collapsed(0, true);
  REQUIRE(m.rows().size() == 4);
  CHECK(m.rows()[1].kind == RowKind::summary);
  CHECK(m.row_of_lane(0) == 1);
  CHECK(m.row_of_lane(1) == 1);
  const Canvas c = canvas();
  View v;
  show_range(v, c, 0, 1e9);
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  std::size_t bars = 0;
  for (const auto& r : list.rects) {
    if (r.kind != ItemKind::summary) continue;
    ++bars;
    CHECK(r.y1 - r.y0 == rel_approx(std::round(0.5f * kLaneHeight), 1e-9));
  }
  CHECK(bars == 1);  // equal columns merge into one bar
}

TEST_CASE("search finds names by substring and next/previous walk matches in time order, wrapping") {
  Trace t;
  t.add_lane("gpu 0", "compute", "", 0, 0);
  t.add_lane("gpu 1", "compute", "", 1, 0);
  const auto k = t.intern("gemm");
  const auto qkv = t.intern("layer3.qkv_proj"), mlp = t.intern("mlp_up"), qkv2 = t.intern("layer9.qkv_proj");
  t.events.push_back(ev(0, 100, 10, qkv, k));
  t.events.push_back(ev(0, 300, 10, mlp, k));
  t.events.push_back(ev(1, 200, 10, qkv2, k));
  t.events.push_back(ev(1, 400, 10, qkv, k));
  TimelineModel m(std::move(t));
  CHECK(m.set_search("qkv") == 3);
  CHECK(m.name_matches(qkv));
  CHECK(!m.name_matches(mlp));
  const auto& e = m.trace().events;
  auto start = [&](std::uint32_t i) { return e[i].start_ps; };
  CHECK(start(m.next_match(0, true)) == 100);
  CHECK(start(m.next_match(100, true)) == 200);
  CHECK(start(m.next_match(200, true)) == 400);
  CHECK(start(m.next_match(400, true)) == 100);  // wraps
  CHECK(start(m.next_match(400, false)) == 200);
  CHECK(start(m.next_match(100, false)) == 400);  // wraps back
  CHECK(m.set_search("nothing") == 0);
  CHECK(m.next_match(0, true) == kNoIndex);
}

TEST_CASE("search covers the \"counters\" group name the model interns for a counter of a process without lanes") {
  // The model interns "counters" while grouping, after the trace's strings were counted; a
  // search must still size its per-string table to every string (it wrote one past the end).
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  const auto k = t.intern("gemm"), op = t.intern("op");
  t.events.push_back(ev(0, 0, 100, op, k));
  TraceCounterTrack c;
  c.process = t.intern("host");
  c.name = t.intern("memory_bytes");
  c.samples = {{0, 1.0}, {100, 2.0}};
  t.counters.push_back(c);
  const std::size_t strings = t.strings.size();
  TimelineModel m(std::move(t));
  REQUIRE(m.trace().strings.size() == strings + 1);
  const auto counters = static_cast<std::uint32_t>(strings);
  CHECK(m.trace().str(counters) == "counters");
  CHECK(m.trace().str(m.groups().back().name) == "counters");
  CHECK(m.set_search("counters") == 0);  // no op is named so, but the name itself matches
  CHECK(m.name_matches(counters));
  CHECK(m.set_search("op") == 1);
  CHECK(!m.name_matches(counters));
}

TEST_CASE("events out of (lane, start) order are sorted on load") {
  Trace t;
  t.add_lane("gpu 0", "compute", "", 0, 0);
  t.add_lane("gpu 1", "compute", "", 1, 0);
  const auto k = t.intern("gemm"), n = t.intern("x");
  t.events.push_back(ev(1, 50, 5, n, k));
  t.events.push_back(ev(0, 90, 5, n, k));
  t.events.push_back(ev(0, 10, 5, n, k));
  TimelineModel m(std::move(t));
  REQUIRE(m.lane_events(0).size() == 2);
  CHECK(m.lane_events(0)[0].start_ps == 10);
  CHECK(m.lane_events(0)[1].start_ps == 90);
  CHECK(m.lane_events(1)[0].start_ps == 50);
}

TEST_CASE("an event on a lane the trace does not have is an InputError") {
  Trace t;
  t.add_lane("gpu 0", "compute", "", 0, 0);
  t.events.push_back(ev(3, 0, 1, 0, 0));
  CHECK_THROWS_AS(TimelineModel(std::move(t)), InputError);
}

TEST_CASE("format_time picks the unit that keeps one to three integer digits") {
  CHECK(format_time(0) == "0");
  CHECK(format_time(500) == "500 ps");
  CHECK(format_time(12'500) == "12.5 ns");
  CHECK(format_time(3'250'000'000.0) == "3.25 ms");
  CHECK(format_time(1.2e12) == "1.2 s");
  // A job's times: minutes, hours, days.
  CHECK(format_time(90e12) == "1.5 min");
  CHECK(format_time(5400e12) == "1.5 h");
  CHECK(format_time(54 * 86400e12) == "54 d");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_flops(3.4e12) == "3.4 TFLOP");
}

TEST_CASE("the time axis: 1-2-5 steps up to a minute, clock steps above, labels in days, hours and minutes") {
  constexpr double s = 1e12, min = 60 * s, h = 60 * min, d = 24 * h;
  // Below a minute: the smallest 1, 2 or 5 x 10^k ps at least the spacing.
  CHECK(axis_tick_step_ps(0.5) == 1);
  CHECK(axis_tick_step_ps(1.3e6) == 2e6);
  CHECK(axis_tick_step_ps(4.1e9) == 5e9);
  CHECK(axis_tick_step_ps(30 * s) == 50 * s);
  CHECK(axis_tick_step_ps(55 * s) == 1 * min);  // 100 s would not be a clock step
  // Clock steps: 90 s -> 2 min, 20 min -> 30, 40 min -> 1 h, 4 h -> 6 h, 13 h -> 1 d.
  CHECK(axis_tick_step_ps(90 * s) == 2 * min);
  CHECK(axis_tick_step_ps(20 * min) == 30 * min);
  CHECK(axis_tick_step_ps(40 * min) == 1 * h);
  CHECK(axis_tick_step_ps(4 * h) == 6 * h);
  CHECK(axis_tick_step_ps(13 * h) == 1 * d);
  // Days: 1, 2, 5 x 10^k (54 days over ~10 ticks: 5 d).
  CHECK(axis_tick_step_ps(3 * d) == 5 * d);
  CHECK(axis_tick_step_ps(15 * d) == 20 * d);
  // Labels: the step's unit below a minute, clock time from it.
  CHECK(axis_tick_label(250e6, 50e6) == "250 us");
  CHECK(axis_tick_label(-1e-3, 50e6) == "0 us");
  CHECK(axis_tick_label(12 * s, 2 * s) == "12 s");
  CHECK(axis_tick_label(45 * min, 15 * min) == "45m");
  CHECK(axis_tick_label(90 * min, 30 * min) == "1h 30m");
  CHECK(axis_tick_label(30 * h, 6 * h) == "1d 6h");
  CHECK(axis_tick_label(10 * d, 5 * d) == "10d");
  CHECK(axis_tick_label(0, 5 * d) == "0");
}

TEST_CASE("kind colours: fixed and distinct for every kind the simulator emits, stable for others") {
  CHECK(kind_color("gemm") == rgba(230, 126, 34));
  CHECK(kind_color("all_reduce") == rgba(52, 152, 219));
  CHECK(kind_color("gemm") != kind_color("attention"));
  CHECK(kind_color("some_new_kind") == kind_color("some_new_kind"));
  const auto k = known_kinds();
  for (std::size_t i = 0; i < k.size(); ++i) {
    for (std::size_t j = i + 1; j < k.size(); ++j) CHECK(kind_color(k[i]) != kind_color(k[j]));
  }
  // Every op kind the simulator writes into TraceEvent::kind is in the fixed table, never a
  // hashed fallback. viz does not depend on workloads or topology, so this list is kept in
  // step by hand with the enums whose names become kinds: OpKind in
  // workloads/include/workloads/compute_model.hpp (to_string in compute_model.cpp) and
  // CollectiveOp in topology/include/topology/collective.hpp (to_string in collective.cpp).
  const std::string_view emitted[] = {
      "gemm",       "grouped_gemm",   "attention",  "elementwise", "norm",   "embedding",  "loss",      "optimizer",
      "all_reduce", "reduce_scatter", "all_gather", "broadcast",   "reduce", "all_to_all", "send_recv",
  };
  for (const std::string_view kind : emitted) {
    CAPTURE(kind);
    CHECK(std::find(k.begin(), k.end(), kind) != k.end());
  }
  CHECK(kind_color("grouped_gemm") != kind_color("gemm"));
}

TEST_CASE("the background loader reads a .ctt written by write_trace_file and reaches progress 1") {
  Trace t = dense_trace(1000, 3);
  t.summary = {{"step_time_s", 0.5}};
  const auto path = std::filesystem::temp_directory_path() / ("ctwin_test_loader_" + std::to_string(getpid()) + ".ctt");
  write_trace_file(t, path);
  TraceLoader loader(path.string());
  loader.wait();
  CHECK(loader.done());
  CHECK(loader.progress() == rel_approx(1.0, 1e-9));
  auto m = loader.take();
  REQUIRE(m);
  CHECK(m->trace().events.size() == 3000);
  CHECK(m->trace().summary.size() == 1);
  std::filesystem::remove(path);
}

TEST_CASE("loading a file that is not a trace reports an InputError naming the file") {
  const auto path = std::filesystem::temp_directory_path() / ("ctwin_test_bad_" + std::to_string(getpid()) + ".ctt");
  { std::ofstream(path) << "not a trace"; }
  TraceLoader loader(path.string());
  try {
    loader.take();
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(path.filename().string()) != std::string::npos);
  }
  std::filesystem::remove(path);
  CHECK_THROWS_AS(read_trace_with_progress("/nonexistent/trace.ctt", {}), InputError);
}

TEST_CASE("compare layout stacks two canvases of the same width and x, so time axes align") {
  const auto cs = canvas_layout(1600, 900, true);
  REQUIRE(cs.size() == 2);
  CHECK(cs[0].x == cs[1].x);
  CHECK(cs[0].w == cs[1].w);
  CHECK(cs[0].w == 1600 - kSidePanelWidth);
  CHECK(cs[0].y == kToolbarHeight);
  CHECK(cs[1].y == cs[0].y + cs[0].h);
  CHECK(cs[0].h + cs[1].h == 900 - kToolbarHeight);
}

TEST_CASE("zoomed-out utilization bars (precomputed grid) agree with brute-force busy time within one pixel") {
  TimelineModel m(dense_trace(4000, 4));
  m.set_all_collapsed(true);
  const Canvas c = canvas();
  const auto& evs = m.trace().events;
  for (double frac : {1.0, 0.01}) {  // grid path, then the exact sweep
    View v;
    const double span = static_cast<double>(m.end_ps() - m.begin_ps());
    show_range(v, c, span * 0.3, span * 0.3 + span * frac);
    DrawList list;
    m.build_frame(v, c, FrameOptions{}, list);
    std::size_t bars = 0;
    for (const auto& r : list.rects) {
      if (r.kind != ItemKind::summary) continue;
      ++bars;
      // The bar's first column, recomputed from the events.
      const double ta = v.time_at(c, r.x0), tb = v.time_at(c, std::min(r.x0 + kSummaryColumnPx, c.x + c.w));
      double busy = 0;
      for (const auto& e : evs) {
        const double s = static_cast<double>(e.start_ps), f = s + static_cast<double>(e.dur_ps);
        busy += std::max(0.0, std::min(f, tb) - std::max(s, ta));
      }
      const double expect = std::round(busy / (4 * (tb - ta)) * kLaneHeight);
      CAPTURE(frac);
      CHECK(std::fabs((r.y1 - r.y0) - expect) <= 1.0);
    }
    CHECK(bars > 0);
  }
}

TEST_CASE("arrows join the rows of their lanes; when crowded only the selected op's arrows are drawn") {
  Trace t;
  t.add_lane("gpu 0", "comm", "node 0", 0, 0);
  t.add_lane("gpu 1", "comm", "node 0", 1, 0);
  const auto k = t.intern("send"), n = t.intern("p2p");
  for (int i = 0; i < 1000; ++i) {
    t.events.push_back(ev(0, i * 1000, 500, n, k));
    t.arrows.push_back(TraceArrow{0, 1, i * 1000, i * 1000 + 400, n});
  }
  TimelineModel m(std::move(t));
  const Canvas c = canvas(168 + 1000, 400);
  View v;
  show_range(v, c, 0, 10'000);  // 10 arrows on screen
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  REQUIRE(list.lines.size() == 10);
  const float lane0 = kAxisHeight + kGroupHeaderHeight + kLaneHeight / 2;
  CHECK(list.lines[3].y0 == rel_approx(lane0, 1e-9));
  CHECK(list.lines[3].y1 == rel_approx(lane0 + kLanePitch, 1e-9));
  CHECK(list.lines[3].x0 == rel_approx(168 + 300, 1e-9));  // 3000 ps at 10 ps per pixel
  CHECK(list.lines[3].x1 == rel_approx(168 + 340, 1e-9));
  show_range(v, c, 0, 1'000'000);  // all 1000: crowded
  m.build_frame(v, c, FrameOptions{}, list);
  CHECK(list.lines.empty());
  FrameOptions opt;
  opt.selected_event = 500;
  m.build_frame(v, c, opt, list);
  REQUIRE(list.lines.size() == 1);
  CHECK(list.lines[0].x0 == rel_approx(168 + 500, 1e-9));
}
