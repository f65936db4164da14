// Offscreen screenshots of the viewer under a private Xvfb: the PNG is decoded and pixels are
// checked at positions computed here from the layout constants (toolbar, axis, rows, label
// column) and the time scale, against the colours the palette assigns.
#include <doctest/doctest.h>

#ifdef CTWIN_HAVE_VIEWER

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb/stb_image.h>

#include "sim/trace.hpp"
#include "test_paths.hpp"
#include "viz/timeline_model.hpp"
#include "viz/viewer.hpp"

extern char** environ;

using namespace ctwin;
using namespace ctwin::viz;

namespace {

// A private Xvfb on a free display number; waits at most 10 s for it, kills it at the end.
class Xvfb {
 public:
  Xvfb() {
    for (int n = 90 + static_cast<int>(getpid() % 50); n < 200 && pid_ <= 0; ++n) {
      char lock[64], disp[16], sock[64];
      std::snprintf(lock, sizeof lock, "/tmp/.X%d-lock", n);
      std::snprintf(disp, sizeof disp, ":%d", n);
      std::snprintf(sock, sizeof sock, "/tmp/.X11-unix/X%d", n);
      if (std::filesystem::exists(lock)) continue;
      const char* argv[] = {"Xvfb", disp, "-screen", "0", "1920x1200x24", "-nolisten", "tcp", nullptr};
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
      pid_t pid = 0;
      const int rc = posix_spawnp(&pid, "Xvfb", &fa, nullptr, const_cast<char* const*>(argv), environ);
      posix_spawn_file_actions_destroy(&fa);
      if (rc != 0) return;  // no Xvfb installed: ok() stays false
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      bool up = false, died = false;
      while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
          died = true;
          break;
        }
        if (std::filesystem::exists(sock)) {
          up = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (up) {
        pid_ = pid;
        display_ = disp;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it accept connections
      } else if (!died) {
        stop(pid);
      }
    }
    if (pid_ > 0) setenv("DISPLAY", display_.c_str(), 1);
  }
  ~Xvfb() {
    if (pid_ > 0) stop(pid_);
  }
  bool ok() const { return pid_ > 0; }

 private:
  static void stop(pid_t pid) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 60; ++i) {  // up to 3 s, then SIGKILL
      if (waitpid(pid, nullptr, WNOHANG) == pid) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  pid_t pid_ = -1;
  std::string display_;
};

Xvfb& xvfb() {
  static Xvfb x;
  return x;
}

struct Png {
  int w = 0, h = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data{nullptr, stbi_image_free};
  std::uint32_t at(int x, int y) const {
    const unsigned char* p = data.get() + (static_cast<std::size_t>(y) * w + x) * 4;
    return rgba(p[0], p[1], p[2]);
  }
};

// Renders, writes the PNG through write_png, and decodes it again with stb_image.
Png shoot(TimelineModel& a, TimelineModel* b, int w, int h, std::pair<double, double> range, const char* name) {
  const auto path = std::filesystem::path(ctwin::test::binary_dir()) / "tests" / name;
  write_png(path.string(), render_offscreen(a, b, w, h, range));
  Png png;
  int n = 0;
  png.data.reset(stbi_load(path.string().c_str(), &png.w, &png.h, &n, 4));
  REQUIRE(png.data);
  return png;
}

TraceEvent op(std::uint32_t lane, double start_us, double dur_us, std::uint32_t name, std::uint32_t kind) {
  TraceEvent e;
  e.lane = lane;
  e.start_ps = static_cast<std::int64_t>(start_us * 1e6);
  e.dur_ps = static_cast<std::int64_t>(dur_us * 1e6);
  e.name = name;
  e.kind = kind;
  return e;
}

// node 0: gpu 0 compute (gemm 0-400 us, attention 500-800 us), gpu 0 comm (all_reduce
// 300-700 us), gpu 1 compute (optimizer 600-1000 us); node 1: gpu 2 compute (gemm 100-200 us).
Trace small_trace() {
  Trace t;
  t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  t.add_lane("gpu 0", "comm", "node 0", 0, 1);
  t.add_lane("gpu 1", "compute", "node 0", 1, 0);
  t.add_lane("gpu 2", "compute", "node 1", 2, 0);
  const auto gemm = t.intern("gemm"), attn = t.intern("attention"), ar = t.intern("all_reduce"),
             opt = t.intern("optimizer");
  t.events.push_back(op(0, 0, 400, t.intern("qkv"), gemm));
  t.events.push_back(op(0, 500, 300, t.intern("fa"), attn));
  t.events.push_back(op(1, 300, 400, t.intern("ar"), ar));
  t.events.push_back(op(2, 600, 400, t.intern("adam"), opt));
  t.events.push_back(op(3, 100, 100, t.intern("mm"), gemm));
  return t;
}

constexpr int kW = 1168, kH = 480;

// Pixel column of time t (us) when [0, 1 ms) fills the event area of a canvas at x = 0.
int x_of(double t_us) {
  const double area = kW - kSidePanelWidth - kLabelWidth;
  return static_cast<int>(std::floor(kLabelWidth + t_us / 1000.0 * area));
}
// A pixel row inside row `row` (0 = first group header) of a canvas starting at canvas_y;
// near the bottom of the lane, below where names are drawn.
int lane_y(double canvas_y, int lanes_before, int headers_before) {
  return static_cast<int>(canvas_y + kAxisHeight + headers_before * kGroupHeaderHeight + lanes_before * kLanePitch +
                          kLaneHeight - 2);
}

}  // namespace

