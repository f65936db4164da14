// The viewer window: GLFW for the window and input, ImGui for panels, OpenGL 3 to draw.
// Frames are built by TimelineModel::build_frame into reused DrawLists; this file only turns
// those items into ImDrawList calls, handles input, and draws the side panels. The window is
// redrawn only after an input event (glfwWaitEvents) or while a trace is loading.
#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <GL/glext.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "sim/error.hpp"
#include "viz/trace_loader.hpp"
#include "viz/viewer.hpp"

namespace ctwin::viz {

bool viewer_available() { return true; }

namespace {

std::string g_glfw_error;
void on_glfw_error(int code, const char* what) {
  g_glfw_error = "GLFW error " + std::to_string(code) + ": " + (what ? what : "");
}

// GLFW and the GL context, torn down in reverse order whatever happens.
struct GlfwSession {
  GLFWwindow* window = nullptr;
  bool imgui = false;
  GlfwSession(int w, int h, const char* title, bool visible) {
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
  ~GlfwSession() {
    if (imgui) {
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      ImGui::DestroyContext();
    }
    if (window) glfwDestroyWindow(window);
    glfwTerminate();
  }
  GlfwSession(const GlfwSession&) = delete;
  GlfwSession& operator=(const GlfwSession&) = delete;
};

ImU32 im(std::uint32_t c) { return static_cast<ImU32>(c); }

void render_list(const DrawList& list, ImDrawList* dl) {
  for (const auto& r : list.rects) {
    if (r.filled) {
      // A 1-pixel gap at the right of wide ops keeps back-to-back ops apart.
      const float x1 = r.kind == ItemKind::event && r.x1 - r.x0 >= 6 ? r.x1 - 1 : r.x1;
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(x1, r.y1), im(r.color));
    } else {
      dl->AddRect(ImVec2(r.x0 + 0.5f, r.y0 + 0.5f), ImVec2(r.x1 - 0.5f, r.y1 - 0.5f), im(r.color), 0, 0,
                  r.kind == ItemKind::overlay && r.color == palette::kSelection ? 2.f : 1.f);
    }
  }
  for (const auto& l : list.lines) {
    dl->AddLine(ImVec2(l.x0, l.y0), ImVec2(l.x1, l.y1), im(l.color), l.thickness);
    if (l.arrow_head) {
      const float dx = l.x1 - l.x0, dy = l.y1 - l.y0;
      const float len = std::sqrt(dx * dx + dy * dy);
      if (len > 1) {
        const float ux = dx / len, uy = dy / len;
        const ImVec2 tip(l.x1, l.y1);
        dl->AddTriangleFilled(tip, ImVec2(l.x1 - 7 * ux - 3.5f * uy, l.y1 - 7 * uy + 3.5f * ux),
                              ImVec2(l.x1 - 7 * ux + 3.5f * uy, l.y1 - 7 * uy - 3.5f * ux), im(l.color));
      }
    }
  }
  ImFont* font = ImGui::GetFont();
  const float size = ImGui::GetFontSize();
  for (const auto& t : list.texts) {
    const std::string_view s = list.text_of(t);
    const ImVec4 clip(t.clip_x0, t.y - 2, t.clip_x1, t.y + size + 2);
    dl->AddText(font, size, ImVec2(t.x, t.y), im(t.color), s.data(), s.data() + s.size(), 0, &clip);
  }
}

struct Pane {
  std::string name;
  std::unique_ptr<TraceLoader> loader;
  std::unique_ptr<TimelineModel> model;  // set when loaded
  TimelineModel* borrowed = nullptr;     // the screenshot path renders caller's models
  float scroll_y = 0;
  DrawList list;
  TimelineModel* get() { return borrowed ? borrowed : model.get(); }
};

// The window's state and one frame of UI; shared by the window and the screenshot path.
class App {
 public:
  std::array<Pane, 2> panes;
  int n_panes = 1;
  View view;
  bool fitted = false;
  std::optional<std::pair<double, double>> initial_range;
  bool interactive = true;
  std::string error;  // a load failure, reported after the window closes

  void frame(int w, int h);

 private:
  int sel_pane = -1;
  std::uint32_t sel_event = kNoIndex;
  int hover_pane = -1;
  Hit hover;
  enum class Drag { none, pan, range, minimap } drag = Drag::none;
  int drag_pane = 0;
  ImVec2 drag_start{};
  double drag_t0 = 0;
  float drag_scroll = 0;
  char search[128] = {};
  bool focus_search = false;
  std::size_t match_count = 0;
  double build_ms = 0;

