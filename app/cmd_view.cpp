// `ctwin view TRACE`: the timeline viewer (viz/). Parses flags into ViewerOptions; the
// window, the offscreen screenshot and the trace loading live in ctwin_viz.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "sim/error.hpp"
#include "viz/viewer.hpp"

namespace ctwin {
namespace {

// "2.5ms", "120us", "3s", "0"; a bare number is seconds. Returns picoseconds.
double parse_time_ps(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : std::string();
  double scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1e12;
  else if (unit == "ms")
    scale = 1e9;
  else if (unit == "us")
    scale = 1e6;
  else if (unit == "ns")
    scale = 1e3;
  else if (unit == "ps")
    scale = 1;
  if (text.empty() || end == text.c_str() || scale == 0 || !std::isfinite(v)) {
    throw InputError("", flag, "'" + text + "' is not a time",
                     "a number with a unit: ps, ns, us, ms or s (e.g. 2.5ms)");
  }
  return v * scale;
}

}  // namespace

int cmd_view(const Args& args) {
  const std::string usage =
      "usage: ctwin view TRACE [--compare TRACE2] [--fold tp|pp|dp|cp|ep|none ...]\n"
      "                  [--screenshot OUT.png [--range START:END] [--size WxH]]\n\n"
      "Opens the timeline viewer on a trace written by 'ctwin run --trace' (.ctt or Chrome .json).\n"
      "With --screenshot, renders one frame offscreen to a PNG and exits (needs an X display;\n"
      "run under xvfb-run on a headless machine).";
  auto p = parse_args(args, usage,
                      {{"--compare", "TRACE2", "stack a second trace under the first, on the same time axis"},
                       {"--screenshot", "OUT.png", "render offscreen to this PNG and exit"},
                       {"--range", "START:END", "initial time range, e.g. 0:2.5ms (bare numbers are seconds)"},
                       {"--size", "WxH", "window or picture size in pixels (default 1600x900)"},
                       {"--fold", "DIMS",
                        "fold identical ranks of these parallel groups into one lane with a count: tp, pp, dp, cp, "
                        "ep or none; comma-separated (e.g. --fold tp,dp)",
                        true}});
  if (!p) return kExitOk;
  if (p->positional.size() != 1) throw InputError("", "TRACE", "expected exactly one trace file", "ctwin view TRACE");
  viz::ViewerOptions o;
  o.trace = p->positional[0];
  o.compare = p->get("--compare").value_or("");
  o.screenshot = p->get("--screenshot").value_or("");
  for (const std::string& f : {o.trace, o.compare}) {
    if (!f.empty() && !std::filesystem::is_regular_file(f)) {
      throw InputError(f, "", "no such trace file", "a .ctt or .json trace written by 'ctwin run --trace'");
    }
  }
  for (const std::string& f : p->all("--fold")) {
    std::string bad;
    if (!viz::parse_fold_dims(f, o.fold, bad)) {
      throw InputError("", "--fold", "'" + bad + "' is not a parallel group", std::string(viz::kFoldDimNames));
    }
  }
  if (auto r = p->get("--range")) {
    const auto colon = r->find(':');
    if (colon == std::string::npos)
      throw InputError("", "--range", "'" + *r + "' has no ':'", "START:END, e.g. 0:2.5ms");
    const double a = parse_time_ps(r->substr(0, colon), "--range");
    const double b = parse_time_ps(r->substr(colon + 1), "--range");
    if (!(b > a)) throw InputError("", "--range", "END must be after START in '" + *r + "'");
    o.range_ps = std::make_pair(a, b);
  }
  if (auto s = p->get("--size")) {
    int w = 0, h = 0;
    char extra = 0;
    if (std::sscanf(s->c_str(), "%dx%d%c", &w, &h, &extra) != 2 || w < 320 || h < 200 || w > 16384 || h > 16384) {
      throw InputError("", "--size", "'" + *s + "' is not a usable size",
                       "WxH from 320x200 to 16384x16384, e.g. 1600x900");
    }
    o.width = w;
    o.height = h;
  }
  if (!viz::viewer_available()) {
    throw InputError("", "view", "this ctwin was built without the viewer",
                     "a build configured with -DCTWIN_BUILD_VIEWER=ON");
  }
  viz::run_viewer(o);
  if (!o.screenshot.empty()) std::printf("wrote %s (%dx%d)\n", o.screenshot.c_str(), o.width, o.height);
  return kExitOk;
}

}  // namespace ctwin
