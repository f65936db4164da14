// The screenshot path: one frame of the viewer rendered into an offscreen framebuffer and
// read back as an Image.
#include <cstring>
#include <stdexcept>
#include <string>

#include "gl_context.hpp"
#include "sim/error.hpp"
#include "viewer_app.hpp"
#include "viz/viewer.hpp"

namespace ctwin::viz {

Image render_offscreen(TimelineModel& a, TimelineModel* b, int width, int height,
                       std::optional<std::pair<double, double>> range_ps, const std::string& name_a,
                       const std::string& name_b) {
  if (width < 320 || height < 200 || width > 16384 || height > 16384) {
    throw InputError("", "--size", std::to_string(width) + "x" + std::to_string(height) + " is out of range",
                     "a size from 320x200 to 16384x16384");
  }
  gl::GlfwSession session(width, height, "ctwin view (offscreen)", false);
  GLuint fbo = 0, color = 0;
  glGenFramebuffers(1, &fbo);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo);
  glGenRenderbuffers(1, &color);
  glBindRenderbuffer(GL_RENDERBUFFER, color);
  glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color);
  if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
    throw std::runtime_error("cannot create an offscreen framebuffer");
  }
  gl::App app;
  app.interactive = false;
  app.panes[0].borrowed = &a;
  app.panes[0].name = name_a;
  if (b) {
    app.panes[1].borrowed = b;
    app.panes[1].name = name_b;
    app.n_panes = 2;
  }
  app.initial_range = range_ps;
  // ImGui lays windows out over a couple of frames (auto-sized tables and panels): render
  // three and keep the last.
  for (int i = 0; i < 3; ++i) {
    gl::new_frame(true, width, height);
    app.frame(width, height);
    ImGui::Render();
    glBindFramebuffer(GL_FRAMEBUFFER, fbo);
    glViewport(0, 0, width, height);
    glClearColor(red_of(palette::kBackground) / 255.f, green_of(palette::kBackground) / 255.f,
                 blue_of(palette::kBackground) / 255.f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  }
  glFinish();
  Image img;
  img.width = width;
  img.height = height;
  img.rgba.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 4);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, img.rgba.data());
  // OpenGL rows run bottom to top; PNG rows top to bottom.
  const std::size_t row = static_cast<std::size_t>(width) * 4;
  std::vector<std::uint8_t> tmp(row);
  for (int y = 0; y < height / 2; ++y) {
    auto* r0 = img.rgba.data() + static_cast<std::size_t>(y) * row;
    auto* r1 = img.rgba.data() + static_cast<std::size_t>(height - 1 - y) * row;
    std::memcpy(tmp.data(), r0, row);
    std::memcpy(r0, r1, row);
    std::memcpy(r1, tmp.data(), row);
  }
  for (std::size_t i = 3; i < img.rgba.size(); i += 4) img.rgba[i] = 255;  // opaque picture
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glDeleteRenderbuffers(1, &color);
  glDeleteFramebuffers(1, &fbo);
  return img;
}

}  // namespace ctwin::viz
