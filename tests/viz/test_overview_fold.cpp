// What the zoomed-out timeline claims: folded runs as stacked time shares, exposed against
// overlapped communication, folding identical ranks (--fold), and summary labels in words.
// Each against a small trace worked by hand, and one real TP8 trace from `ctwin run`.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/trace.hpp"
#include "viz/text_format.hpp"
#include "viz/timeline_model.hpp"

#include "test_paths.hpp"
#include "tolerance.hpp"
#include "trace_events.hpp"

using namespace ctwin;
using namespace ctwin::viz;
using ctwin::test::abs_approx;
using ctwin::test::ev;
using ctwin::test::rel_approx;

namespace {

// Height (px) of each kind's share rects in a frame, by kind string.
std::map<std::string, float> share_heights(const TimelineModel& m, const DrawList& list) {
  std::map<std::string, float> h;
  for (const auto& r : list.rects) {
    if (r.kind == ItemKind::share) h[m.trace().str(r.index)] += r.y1 - r.y0;
  }
  return h;
}

}  // namespace

TEST_CASE("a folded run is drawn as time shares: 9% reduce-scatter stays 9% though it is the longest member") {
  // One lane, back to back from 0: a reduce_scatter of 9 ns (the run's longest op, which the
  // old "longest of 8 sampled members" rule painted the whole run with), then 13 gemms of
  // 7 ns. By hand: the run spans 100 ns, reduce_scatter 9 / 100 = 9%, gemm 91 / 100 = 91%.
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  const auto rs = t.intern("reduce_scatter"), gemm = t.intern("gemm"), n = t.intern("op");
  t.events.push_back(ev(0, 0, 9000, n, rs));
  for (int i = 0; i < 13; ++i) t.events.push_back(ev(0, 9000 + 7000 * i, 7000, n, gemm));
  TimelineModel m(std::move(t));
  std::vector<KindShare> shares;
  m.time_shares(0, 14, shares);
  REQUIRE(shares.size() == 2);
  CHECK(m.trace().str(shares[0].kind) == "gemm");
  CHECK(shares[0].ps == rel_approx(91000, 1e-12));
  CHECK(m.trace().str(shares[1].kind) == "reduce_scatter");
  CHECK(shares[1].ps == rel_approx(9000, 1e-12));

  // 10 us over 1000 px: the 100 ns run is 10 px wide, every op under 1 px, so one merged run.
  const Canvas c{0, 0, kLabelWidth + 1000, 400};
  View v;
  show_range(v, c, 0, 1e7);
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  std::size_t merged = 0;
  for (const auto& r : list.rects) merged += r.kind == ItemKind::merged ? 1 : 0;
  CHECK(merged == 1);
  const auto h = share_heights(m, list);
  REQUIRE(h.count("gemm") == 1);
  REQUIRE(h.count("reduce_scatter") == 1);
  CHECK(h.at("gemm") == abs_approx(0.91 * kLaneHeight, 1e-3));  // px
  CHECK(h.at("reduce_scatter") == abs_approx(0.09 * kLaneHeight, 1e-3));
}