  bool loaded() {
    for (int p = 0; p < n_panes; ++p) {
      if (!panes[p].get()) return false;
    }
    return true;
  }
  void fit(const std::vector<Canvas>& cs);
  void clamp_scroll(const std::vector<Canvas>& cs);
  void handle_input(const std::vector<Canvas>& cs);
  void jump_to_match(bool forward, const std::vector<Canvas>& cs);
  void toolbar(int w);
  void side_panel(int w, int h);
  void tooltip();
  void loading_panel(int w, int h);
};

void App::fit(const std::vector<Canvas>& cs) {
  double lo = 1e300, hi = -1e300;
  for (int p = 0; p < n_panes; ++p) {
    lo = std::min(lo, static_cast<double>(panes[p].get()->begin_ps()));
    hi = std::max(hi, static_cast<double>(panes[p].get()->end_ps()));
  }
  const double pad = (hi - lo) * 0.01;
  show_range(view, cs[0], lo - pad, hi + pad);
}

void App::clamp_scroll(const std::vector<Canvas>& cs) {
  for (int p = 0; p < n_panes; ++p) {
    const float visible = TimelineModel::rows_bottom(cs[p]) - TimelineModel::rows_top(cs[p]);
    panes[p].scroll_y = std::clamp(panes[p].scroll_y, 0.f, std::max(0.f, panes[p].get()->content_height() - visible));
  }
}

void App::jump_to_match(bool forward, const std::vector<Canvas>& cs) {
  const int p = sel_pane >= 0 ? sel_pane : 0;
  TimelineModel* m = panes[p].get();
  const double centre = view.t0_ps + (view.t1_ps(cs[p]) - view.t0_ps) / 2;
  double t = centre;
  if (sel_pane == p && sel_event != kNoIndex) t = static_cast<double>(m->trace().events[sel_event].start_ps);
  const std::uint32_t e = m->next_match(t, forward);
  if (e == kNoIndex) return;
  sel_pane = p;
  sel_event = e;
  const auto& ev = m->trace().events[e];
  const double span = view.t1_ps(cs[p]) - view.t0_ps;
  if (static_cast<double>(ev.dur_ps) > span * 0.8) {
    show_range(view, cs[p], static_cast<double>(ev.start_ps) - ev.dur_ps * 0.1,
               static_cast<double>(ev.start_ps + ev.dur_ps) + ev.dur_ps * 0.1);
  } else {
    view.t0_ps = static_cast<double>(ev.start_ps) + ev.dur_ps / 2.0 - span / 2;
  }
  // Bring its lane into view.
  const std::uint32_t r = m->row_of_lane(ev.lane);
  if (r != kNoIndex) {
    const float visible = TimelineModel::rows_bottom(cs[p]) - TimelineModel::rows_top(cs[p]);
    const float y = m->rows()[r].y;
    if (y < panes[p].scroll_y || y + kLanePitch > panes[p].scroll_y + visible) panes[p].scroll_y = y - visible / 3;
  }
}

void App::handle_input(const std::vector<Canvas>& cs) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  int p = -1;
  for (int i = 0; i < n_panes; ++i) {
    const Canvas& c = cs[i];
    if (mouse.x >= c.x && mouse.x < c.x + c.w && mouse.y >= c.y && mouse.y < c.y + c.h) p = i;
  }
  const bool over_canvas = p >= 0 && !io.WantCaptureMouse;
  hover_pane = -1;
  hover = Hit{};
  if (over_canvas) {
    const Canvas& c = cs[p];
    View pv = view;
    pv.scroll_y = panes[p].scroll_y;
    TimelineModel* m = panes[p].get();
    const float xl = c.x + kLabelWidth;
    const bool in_minimap = mouse.y >= TimelineModel::rows_bottom(c);
    if (io.MouseWheel != 0) {
      if (io.KeyShift || mouse.x < xl) {
        panes[p].scroll_y -= io.MouseWheel * 3 * kLanePitch;
      } else {
        zoom_around(view, c, std::max(mouse.x, xl), std::pow(0.8, io.MouseWheel));
      }
    }
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
      drag_pane = p;
      drag_start = mouse;
      drag_t0 = view.t0_ps;
      drag_scroll = panes[p].scroll_y;
      drag = in_minimap ? Drag::minimap : Drag::pan;
    }
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
      drag_pane = p;
      drag_start = mouse;
      drag = Drag::range;
    }
    if (drag == Drag::none) {
      hover = m->hit_test(pv, c, mouse.x, mouse.y);
      hover_pane = p;
    }
  }
  if (drag != Drag::none) {
    const Canvas& c = cs[drag_pane];
    TimelineModel* m = panes[drag_pane].get();
    const float dx = mouse.x - drag_start.x, dy = mouse.y - drag_start.y;
    if (drag == Drag::pan && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      view.t0_ps = drag_t0 - dx * view.ps_per_px;
      panes[drag_pane].scroll_y = drag_scroll - dy;
    } else if (drag == Drag::minimap && ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      const double span = view.t1_ps(c) - view.t0_ps;
      view.t0_ps = m->minimap_time_at(c, mouse.x) - span / 2;
    }
    if (drag == Drag::pan && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
      if (std::fabs(dx) < 3 && std::fabs(dy) < 3) {  // a click: select, or toggle a group
        View pv = view;
        pv.scroll_y = panes[drag_pane].scroll_y;
        const Hit h = m->hit_test(pv, c, mouse.x, mouse.y);
        if (h.row_index != kNoIndex && (h.row_kind == RowKind::group_header || h.row_kind == RowKind::summary)) {
          m->set_collapsed(h.row_index, !m->groups()[h.row_index].collapsed);
        } else {
          sel_pane = h.event != kNoIndex ? drag_pane : -1;
          sel_event = h.event;
        }
      }
      drag = Drag::none;
    } else if (drag == Drag::minimap && ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
      drag = Drag::none;
    } else if (drag == Drag::range && ImGui::IsMouseReleased(ImGuiMouseButton_Right)) {
      const float x0 = std::max(std::min(drag_start.x, mouse.x), c.x + kLabelWidth);
      const float x1 = std::max(drag_start.x, mouse.x);
      if (x1 - x0 > 4) show_range(view, c, view.time_at(c, x0), view.time_at(c, x1));
      drag = Drag::none;
    }
  }
  // Keyboard shortcuts (not while typing in the search box).
  if (!io.WantCaptureKeyboard) {
    const Canvas& c = cs[0];
    const float mid = c.x + kLabelWidth + (c.w - kLabelWidth) / 2;
    const double span = view.t1_ps(c) - view.t0_ps;
    if (ImGui::IsKeyPressed(GLFW_KEY_W) || ImGui::IsKeyPressed(GLFW_KEY_EQUAL)) zoom_around(view, c, mid, 0.7);
    if (ImGui::IsKeyPressed(GLFW_KEY_S) || ImGui::IsKeyPressed(GLFW_KEY_MINUS)) zoom_around(view, c, mid, 1 / 0.7);
    if (ImGui::IsKeyPressed(GLFW_KEY_A) || ImGui::IsKeyPressed(GLFW_KEY_LEFT)) view.t0_ps -= span * 0.15;
    if (ImGui::IsKeyPressed(GLFW_KEY_D) || ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) view.t0_ps += span * 0.15;
    if (ImGui::IsKeyPressed(GLFW_KEY_F) && !io.KeyCtrl) fit(cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_HOME)) fit(cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_UP)) panes[0].scroll_y -= kLanePitch * 3, panes[1].scroll_y -= kLanePitch * 3;
    if (ImGui::IsKeyPressed(GLFW_KEY_DOWN)) panes[0].scroll_y += kLanePitch * 3, panes[1].scroll_y += kLanePitch * 3;
    if (ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP)) panes[0].scroll_y -= c.h * 0.8f, panes[1].scroll_y -= c.h * 0.8f;
    if (ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN)) panes[0].scroll_y += c.h * 0.8f, panes[1].scroll_y += c.h * 0.8f;
    if (ImGui::IsKeyPressed(GLFW_KEY_Z) && sel_event != kNoIndex) {
      const auto& e = panes[sel_pane].get()->trace().events[sel_event];
      const double pad = std::max(1.0, e.dur_ps * 0.1);
      show_range(view, c, static_cast<double>(e.start_ps) - pad, static_cast<double>(e.start_ps + e.dur_ps) + pad);
    }
    if (ImGui::IsKeyPressed(GLFW_KEY_C)) {
      for (int i = 0; i < n_panes; ++i) {
        TimelineModel* m = panes[i].get();
        const bool any_open =
            std::any_of(m->groups().begin(), m->groups().end(), [](const Group& g) { return !g.collapsed; });
        m->set_all_collapsed(any_open);
      }
    }
    if (ImGui::IsKeyPressed(GLFW_KEY_N)) jump_to_match(!io.KeyShift, cs);
    if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE)) sel_event = kNoIndex, sel_pane = -1;
    if (ImGui::IsKeyPressed(GLFW_KEY_SLASH) || (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_F))) focus_search = true;
  }
  clamp_scroll(cs);
}

