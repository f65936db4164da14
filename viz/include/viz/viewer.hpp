// The interactive viewer window (ImGui + GLFW, OpenGL 3) and its offscreen screenshot path.
// The canvases show what TimelineModel::build_frame builds; this layer draws them and adds the
// panels around them (viz/src/gl_*.cpp, viz/src/viewer_*.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "viz/timeline_model.hpp"

namespace ctwin::viz {

struct ViewerOptions {
  std::string trace;       // .ctt or .json
  std::string compare;     // a second trace stacked under the first, same time axis; "" for none
  std::string screenshot;  // write this PNG offscreen and exit; "" opens the window
  std::optional<std::pair<double, double>> range_ps;  // initial [start, end); default: whole run
  int width = 1600, height = 900;
  std::vector<std::string> fold;  // parallel dimensions to fold (parse_fold_dims), e.g. {"tp"}
};

// Opens the window (or renders the screenshot). Throws InputError for a bad trace or no
// display, std::runtime_error when OpenGL cannot start.
void run_viewer(const ViewerOptions& o);

// An RGBA8 picture, rows top to bottom.
struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;
  std::uint32_t pixel(int x, int y) const;  // 0xAABBGGRR, as palette colours
};

// Renders one frame of the viewer (toolbar, canvases, side panel) for `a` (and `b` stacked
// under it, if given) into an offscreen framebuffer of the given size. Needs an X display
// (Xvfb is fine): GLFW opens a hidden window for the GL context.
Image render_offscreen(TimelineModel& a, TimelineModel* b, int width, int height,
                       std::optional<std::pair<double, double>> range_ps, const std::string& name_a = "A",
                       const std::string& name_b = "B");

// Writes a PNG (stb_image_write). Throws InputError if the file cannot be written.
void write_png(const std::string& path, const Image& img);

// True when this build has the window (CTWIN_BUILD_VIEWER).
bool viewer_available();

}  // namespace ctwin::viz