TEST_CASE(
    "a folded run with idle gaps stacks to its busy fraction; a long run's compute and communication stay exact") {
  // 50 all_reduce of 1 ns every 4 ns (0, 4, 8, ...): 50 ns busy over a span of 197 ns.
  Trace t;
  t.add_lane("gpu 0", "comm", "node 0", 0, 1);
  const auto ar = t.intern("all_reduce"), n = t.intern("op");
  for (int i = 0; i < 50; ++i) t.events.push_back(ev(0, 4000 * i, 1000, n, ar));
  // A second lane of 10,000 alternating ops of 1 ns (gemm) and 3 ns (reduce_scatter), back
  // to back: by hand 5 us compute and 15 us communication, exact however long the run.
  t.add_lane("gpu 1", "compute", "node 0", 1, 0);
  const auto gemm = t.intern("gemm"), rs = t.intern("reduce_scatter");
  std::int64_t now = 0;
  for (int i = 0; i < 10000; ++i) {
    const bool g = i % 2 == 0;
    t.events.push_back(ev(1, now, g ? 1000 : 3000, n, g ? gemm : rs));
    now += g ? 1000 : 3000;
  }
  TimelineModel m(std::move(t));
  const Canvas c{0, 0, kLabelWidth + 1000, 400};
  View v;
  show_range(v, c, 0, 2e7);  // 20 ns per px: the 197 ns of lane 0 fold into one run
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  float ar_h = 0;
  for (const auto& r : list.rects) {
    if (r.kind == ItemKind::share && r.event < 50) ar_h += r.y1 - r.y0;
  }
  CHECK(ar_h == abs_approx(50.0 / 197.0 * kLaneHeight, 1e-3));
  std::vector<KindShare> shares;
  m.time_shares(50, 10050, shares);
  REQUIRE(shares.size() == 2);
  CHECK(m.trace().str(shares[0].kind) == "reduce_scatter");
  CHECK(shares[0].ps == rel_approx(5000.0 * 3000, 1e-12));  // 5,000 x 3 ns
  CHECK(m.trace().str(shares[1].kind) == "gemm");
  CHECK(shares[1].ps == rel_approx(5000.0 * 1000, 1e-12));  // 5,000 x 1 ns
}

namespace {

// gpu 0: compute gemm [0, 400) and attention [500, 800); comm all_reduce [300, 700).
// gpu 1: compute gemm [0, 100) and an idle [150, 250) (waiting, not compute); comm all_gather
// [100, 300) while only gpu 0 computes; on its compute stream an all_reduce [400, 450) (TP
// comm without overlap).
// By hand (ns): all_reduce of gpu 0 exposed [400, 500) = 100, overlapped 300; all_gather of
// gpu 1 exposed 200 (gpu 0's compute does not hide it); gpu 1's all_reduce exposed 50.
// Exposed 350, overlapped 300.
Trace overlap_trace() {
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  t.add_lane("gpu 0", "comm", "node 0", 0, 1);
  t.add_lane("gpu 1", "compute", "node 0", 1, 0);
  t.add_lane("gpu 1", "comm", "node 0", 1, 1);
  const auto gemm = t.intern("gemm"), attn = t.intern("attention"), ar = t.intern("all_reduce"),
             ag = t.intern("all_gather"), idle = t.intern("idle"), n = t.intern("op");
  const std::int64_t ns = 1000;
  t.events.push_back(ev(0, 0, 400 * ns, n, gemm));
  t.events.push_back(ev(0, 500 * ns, 300 * ns, n, attn));
  t.events.push_back(ev(1, 300 * ns, 400 * ns, n, ar));
  t.events.push_back(ev(2, 0, 100 * ns, n, gemm));
  t.events.push_back(ev(2, 400 * ns, 50 * ns, n, ar));
  t.events.push_back(ev(2, 150 * ns, 100 * ns, n, idle));
  t.events.push_back(ev(3, 100 * ns, 200 * ns, n, ag));
  return t;
}

}  // namespace

