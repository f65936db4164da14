// The GL side's common header: OpenGL, GLFW and ImGui (with its GLFW and OpenGL 3 backends),
// and the window and context every GL front end needs. Only viz/src/gl_*.cpp and
// viz/src/viewer_*.cpp include it; the model never does.
#pragma once

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <GL/glext.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

namespace ctwin::viz::gl {

// GLFW, a window with an OpenGL 3.3 core context and ImGui on it, torn down in reverse order
// whatever happens. Throws InputError when there is no display, std::runtime_error when the
// window or context cannot be created.
struct GlfwSession {
  GLFWwindow* window = nullptr;
  bool imgui = false;
  GlfwSession(int w, int h, const char* title, bool visible);
  ~GlfwSession();
  GlfwSession(const GlfwSession&) = delete;
  GlfwSession& operator=(const GlfwSession&) = delete;
};

// Starts an ImGui frame; `offscreen` sets the display size to w x h and keeps the mouse away.
void new_frame(bool offscreen, int w, int h);

}  // namespace ctwin::viz::gl