TEST_CASE("screenshot: each op is drawn in its kind's colour at the position its time and lane map to") {
  REQUIRE_MESSAGE(xvfb().ok(), "Xvfb could not be started (install the xvfb package)");
  TimelineModel m(small_trace());
  const Png png = shoot(m, nullptr, kW, kH, {0, 1e9}, "viz_screenshot_ops.png");
  REQUIRE(png.w == kW);
  REQUIRE(png.h == kH);
  const double cy = kToolbarHeight;
  // Sample at 3/4 of each op, away from its name at the left.
  CHECK(png.at(x_of(300), lane_y(cy, 0, 1)) == kind_color("gemm"));
  CHECK(png.at(x_of(725), lane_y(cy, 0, 1)) == kind_color("attention"));
  // The all_reduce (300-700 us) overlaps gpu 0's gemm (to 400 us) and attention (from 500 us):
  // overlapped at 600 us, faded 60% towards the lane background (52,152,219)*0.4 +
  // (33,36,43)*0.6 = (41,82,113); exposed between 400 and 500 us, in its own colour with a
  // red band along the top of the lane.
  CHECK(png.at(x_of(600), lane_y(cy, 1, 1)) == rgba(41, 82, 113));
  CHECK(png.at(x_of(450), lane_y(cy, 1, 1)) == kind_color("all_reduce"));
  CHECK(png.at(x_of(450), lane_y(cy, 1, 1) - static_cast<int>(kLaneHeight) + 3) == rgba(255, 70, 70));
  CHECK(png.at(x_of(600), lane_y(cy, 1, 1) - static_cast<int>(kLaneHeight) + 3) == rgba(41, 82, 113));
  CHECK(png.at(x_of(900), lane_y(cy, 2, 1)) == kind_color("optimizer"));
  CHECK(png.at(x_of(175), lane_y(cy, 3, 2)) == kind_color("gemm"));
  // The group header rows sit between.
  CHECK(png.at(x_of(50), static_cast<int>(cy + kAxisHeight + 2)) == palette::kGroupHeader);
  CHECK(png.at(x_of(50), static_cast<int>(cy + kAxisHeight + kGroupHeaderHeight + 3 * kLanePitch + 2)) ==
        palette::kGroupHeader);
}