TEST_CASE("communication is exposed where the same GPU computes nothing and overlapped where it computes") {
  TimelineModel m(overlap_trace());
  const auto& evs = m.trace().events;
  auto find = [&](std::uint32_t lane, std::int64_t start) {
    for (std::uint32_t i = 0; i < evs.size(); ++i) {
      if (evs[i].lane == lane && evs[i].start_ps == start) return i;
    }
    FAIL("no such event");
    return kNoIndex;
  };
  const std::int64_t ns = 1000;
  const auto ar0 = find(1, 300 * ns), ag1 = find(3, 100 * ns), ar1 = find(2, 400 * ns), gemm0 = find(0, 0);
  CHECK(m.exposed_ps(ar0) == abs_approx(100.0 * ns, 0.5));  // ps
  CHECK(m.exposed_ps(ag1) == abs_approx(200.0 * ns, 0.5));
  CHECK(m.exposed_ps(ar1) == abs_approx(50.0 * ns, 0.5));
  CHECK(m.exposed_ps(gemm0) == abs_approx(0, 0.5));  // compute is never "exposed"
  CHECK(m.comm_totals().exposed_ps == abs_approx(350.0 * ns, 0.5));
  CHECK(m.comm_totals().overlapped_ps == abs_approx(300.0 * ns, 0.5));
  std::vector<std::pair<double, double>> parts;
  m.exposed_parts(ar0, parts);
  REQUIRE(parts.size() == 1);
  CHECK(parts[0].first == abs_approx(400.0 * ns, 0.5));
  CHECK(parts[0].second == abs_approx(500.0 * ns, 0.5));

  // Drawn: 1 ms over 1000 px (1 ns per px); the all_reduce of gpu 0 is one faded event rect over
  // [300, 700) px and one exposed rect (its colour) over [400, 500) px.
  const Canvas c{0, 0, kLabelWidth + 1000, 400};
  View v;
  show_range(v, c, 0, 1e6);
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  int exposed_fill = 0;
  for (const auto& r : list.rects) {
    if (r.event != ar0) continue;
    if (r.kind == ItemKind::event) {
      CHECK(r.color != m.color_of(evs[ar0]));  // faded: overlapped is not drawn in full colour
      CHECK(r.x0 == abs_approx(kLabelWidth + 300, 0.01));
    }
    if (r.kind == ItemKind::exposed && r.color == m.color_of(evs[ar0])) {
      ++exposed_fill;
      CHECK(r.x0 == abs_approx(kLabelWidth + 400, 0.01));
      CHECK(r.x1 == abs_approx(kLabelWidth + 500, 0.01));
    }
  }
  CHECK(exposed_fill == 1);

  // The summary panel's per-GPU means over the 2 GPUs: 175 ns exposed, 150 ns overlapped.
  const auto rows = m.summary_rows();
  std::map<std::string, double> by_key(rows.begin(), rows.end());
  CHECK(by_key.at("trace_exposed_comm_s") == rel_approx(175e-9, 1e-9));
  CHECK(by_key.at("trace_overlapped_comm_s") == rel_approx(150e-9, 1e-9));
}

TEST_CASE("summary keys read as words from one table; unknown keys lose _s and underscores") {
  CHECK(summary_label("exposed_tp_s") == "exposed tensor-parallel communication");
  CHECK(summary_label("exposed_dp_s") == "exposed data-parallel communication");
  CHECK(summary_label("exposed_pp_s") == "exposed pipeline-parallel communication");
  CHECK(summary_label("bubble_s") == "pipeline bubble");
  CHECK(summary_label("mfu") == "model FLOPs utilization");
  CHECK(summary_label("trace_exposed_comm_s") == "exposed communication per GPU (compute idle)");
  CHECK(summary_label("queue_wait_s") == "queue wait");
  // Every table entry is words: no underscore, and no two keys share a label.
  std::vector<std::string_view> seen;
  for (const auto& l : summary_labels()) {
    CAPTURE(l.key);
    CHECK(l.words.find('_') == std::string_view::npos);
    CHECK(std::find(seen.begin(), seen.end(), l.words) == seen.end());
    seen.push_back(l.words);
  }
  // The summary rows keep what a user reads and drop the rank strides only --fold uses.
  Trace t = overlap_trace();
  t.summary = {{"step_time_s", 1e-6}, {"exposed_tp_s", 2e-7}, {"tp_size", 2}, {"tp_stride", 1}};
  TimelineModel m(std::move(t));
  std::vector<std::string> keys;
  for (const auto& kv : m.summary_rows()) keys.push_back(kv.first);
  CHECK(keys == std::vector<std::string>{"step_time_s", "exposed_tp_s", "tp_size", "trace_exposed_comm_s",
                                         "trace_overlapped_comm_s"});
}

