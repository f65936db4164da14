// The interactive window: load the traces in the background, then redraw only after an
// input event (glfwWaitEvents) or while a trace is loading.
#include <filesystem>
#include <memory>
#include <string>

#include "gl_context.hpp"
#include "sim/error.hpp"
#include "viewer_app.hpp"
#include "viz/viewer.hpp"

namespace ctwin::viz {

bool viewer_available() { return true; }

void run_viewer(const ViewerOptions& o) {
  if (!o.screenshot.empty()) {
    auto load = [&o](const std::string& path) {
      auto m = std::make_unique<TimelineModel>(read_trace_with_progress(path, {}));
      if (!o.fold.empty()) m->set_fold(o.fold);
      return m;
    };
    auto a = load(o.trace);
    std::unique_ptr<TimelineModel> b;
    if (!o.compare.empty()) b = load(o.compare);
    const Image img =
        render_offscreen(*a, b.get(), o.width, o.height, o.range_ps, std::filesystem::path(o.trace).filename().string(),
                         std::filesystem::path(o.compare).filename().string());
    write_png(o.screenshot, img);
    return;
  }
  const std::string title = "ctwin view - " + o.trace + (o.compare.empty() ? "" : " vs " + o.compare);
  gl::GlfwSession session(o.width, o.height, title.c_str(), true);
  glfwSwapInterval(1);
  gl::App app;
  app.panes[0].name = std::filesystem::path(o.trace).filename().string();
  app.panes[0].loader = std::make_unique<TraceLoader>(o.trace);
  if (!o.compare.empty()) {
    app.panes[1].name = std::filesystem::path(o.compare).filename().string();
    app.panes[1].loader = std::make_unique<TraceLoader>(o.compare);
    app.n_panes = 2;
  }
  app.initial_range = o.range_ps;
  app.fold = o.fold;
  int settle = 3;  // frames to draw after an event, so ImGui's hover and layout settle
  while (!glfwWindowShouldClose(session.window)) {
    const bool loading = !app.panes[0].get() || (app.n_panes == 2 && !app.panes[1].get());
    if (loading) {
      glfwWaitEventsTimeout(0.05);  // animate the progress bar
    } else if (settle > 0) {
      glfwPollEvents();
    } else {
      glfwWaitEvents();  // idle: no redraw until something happens
      settle = 3;
    }
    --settle;
    int w = 0, h = 0;
    glfwGetFramebufferSize(session.window, &w, &h);
    if (w <= 0 || h <= 0) continue;
    gl::new_frame(false, w, h);
    app.frame(w, h);
    ImGui::Render();
    glViewport(0, 0, w, h);
    glClearColor(red_of(palette::kBackground) / 255.f, green_of(palette::kBackground) / 255.f,
                 blue_of(palette::kBackground) / 255.f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    glfwSwapBuffers(session.window);
    if (!app.error.empty()) break;
    if (glfwGetKey(session.window, GLFW_KEY_Q) == GLFW_PRESS &&
        glfwGetKey(session.window, GLFW_KEY_LEFT_CONTROL) == GLFW_PRESS) {
      break;
    }
  }
  if (!app.error.empty()) throw InputError("", "", app.error);
}

}  // namespace ctwin::viz
