// Viewer frame build and load time on a synthetic 10-million-event trace (64 GPUs on 8 nodes,
// a compute and a comm stream each, memory counters, collective arrows).
//   frame: CPU time to build one frame's draw lists (1600x1048 canvas, the viewer's layout at
//     1920x1080) fully zoomed out, at a mid zoom (1/100 of the run), and zoomed out with every
//     group collapsed to its utilization lane. Baseline: a naive build in the same process
//     that walks every event of each visible lane and emits one rectangle per visible event.
//   load: write the trace to a temporary .ctt, then read it back and build the model (what
//     the viewer's loading thread does). Baseline: reading the same file's bytes with fread.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "sim/trace.hpp"
#include "viz/timeline_model.hpp"
#include "viz/trace_loader.hpp"

namespace ctwin {
namespace {

using viz::Canvas;
using viz::DrawList;
using viz::DrawRect;
using viz::TimelineModel;
using viz::View;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Trace synthetic_trace(std::size_t target_events) {
  constexpr int kNodes = 8, kGpusPerNode = 8;
  constexpr int kGpus = kNodes * kGpusPerNode;
  Trace t;
  for (int g = 0; g < kGpus; ++g) {
    const std::string proc = "gpu " + std::to_string(g);
    const std::string group = "node " + std::to_string(g / kGpusPerNode);
    t.add_lane(proc, "compute", group, static_cast<std::uint32_t>(g), 0);
    t.add_lane(proc, "comm", group, static_cast<std::uint32_t>(g), 1);
  }
  const char* compute_kinds[] = {"gemm", "attention", "elementwise", "norm"};
  const char* compute_names[] = {"qkv_proj", "attention_fwd", "swiglu", "rms_norm", "mlp_up", "mlp_down", "o_proj"};
  const char* comm_kinds[] = {"all_reduce", "all_gather", "reduce_scatter", "send"};
  std::uint32_t kinds[8], names[7];
  for (int i = 0; i < 4; ++i) kinds[i] = t.intern(compute_kinds[i]), kinds[4 + i] = t.intern(comm_kinds[i]);
  for (int i = 0; i < 7; ++i) names[i] = t.intern(compute_names[i]);
  const std::uint32_t comm_name = t.intern("nccl_collective");
  const std::size_t per_lane = target_events / t.lanes.size();
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> compute_dur(5'000'000, 120'000'000);  // 5-120 us
  std::uniform_int_distribution<std::int64_t> gap(200'000, 3'000'000);              // 0.2-3 us
  std::uniform_int_distribution<std::int64_t> comm_gap(20'000'000, 200'000'000);
  std::uniform_int_distribution<int> pick(0, 6);
  t.events.reserve(per_lane * t.lanes.size());
  for (std::uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    const bool comm = lane % 2 == 1;
    std::int64_t now = 0;
    for (std::size_t i = 0; i < per_lane; ++i) {
      TraceEvent e;
      e.lane = lane;
      now += comm ? comm_gap(rng) / 4 : gap(rng);
      e.start_ps = now;
      e.dur_ps = compute_dur(rng);
      const int k = pick(rng);
      e.kind = comm ? kinds[4 + k % 4] : kinds[k % 4];
      e.name = comm ? comm_name : names[k];
      e.flops = comm ? 0 : static_cast<double>(e.dur_ps) * 1e3;
      e.bytes = static_cast<double>(e.dur_ps) * 10;
      if (comm) e.group = static_cast<std::uint32_t>(i);
      now += e.dur_ps;
      t.events.push_back(e);
    }
  }
  // Memory per GPU, a sample per 64 compute ops.
  const std::uint32_t mem = t.intern("memory_bytes");
  for (int g = 0; g < kGpus; ++g) {
    TraceCounterTrack c{t.lanes[2 * g].process, mem, static_cast<std::uint32_t>(g), {}};
    const auto lane = t.events.begin() + static_cast<std::ptrdiff_t>(2 * g * per_lane);
    for (std::size_t i = 0; i < per_lane; i += 64) {
      c.samples.emplace_back(lane[static_cast<std::ptrdiff_t>(i)].start_ps,
                             40e9 + 20e9 * static_cast<double>(i % 4096) / 4096);
    }
    t.counters.push_back(std::move(c));
  }
  // Ring arrows between neighbouring GPUs' comm lanes, one per 256 comm ops.
  const std::uint32_t arrow = t.intern("ring");
  for (int g = 0; g < kGpus; ++g) {
    const auto lane = t.events.begin() + static_cast<std::ptrdiff_t>((2 * g + 1) * per_lane);
    for (std::size_t i = 0; i < per_lane; i += 256) {
      const auto& e = lane[static_cast<std::ptrdiff_t>(i)];
      t.arrows.push_back(TraceArrow{static_cast<std::uint32_t>(2 * g + 1),
                                    static_cast<std::uint32_t>(2 * ((g + 1) % kGpus) + 1), e.start_ps,
                                    e.start_ps + e.dur_ps / 2, arrow});
    }
  }
  canonicalize(t);
  t.summary = {{"step_time_s", 1.0}, {"compute_s", 0.7}, {"exposed_comm_s", 0.3}};
  return t;
}

// The naive frame: every event of every visible lane is tested and drawn at its own size.
std::size_t naive_frame(const TimelineModel& m, const View& v, const Canvas& c, std::vector<DrawRect>& out) {
  out.clear();
  const float xl = c.x + viz::kLabelWidth, xr = c.x + c.w;
  const double t0 = v.t0_ps, t1 = v.t1_ps(c);
  const float top = TimelineModel::rows_top(c), bottom = TimelineModel::rows_bottom(c);
  for (const auto& row : m.rows()) {
    const float y = top + row.y - v.scroll_y;
    if (row.kind != viz::RowKind::lane || y + row.h < top || y > bottom) continue;
    for (const auto& e : m.lane_events(row.index)) {
      const double s = static_cast<double>(e.start_ps), f = s + static_cast<double>(e.dur_ps);
      if (f < t0 || s > t1) continue;
      out.push_back(DrawRect{std::max(xl, v.x_at(c, s)), y, std::min(xr, v.x_at(c, f)), y + viz::kLaneHeight,
                             m.color_of(e), viz::ItemKind::event});
    }
  }
  return out.size();
}

struct FrameFigures {
  double ms = 0, baseline_ms = 0;
  std::size_t items = 0, baseline_items = 0;
};

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) {
    const double a = thread_cpu_s();
    f();
    v.push_back((thread_cpu_s() - a) * 1e3);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

FrameFigures measure_frame(const TimelineModel& m, const View& v, const Canvas& c, int reps, int baseline_reps) {
  FrameFigures f;
  DrawList list;
  viz::FrameOptions opt;
  m.build_frame(v, c, opt, list);  // warm: buffers reach their size, then are reused
  f.ms = median_ms(reps, [&] { m.build_frame(v, c, opt, list); });
  f.items = list.rects.size() + list.lines.size() + list.texts.size();
  std::vector<DrawRect> naive;
  naive_frame(m, v, c, naive);
  f.baseline_ms = median_ms(baseline_reps, [&] { naive_frame(m, v, c, naive); });
  f.baseline_items = naive.size();
  return f;
}

}  // namespace

nlohmann::ordered_json bench_viewer(const BenchOptions& o) {
  const std::size_t target = o.quick ? 256'000 : 10'000'000;
  auto say = [&](const char* what) {
    if (o.progress) std::fprintf(stderr, "bench viewer: %s\n", what);
  };
  say("generating the trace");
  std::size_t events = 0, lanes = 0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("ctwin_bench_viewer_" + std::to_string(static_cast<long>(getpid())) + ".ctt");
  struct Remove {
    std::filesystem::path p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove{path};
  {
    Trace t = synthetic_trace(target);
    events = t.events.size();
    lanes = t.lanes.size();
    say("writing the .ctt");
    write_trace_file(t, path);
  }
  say("loading it back");
  const auto w0 = std::chrono::steady_clock::now();
  TimelineModel model(viz::read_trace_with_progress(path.string(), {}));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  say("reading the raw bytes (baseline)");
  double raw_s = 0;
  {
    std::vector<char> bytes(std::filesystem::file_size(path));
    const auto r0 = std::chrono::steady_clock::now();
    std::FILE* f = std::fopen(path.string().c_str(), "rb");
    std::size_t got = f ? std::fread(bytes.data(), 1, bytes.size(), f) : 0;
    if (f) std::fclose(f);
    raw_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    if (got != bytes.size()) raw_s = 0;
  }

  const Canvas c = viz::canvas_layout(1920, 1080, false)[0];
  View out_view;
  viz::show_range(out_view, c, static_cast<double>(model.begin_ps()), static_cast<double>(model.end_ps()));
  View mid_view;
  const double span = static_cast<double>(model.end_ps() - model.begin_ps());
  viz::show_range(mid_view, c, model.begin_ps() + span * 0.45, model.begin_ps() + span * 0.46);
  const int reps = o.quick ? 5 : 30, baseline_reps = o.quick ? 3 : 5;
  say("frames zoomed out");
  const FrameFigures out = measure_frame(model, out_view, c, reps, baseline_reps);
  say("frames at mid zoom");
  const FrameFigures mid = measure_frame(model, mid_view, c, reps, baseline_reps);
  say("frames with groups collapsed");
  model.set_all_collapsed(true);
  const FrameFigures folded = measure_frame(model, out_view, c, reps, 1);
  model.set_all_collapsed(false);

  nlohmann::ordered_json j;
  j["events"] = events;
  j["lanes"] = lanes;
  j["canvas"] = std::to_string(static_cast<int>(c.w)) + "x" + std::to_string(static_cast<int>(c.h));
  j["frame_ms_zoomed_out"] = out.ms;
  j["baseline_frame_ms_zoomed_out"] = out.baseline_ms;
  j["ratio_zoomed_out"] = out.baseline_ms / out.ms;
  j["items_zoomed_out"] = out.items;
  j["baseline_items_zoomed_out"] = out.baseline_items;
  j["frame_ms_mid_zoom"] = mid.ms;
  j["baseline_frame_ms_mid_zoom"] = mid.baseline_ms;
  j["ratio_mid_zoom"] = mid.baseline_ms / mid.ms;
  j["items_mid_zoom"] = mid.items;
  j["frame_ms_collapsed"] = folded.ms;
  j["load_s"] = load_s;
  j["baseline_raw_read_s"] = raw_s;
  j["load_ratio_to_raw_read"] = raw_s > 0 ? load_s / raw_s : 0.0;
  j["target_frame_ms"] = 8;
  j["target_load_s"] = 10;
  j["meets_targets"] = std::max({out.ms, mid.ms, folded.ms}) < 8 && load_s < 10;
  return j;
}

}  // namespace ctwin