void App::toolbar(int w) {
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(static_cast<float>(w), kToolbarHeight));
  ImGui::Begin("##toolbar", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  const std::vector<Canvas> cs = canvas_layout(w, static_cast<int>(ImGui::GetIO().DisplaySize.y), n_panes == 2);
  if (ImGui::Button("Fit (F)")) fit(cs);
  ImGui::SameLine();
  if (ImGui::Button("Collapse all")) {
    for (int p = 0; p < n_panes; ++p) panes[p].get()->set_all_collapsed(true);
  }
  ImGui::SameLine();
  if (ImGui::Button("Expand all")) {
    for (int p = 0; p < n_panes; ++p) panes[p].get()->set_all_collapsed(false);
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(220);
  if (focus_search) {
    ImGui::SetKeyboardFocusHere();
    focus_search = false;
  }
  if (ImGui::InputTextWithHint("##search", "search ops by name (/)", search, sizeof search,
                               ImGuiInputTextFlags_EnterReturnsTrue)) {
    match_count = 0;
    for (int p = 0; p < n_panes; ++p) match_count += panes[p].get()->set_search(search);
    jump_to_match(true, cs);
  }
  ImGui::SameLine();
  if (ImGui::ArrowButton("##prev", ImGuiDir_Left)) jump_to_match(false, cs);
  ImGui::SameLine();
  if (ImGui::ArrowButton("##next", ImGuiDir_Right)) jump_to_match(true, cs);
  ImGui::SameLine();
  if (panes[0].get()->search().empty())
    ImGui::TextDisabled("no search");
  else
    ImGui::Text("%zu matches", match_count);
  ImGui::SameLine();
  ImGui::TextDisabled("| frame built in %.2f ms | %s%s%s", build_ms, panes[0].name.c_str(), n_panes == 2 ? " vs " : "",
                      n_panes == 2 ? panes[1].name.c_str() : "");
  ImGui::End();
}

// Step-breakdown entries take the colour of the ops they stand for.
std::uint32_t breakdown_color(const std::string& key) {
  if (key.find("compute") != std::string::npos) return kind_color("gemm");
  if (key.find("comm") != std::string::npos) return kind_color("all_reduce");
  if (key.find("optimizer") != std::string::npos) return kind_color("optimizer");
  if (key.find("bubble") != std::string::npos || key.find("idle") != std::string::npos) return kind_color("idle");
  if (key.find("other") != std::string::npos) return kind_color("memcpy");
  return kind_color(key);
}

void summary_table(const Trace& t, const char* id) {
  double step = 0;
  for (const auto& [k, v] : t.summary) {
    if (k == "step_time_s") step = v;
  }
  // Step breakdown: the "*_s" figures other than the step time, as a stacked bar.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (step > 0) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x;
    float x = p.x;
    for (const auto& [k, v] : t.summary) {
      if (k == "step_time_s" || k.size() < 2 || k.compare(k.size() - 2, 2, "_s") != 0 || !(v > 0)) continue;
      const float bw = static_cast<float>(std::min(1.0, v / step)) * w;
      dl->AddRectFilled(ImVec2(x, p.y), ImVec2(std::min(x + bw, p.x + w), p.y + 14), breakdown_color(k));
      x += bw;
    }
    ImGui::Dummy(ImVec2(w, 16));
  }
  if (ImGui::BeginTable(id, 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const auto& [k, v] : t.summary) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const bool secs = k.size() > 2 && k.compare(k.size() - 2, 2, "_s") == 0;
      if (secs && k != "step_time_s") {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(p, ImVec2(p.x + 8, p.y + 12), breakdown_color(k));
        ImGui::Dummy(ImVec2(10, 12));
        ImGui::SameLine();
      }
      ImGui::TextUnformatted(k.c_str());
      ImGui::TableNextColumn();
      if (secs)
        ImGui::TextUnformatted(format_time(v * 1e12).c_str());
      else
        ImGui::Text("%.4g", v);
      ImGui::TableNextColumn();
      if (secs && step > 0 && k != "step_time_s") ImGui::Text("%.1f%%", 100 * v / step);
    }
    ImGui::EndTable();
  }
}