TEST_CASE("screenshot: where nothing ran the lane shows its background, never an op colour") {
  REQUIRE(xvfb().ok());
  TimelineModel m(small_trace());
  const Png png = shoot(m, nullptr, kW, kH, {0, 1e9}, "viz_screenshot_empty.png");
  const double cy = kToolbarHeight;
  // gpu 1 compute is idle until 600 us; gpu 0 compute between 400 and 500 us.
  for (auto [t_us, lanes_before] : {std::pair{300.0, 2}, std::pair{450.0, 0}}) {
    const int x = x_of(t_us), y = lane_y(cy, lanes_before, 1);
    const std::uint32_t a = png.at(x, y), b = png.at(x + 1, y);
    CAPTURE(t_us);
    // One of two neighbouring pixels may be a 1-pixel grid line; the other is background.
    CHECK((a == palette::kLaneBackground || b == palette::kLaneBackground));
    for (auto k : {"gemm", "attention", "all_reduce", "optimizer"}) {
      CHECK(a != kind_color(k));
      CHECK(b != kind_color(k));
    }
  }
  // The label column and the axis band keep their colours.
  CHECK(png.at(static_cast<int>(kLabelWidth) - 3, lane_y(cy, 2, 1)) == palette::kLabelBackground);
  CHECK(png.at(x_of(500), static_cast<int>(cy + 1)) == palette::kAxisBackground);
}

TEST_CASE("screenshot: a range zooms in, so an op covers the columns its times map to at the new scale") {
  REQUIRE(xvfb().ok());
  TimelineModel m(small_trace());
  // [350 us, 450 us): gemm ends at 400 us, the middle of the event area.
  const Png png = shoot(m, nullptr, kW, kH, {350e6, 450e6}, "viz_screenshot_range.png");
  const double area = kW - kSidePanelWidth - kLabelWidth;
  const int mid = static_cast<int>(kLabelWidth + area / 2);
  const int y = lane_y(kToolbarHeight, 0, 1);
  CHECK(png.at(mid - 20, y) == kind_color("gemm"));
  CHECK(png.at(mid + 20, y) != kind_color("gemm"));
  // At 425 us the all_reduce is exposed (compute idle from 400 to 500 us): its own colour.
  CHECK(png.at(static_cast<int>(kLabelWidth + area * 0.75), lane_y(kToolbarHeight, 1, 1)) == kind_color("all_reduce"));
}

TEST_CASE("screenshot: --compare stacks the second trace under the first on the same time axis") {
  REQUIRE(xvfb().ok());
  TimelineModel a(small_trace());
  Trace tb;
  tb.add_lane("gpu 0", "compute", "node 0", 0, 0);
  tb.events.push_back(op(0, 200, 600, tb.intern("big"), tb.intern("attention")));
  TimelineModel b(std::move(tb));
  const Png png = shoot(a, &b, kW, kH, {0, 1e9}, "viz_screenshot_compare.png");
  const auto cs = canvas_layout(kW, kH, true);
  // A on top as before; B's only lane in the lower canvas at the same x for the same time.
  CHECK(png.at(x_of(300), lane_y(cs[0].y, 0, 1)) == kind_color("gemm"));
  CHECK(png.at(x_of(300), lane_y(cs[1].y, 0, 1)) == kind_color("attention"));
  CHECK(png.at(x_of(100), lane_y(cs[1].y, 0, 1)) != kind_color("attention"));
}

TEST_CASE("screenshot: a collapsed group shows its utilization bar where its lanes were busy") {
  REQUIRE(xvfb().ok());
  TimelineModel m(small_trace());
  m.set_collapsed(1, true);  // node 1: one lane, busy 100-200 us
  const Png png = shoot(m, nullptr, kW, kH, {0, 1e9}, "viz_screenshot_collapsed.png");
  const int y = lane_y(kToolbarHeight, 3, 2);
  CHECK(png.at(x_of(150), y) == palette::kSummaryFill);
  const std::uint32_t idle = png.at(x_of(600), y);
  CHECK(idle != palette::kSummaryFill);
}

#endif  // CTWIN_HAVE_VIEWER