TEST_CASE("--fold names: tp, pp, dp, cp, ep and none, comma-separated; anything else is named as bad") {
  std::vector<std::string> dims;
  std::string bad;
  CHECK(parse_fold_dims("tp", dims, bad));
  CHECK(parse_fold_dims("dp,pp", dims, bad));
  CHECK(parse_fold_dims("none", dims, bad));
  CHECK(parse_fold_dims("cp,ep", dims, bad));
  CHECK(dims == std::vector<std::string>{"tp", "dp", "pp", "cp", "ep"});
  CHECK_FALSE(parse_fold_dims("tp,xp", dims, bad));
  CHECK(bad == "xp");
  CHECK(dims.size() == 5);  // a bad list adds nothing
  CHECK_FALSE(parse_fold_dims("", dims, bad));
}

namespace {

// TP2 x PP2 x DP2 = 8 GPUs, order tp-dp-pp (tp stride 1, dp stride 2, pp stride 4); two lanes
// per GPU (compute, tp comm). Every GPU of a stage runs the same ops: stage s computes gemm
// [0, 300) ns and attention [300, 400) ns; its tp comm all_reduce runs [400, 500) ns. Stage 1
// is shifted by 1000 ns. EP 2 is carved from DP.
Trace tp_trace() {
  Trace t;
  const auto gemm = t.intern("gemm"), attn = t.intern("attention"), ar = t.intern("all_reduce"), n = t.intern("op");
  const std::int64_t ns = 1000;
  for (std::uint32_t r = 0; r < 8; ++r) {
    const std::uint32_t stage = r / 4;
    const std::string proc = "gpu " + std::to_string(r), group = "stage " + std::to_string(stage);
    const auto lc = t.add_lane(proc, "compute", group, r, 0);
    const auto lt = t.add_lane(proc, "tp comm", group, r, 3);
    const std::int64_t base = 1000 * ns * stage;
    t.events.push_back(ev(lc, base, 300 * ns, n, gemm));
    t.events.push_back(ev(lc, base + 300 * ns, 100 * ns, n, attn));
    t.events.push_back(ev(lt, base + 400 * ns, 100 * ns, n, ar));
  }
  t.summary = {{"tp_size", 2},   {"tp_stride", 1}, {"cp_size", 1},   {"cp_stride", 1}, {"dp_size", 2},
               {"dp_stride", 2}, {"pp_size", 2},   {"pp_stride", 4}, {"ep_size", 2}};
  return t;
}

std::size_t lane_rows(const TimelineModel& m) {
  return static_cast<std::size_t>(
      std::count_if(m.rows().begin(), m.rows().end(), [](const Row& r) { return r.kind == RowKind::lane; }));
}

}  // namespace

TEST_CASE("--fold tp draws one lane per tp group with its count; dp, pp and ep fold their own coordinates") {
  TimelineModel m(tp_trace());
  REQUIRE(lane_rows(m) == 16);
  const std::vector<std::string> tp{"tp"};
  CHECK(m.set_fold(tp) == 8);
  CHECK(lane_rows(m) == 8);  // 16 lanes / tp 2
  CHECK(m.visible_lanes() == 8);
  // gpu 0 (tp 0) stands for gpu 0 and gpu 1; gpu 1's lanes are drawn in gpu 0's rows.
  CHECK(m.fold_count(0) == 2);
  CHECK(m.fold_count(2) == 0);
  CHECK(m.row_of_lane(2) == m.row_of_lane(0));
  CHECK(m.row_of_lane(3) == m.row_of_lane(1));
  CHECK(m.lane_label(0) == "gpu 0 / compute  x2");
  // dp: gpus differing in dp (stride 2): gpu 0 and gpu 2 fold, gpu 1 and 3 fold.
  CHECK(m.set_fold(std::vector<std::string>{"dp"}) == 8);
  CHECK(m.row_of_lane(4) == m.row_of_lane(0));  // gpu 2 compute -> gpu 0 compute
  CHECK(m.row_of_lane(2) != m.row_of_lane(0));  // gpu 1 stays
  // ep 2 over dp 2 is the whole dp coordinate here: same classes as dp.
  CHECK(m.set_fold(std::vector<std::string>{"ep"}) == 8);
  CHECK(m.row_of_lane(4) == m.row_of_lane(0));
  // With EP 1 there is nothing to fold for ep (and dp is not folded with it).
  Trace t1 = tp_trace();
  t1.summary.back().second = 1;  // ep_size
  TimelineModel m1(std::move(t1));
  CHECK(m1.set_fold(std::vector<std::string>{"ep"}) == 0);
  // tp, dp and pp together: one lane per stream, counting 8.
  CHECK(m.set_fold(std::vector<std::string>{"tp", "dp", "pp"}) == 14);
  CHECK(lane_rows(m) == 2);
  CHECK(m.fold_count(0) == 8);
  CHECK(m.set_fold({}) == 0);
  CHECK(lane_rows(m) == 16);
}

