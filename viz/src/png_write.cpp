// The one translation unit that compiles stb_image_write. STB_IMAGE_WRITE_STATIC keeps its
// functions internal, so they never clash with Debian's libstb.so pulled in by imgui.pc.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_image_write.h>

#include "sim/error.hpp"
#include "viz/viewer.hpp"

namespace ctwin::viz {

std::uint32_t Image::pixel(int x, int y) const {
  if (x < 0 || y < 0 || x >= width || y >= height) return 0;
  const auto* p =
      rgba.data() + (static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)) * 4;
  return viz::rgba(p[0], p[1], p[2], p[3]);
}

void write_png(const std::string& path, const Image& img) {
  if (img.width <= 0 || img.height <= 0 || img.rgba.size() != static_cast<std::size_t>(img.width) * img.height * 4) {
    throw InputError(path, "", "empty image");
  }
  if (!stbi_write_png(path.c_str(), img.width, img.height, 4, img.rgba.data(), img.width * 4)) {
    throw InputError(path, "", "cannot write the PNG");
  }
}

}  // namespace ctwin::viz