void App::side_panel(int w, int h) {
  ImGui::SetNextWindowPos(ImVec2(static_cast<float>(w) - kSidePanelWidth, kToolbarHeight));
  ImGui::SetNextWindowSize(ImVec2(kSidePanelWidth, static_cast<float>(h) - kToolbarHeight));
  ImGui::Begin("##side", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Details")) {
    if (sel_event == kNoIndex || sel_pane < 0) {
      ImGui::TextDisabled("click an op to select it");
    } else {
      const TimelineModel& m = *panes[sel_pane].get();
      const Trace& t = m.trace();
      const TraceEvent& e = t.events[sel_event];
      ImGui::TextWrapped("%s", t.str(e.name).c_str());
      if (ImGui::BeginTable("##details", 2, ImGuiTableFlags_SizingStretchProp)) {
        auto row = [](const char* k, const std::string& v) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::TextDisabled("%s", k);
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(v.c_str());
        };
        row("kind", t.str(e.kind));
        row("lane", m.lane_label(e.lane));
        row("group", t.str(t.lanes[e.lane].group));
        row("start", format_time(static_cast<double>(e.start_ps)));
        row("duration", format_time(static_cast<double>(e.dur_ps)));
        row("end", format_time(static_cast<double>(e.start_ps + e.dur_ps)));
        if (e.flops > 0) {
          row("FLOPs", format_flops(e.flops));
          if (e.dur_ps > 0) row("achieved", format_flops(e.flops / (e.dur_ps * 1e-12)).append("/s"));
        }
        if (e.bytes > 0) {
          row("bytes", format_bytes(e.bytes));
          if (e.dur_ps > 0) row("bandwidth", format_bytes(e.bytes / (e.dur_ps * 1e-12)).append("/s"));
        }
        if (e.group != kNoIndex) {
          char id[24];
          std::snprintf(id, sizeof id, "#%u", e.group);
          row("collective", id);
        }
        ImGui::EndTable();
      }
    }
  }
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Summary")) {
    for (int p = 0; p < n_panes; ++p) {
      const Trace& t = panes[p].get()->trace();
      if (n_panes == 2) ImGui::TextDisabled("%s: %s", p == 0 ? "A" : "B", panes[p].name.c_str());
      if (t.summary.empty())
        ImGui::TextDisabled("no summary in this trace");
      else
        summary_table(t, p == 0 ? "##summary_a" : "##summary_b");
    }
  }
  ImGui::SetNextItemOpen(true, ImGuiCond_Once);
  if (ImGui::CollapsingHeader("Legend")) {
    std::vector<std::string> shown;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int p = 0; p < n_panes; ++p) {
      const Trace& t = panes[p].get()->trace();
      for (auto k : panes[p].get()->kinds()) {
        const std::string& name = t.str(k);
        const std::uint32_t col = kind_color(name);
        if (std::find(shown.begin(), shown.end(), name) != shown.end()) continue;  // once per kind
        shown.push_back(name);
        const ImVec2 pos = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(ImVec2(pos.x, pos.y + 1), ImVec2(pos.x + 12, pos.y + 13), col);
        ImGui::Dummy(ImVec2(14, 13));
        ImGui::SameLine();
        ImGui::TextUnformatted(name.empty() ? "(no kind)" : name.c_str());
      }
    }
  }
  if (ImGui::CollapsingHeader("Shortcuts")) {
    ImGui::TextUnformatted(
        "wheel        zoom at the cursor\n"
        "shift+wheel  scroll lanes\n"
        "left drag    pan\n"
        "right drag   zoom to the selection\n"
        "click        select an op / fold a group\n"
        "minimap      click or drag to move\n"
        "W S / + -    zoom in / out\n"
        "A D / arrows pan\n"
        "F / Home     fit the whole run\n"
        "Z            zoom to the selected op\n"
        "C            collapse / expand groups\n"
        "/ or Ctrl+F  search; N / Shift+N next/prev\n"
        "Esc          clear the selection");
  }
  ImGui::End();
}

