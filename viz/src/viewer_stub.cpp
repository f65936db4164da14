// Built instead of the GL viewer (gl_*.cpp, viewer_*.cpp, png_write.cpp) when CTWIN_BUILD_VIEWER
// is OFF: the model still builds and is tested; the window and screenshots say they are absent.
#include <stdexcept>

#include "viz/viewer.hpp"

namespace ctwin::viz {

bool viewer_available() { return false; }

void run_viewer(const ViewerOptions&) {
  throw std::runtime_error("this ctwin was built without the viewer (configure with -DCTWIN_BUILD_VIEWER=ON)");
}

Image render_offscreen(TimelineModel&, TimelineModel*, int, int, std::optional<std::pair<double, double>>,
                       const std::string&, const std::string&) {
  throw std::runtime_error("this ctwin was built without the viewer (configure with -DCTWIN_BUILD_VIEWER=ON)");
}

std::uint32_t Image::pixel(int, int) const { return 0; }

void write_png(const std::string&, const Image&) {
  throw std::runtime_error("this ctwin was built without the viewer (configure with -DCTWIN_BUILD_VIEWER=ON)");
}

}  // namespace ctwin::viz
