// The ImGui panels around the canvases: toolbar (buttons, search), side panel (details,
// summary, legend, shortcuts), the hover tooltip and the loading progress.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "color_ops.hpp"
#include "viewer_app.hpp"

namespace ctwin::viz::gl {

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
  // The build time varies run to run: the window shows it, a screenshot does not, so the same
  // trace always gives the same PNG.
  if (interactive) {
    ImGui::TextDisabled("| frame built in %.2f ms | %s%s%s", build_ms, panes[0].name.c_str(),
                        n_panes == 2 ? " vs " : "", n_panes == 2 ? panes[1].name.c_str() : "");
  } else {
    ImGui::TextDisabled("| %s%s%s", panes[0].name.c_str(), n_panes == 2 ? " vs " : "",
                        n_panes == 2 ? panes[1].name.c_str() : "");
  }
  ImGui::End();
}

namespace {

// Step-breakdown entries take the colour of the ops they stand for.
std::uint32_t breakdown_color(const std::string& key) {
  if (key == "exposed_tp_s") return kind_color("reduce_scatter");
  if (key == "exposed_cp_s") return kind_color("all_gather");
  if (key == "exposed_ep_s") return kind_color("all_to_all");
  if (key == "exposed_dp_s") return kind_color("all_reduce");
  if (key == "exposed_pp_s") return kind_color("send_recv");
  if (key.find("compute") != std::string::npos) return kind_color("gemm");
  if (key.find("comm") != std::string::npos) return kind_color("all_reduce");
  if (key.find("optimizer") != std::string::npos) return kind_color("optimizer");
  if (key.find("bubble") != std::string::npos || key.find("idle") != std::string::npos) return kind_color("idle");
  if (key.find("other") != std::string::npos) return kind_color("memcpy");
  return kind_color(key);
}

void summary_table(const TimelineModel& m, const char* id) {
  const auto rows = m.summary_rows();
  double step = 0;
  for (const auto& [k, v] : rows) {
    if (k == "step_time_s") step = v;
  }
  // The step's own breakdown: the "*_s" figures other than the step time and the totals
  // that the per-group rows break down again, as a stacked bar.
  auto in_bar = [](const std::string& k) {
    return k != "step_time_s" && k != "exposed_comm_s" && k.rfind("trace_", 0) != 0 && k.size() >= 2 &&
           k.compare(k.size() - 2, 2, "_s") == 0;
  };
  bool by_group = false;
  for (const auto& [k, v] : rows) by_group = by_group || (k.rfind("exposed_", 0) == 0 && k != "exposed_comm_s");
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (step > 0) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x;
    float x = p.x;
    for (const auto& [k, v] : rows) {
      if (!in_bar(k) || !(v > 0)) continue;
      if (!by_group && k.rfind("exposed_", 0) == 0) continue;
      const float bw = static_cast<float>(std::min(1.0, v / step)) * w;
      dl->AddRectFilled(ImVec2(x, p.y), ImVec2(std::min(x + bw, p.x + w), p.y + 14), breakdown_color(k));
      x += bw;
    }
    if (!by_group) {
      for (const auto& [k, v] : rows) {
        if (k != "exposed_comm_s" || !(v > 0)) continue;
        const float bw = static_cast<float>(std::min(1.0, v / step)) * w;
        dl->AddRectFilled(ImVec2(x, p.y), ImVec2(std::min(x + bw, p.x + w), p.y + 14), breakdown_color(k));
      }
    }
    ImGui::Dummy(ImVec2(w, 16));
  }
  if (ImGui::BeginTable(id, 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (const auto& [k, v] : rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const bool secs = k.size() > 2 && k.compare(k.size() - 2, 2, "_s") == 0;
      if (secs && k != "step_time_s") {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(p, ImVec2(p.x + 8, p.y + 12), breakdown_color(k));
        ImGui::Dummy(ImVec2(10, 12));
        ImGui::SameLine();
      }
      ImGui::TextUnformatted(summary_label(k).c_str());
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

}  // namespace

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
      const TimelineModel& m = *panes[p].get();
      if (n_panes == 2) ImGui::TextDisabled("%s: %s", p == 0 ? "A" : "B", panes[p].name.c_str());
      if (m.summary_rows().empty())
        ImGui::TextDisabled("no summary in this trace");
      else
        summary_table(m, p == 0 ? "##summary_a" : "##summary_b");
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
    // How communication is marked, and what a stacked column means.
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    const std::uint32_t ar = kind_color("all_reduce");
    dl->AddRectFilled(ImVec2(pos.x, pos.y + 1), ImVec2(pos.x + 12, pos.y + 13), ar);
    dl->AddRectFilled(ImVec2(pos.x, pos.y + 1), ImVec2(pos.x + 12, pos.y + 1 + kExposedBandPx), palette::kExposedBand);
    ImGui::Dummy(ImVec2(14, 13));
    ImGui::SameLine();
    ImGui::TextUnformatted("exposed communication (compute idle)");
    const ImVec2 pos2 = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(ImVec2(pos2.x, pos2.y + 1), ImVec2(pos2.x + 12, pos2.y + 13),
                      blend(ar, palette::kLaneBackground, 0.6f));
    ImGui::Dummy(ImVec2(14, 13));
    ImGui::SameLine();
    ImGui::TextUnformatted("overlapped communication (faded)");
    ImGui::TextDisabled("dense columns: stacked time share per kind");
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

}  // namespace ctwin::viz::gl