void App::tooltip() {
  if (hover_pane < 0 || hover.event == kNoIndex) return;
  const TimelineModel& m = *panes[hover_pane].get();
  const Trace& t = m.trace();
  const TraceEvent& e = t.events[hover.event];
  ImGui::BeginTooltip();
  if (hover.count > 1) ImGui::TextDisabled("%u ops here; zoom in to separate them", hover.count);
  ImGui::TextUnformatted(t.str(e.name).c_str());
  ImGui::TextDisabled("%s on %s", t.str(e.kind).c_str(), m.lane_label(e.lane).c_str());
  ImGui::Text("start %s   duration %s", format_time(static_cast<double>(e.start_ps)).c_str(),
              format_time(static_cast<double>(e.dur_ps)).c_str());
  if (e.flops > 0) ImGui::Text("%s", format_flops(e.flops).c_str());
  if (e.bytes > 0) ImGui::Text("%s", format_bytes(e.bytes).c_str());
  if (e.group != kNoIndex) ImGui::Text("collective #%u", e.group);
  ImGui::EndTooltip();
}

void App::loading_panel(int w, int h) {
  ImGui::SetNextWindowPos(ImVec2(static_cast<float>(w) / 2, static_cast<float>(h) / 2), 0, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(420, 0));
  ImGui::Begin("Loading", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings);
  for (int p = 0; p < n_panes; ++p) {
    Pane& pane = panes[p];
    ImGui::Text("%s", pane.name.c_str());
    if (pane.get()) {
      ImGui::ProgressBar(1, ImVec2(-1, 0), "ready");
    } else if (pane.loader) {
      const std::string stage = pane.loader->stage();
      ImGui::ProgressBar(static_cast<float>(pane.loader->progress()), ImVec2(-1, 0), stage.c_str());
    }
  }
  ImGui::End();
}