TEST_CASE("folding tp keeps the drawn time shares: the folded lane reads 75% gemm, 25% attention") {
  TimelineModel m(tp_trace());
  m.set_fold(std::vector<std::string>{"tp"});
  // Zoomed out to 200 us over 1000 px (200 ns per px) every op folds; the compute lane's first
  // run spans [0, 400) ns: by hand gemm 300/400, attention 100/400, as on each tp rank.
  const Canvas c{0, 0, kLabelWidth + 1000, 400};
  View v;
  show_range(v, c, 0, 2e8);
  DrawList list;
  m.build_frame(v, c, FrameOptions{}, list);
  float gemm = 0, attn = 0;
  for (const auto& r : list.rects) {
    if (r.kind != ItemKind::share || r.y0 >= kLanePitch + kGroupHeaderHeight + kAxisHeight) continue;
    if (r.x0 >= kLabelWidth + 4) continue;  // stage 1's run from 1000 ns (5 px) on
    const std::string& k = m.trace().str(r.index);
    (k == "gemm" ? gemm : attn) += r.y1 - r.y0;
  }
  CHECK(gemm == abs_approx(0.75 * kLaneHeight, 1e-3));
  CHECK(attn == abs_approx(0.25 * kLaneHeight, 1e-3));
}

TEST_CASE("a TP8 trace from ctwin run folds to 1/8 of its GPU lanes, per stream") {
  // llama3-70b-64xh100 with --no-fold: the simulator itself folds TP groups and DP replicas, so
  // the viewer's fold is tried on the unfolded trace (TP8 x PP2 x DP4, 3 lanes per GPU). Four
  // layers and 8 micro-batches per replica keep every lane and stream of the layout at a fraction
  // of the run's time.
  const auto exe = std::filesystem::path(ctwin::test::binary_dir()) / "ctwin";
  REQUIRE(std::filesystem::exists(exe));
  const auto dir = std::filesystem::temp_directory_path() / ("ctwin_viz_fold_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto trace = dir / "tp8.ctt";
  const std::string cmd = std::string("cd ") + ctwin::test::source_dir() + " && " + exe.string() +
                          " run scenarios/llama3-70b-64xh100.json --no-fold --set /model/layers=4"
                          " --set /training/global_batch=32 --trace " +
                          trace.string() + " >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  TimelineModel m(read_trace_file(trace));
  std::filesystem::remove_all(dir);
  std::size_t gpus_lanes = m.trace().lanes.size();
  const std::size_t before = lane_rows(m);
  CHECK(before == gpus_lanes);
  const std::size_t hidden = m.set_fold(std::vector<std::string>{"tp"});
  CHECK(lane_rows(m) * 8 == before);
  CHECK(hidden == before - before / 8);
  for (std::uint32_t l = 0; l < m.trace().lanes.size(); ++l) CHECK((m.fold_count(l) == 0 || m.fold_count(l) == 8));
}
