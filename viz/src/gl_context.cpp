// Opening GLFW, the window, its OpenGL 3.3 context and ImGui, and starting a frame.
#include "gl_context.hpp"

#include <cfloat>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "sim/error.hpp"

namespace ctwin::viz::gl {

namespace {

std::string g_glfw_error;
void on_glfw_error(int code, const char* what) {
  g_glfw_error = "GLFW error " + std::to_string(code) + ": " + (what ? what : "");
}

}  // namespace

GlfwSession::GlfwSession(int w, int h, const char* title, bool visible) {
  glfwSetErrorCallback(on_glfw_error);
  const char* display = std::getenv("DISPLAY");
  if (!display || !*display) {
    throw InputError("", "DISPLAY", "no X display to open the viewer on",
                     "a desktop session, or run under xvfb-run for --screenshot");
  }
  if (!glfwInit())
    throw InputError("", "DISPLAY", "cannot open display '" + std::string(display) + "': " + g_glfw_error);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
  window = glfwCreateWindow(w, h, title, nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3.3 window: " + g_glfw_error);
  }
  glfwMakeContextCurrent(window);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  imgui = true;
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // deterministic layout: no imgui.ini
  ImGui::StyleColorsDark();
  ImGuiStyle& st = ImGui::GetStyle();
  st.WindowRounding = 0;
  st.WindowBorderSize = 0;
  st.WindowPadding = ImVec2(8, 6);
  ImGui_ImplGlfw_InitForOpenGL(window, visible);
  ImGui_ImplOpenGL3_Init("#version 330");
}
GlfwSession::~GlfwSession() {
  if (imgui) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (window) glfwDestroyWindow(window);
  glfwTerminate();
}

void new_frame(bool offscreen, int w, int h) {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (offscreen) {
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = ImVec2(static_cast<float>(w), static_cast<float>(h));
    io.DisplayFramebufferScale = ImVec2(1, 1);
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  }
  ImGui::NewFrame();
}

}  // namespace ctwin::viz::gl