void App::frame(int w, int h) {
  for (int p = 0; p < n_panes; ++p) {
    Pane& pane = panes[p];
    if (!pane.get() && pane.loader && pane.loader->done()) {
      try {
        pane.model = pane.loader->take();
      } catch (const std::exception& e) {
        error = e.what();
        pane.loader.reset();
      }
    }
  }
  if (!loaded()) {
    loading_panel(w, h);
    return;
  }
  const std::vector<Canvas> cs = canvas_layout(w, h, n_panes == 2);
  if (!fitted) {
    fitted = true;
    if (initial_range)
      show_range(view, cs[0], initial_range->first, initial_range->second);
    else
      fit(cs);
  }
  if (interactive) handle_input(cs);
  const auto t0 = std::chrono::steady_clock::now();
  for (int p = 0; p < n_panes; ++p) {
    View pv = view;
    pv.scroll_y = panes[p].scroll_y;
    FrameOptions opt;
    if (sel_pane == p) opt.selected_event = sel_event;
    if (hover_pane == p) opt.hovered_event = hover.event;
    if (drag == Drag::range && drag_pane == p) {
      opt.range_x0 = std::min(drag_start.x, ImGui::GetIO().MousePos.x);
      opt.range_x1 = std::max(drag_start.x, ImGui::GetIO().MousePos.x);
    }
    std::string title;
    if (n_panes == 2) opt.title = p == 0 ? "A (top)" : "B (bottom)";
    panes[p].get()->build_frame(pv, cs[p], opt, panes[p].list);
  }
  build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ImDrawList* bg = ImGui::GetBackgroundDrawList();
  for (int p = 0; p < n_panes; ++p) render_list(panes[p].list, bg);
  toolbar(w);
  side_panel(w, h);
  if (interactive) tooltip();
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

}  // namespace

Image render_offscreen(TimelineModel& a, TimelineModel* b, int width, int height,
                       std::optional<std::pair<double, double>> range_ps, const std::string& name_a,
                       const std::string& name_b) {
  if (width < 320 || height < 200 || width > 16384 || height > 16384) {
    throw InputError("", "--size", std::to_string(width) + "x" + std::to_string(height) + " is out of range",
                     "a size from 320x200 to 16384x16384");
  }
  GlfwSession session(width, height, "ctwin view (offscreen)", false);
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
  App app;
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
    new_frame(true, width, height);
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

void run_viewer(const ViewerOptions& o) {
  if (!o.screenshot.empty()) {
    auto load = [](const std::string& path) {
      return std::make_unique<TimelineModel>(read_trace_with_progress(path, {}));
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
  GlfwSession session(o.width, o.height, title.c_str(), true);
  glfwSwapInterval(1);
  App app;
  app.panes[0].name = std::filesystem::path(o.trace).filename().string();
  app.panes[0].loader = std::make_unique<TraceLoader>(o.trace);
  if (!o.compare.empty()) {
    app.panes[1].name = std::filesystem::path(o.compare).filename().string();
    app.panes[1].loader = std::make_unique<TraceLoader>(o.compare);
    app.n_panes = 2;
  }
  app.initial_range = o.range_ps;
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
    new_frame(false, w, h);
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
