#include "sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "report_format.hpp"
#include "sim/error.hpp"
#include "workloads/pipeline_split.hpp"

namespace ctwin {

namespace {

double num(const OrderedJson& j, const char* pointer) {
  const auto ptr = OrderedJson::json_pointer(pointer);
  return j.contains(ptr) && j.at(ptr).is_number() ? j.at(ptr).get<double>() : std::nan("");
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The objective in its own unit, as a table shows it.
std::string objective_text(const SweepObjective& o, double v) {
  const std::string_view n = o.name;
  if (n == "mfu") return fmt("%.1f%%", 100 * v);
  if (n.find("cost") != std::string_view::npos) return fmt("$%.4g", v);
  if (n.size() > 2 && n.substr(n.size() - 2) == "_s") return fmt("%.4g s", v);
  return fmt("%.4g", v);
}

bool is_training(const SweepResult& r) { return r.objective.training; }

struct Counts {
  std::size_t simulated = 0, oom = 0, pruned = 0, invalid = 0;
};
Counts counts(const SweepResult& r) {
  Counts c;
  for (const auto& row : r.rows) {
    if (row.status == SweepStatus::simulated) ++c.simulated;
    if (row.status == SweepStatus::out_of_memory) ++c.oom;
    if (row.status == SweepStatus::bound_pruned) ++c.pruned;
    if (row.status == SweepStatus::invalid) ++c.invalid;
  }
  return c;
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() > w) s = s.substr(0, w - 1) + "~";
  return s + std::string(w - s.size(), ' ');
}

// One table row's figures after the label.
std::string figures(const SweepResult& r, const SweepRow& row) {
  const OrderedJson& j = row.report;
  char buf[200];
  if (r.objective.job) {
    // The whole job's figures beside the step's.
    std::snprintf(buf, sizeof buf, "%10.4f %8.1f %6.2f%% %10.0f %8.2f%% %9.2f", num(j, "/step_time_s"),
                  num(j, "/job/time_to_train_days"), 100 * num(j, "/job/effective_training_time_ratio"),
                  num(j, "/job/interruptions/total"), 100 * num(j, "/job/checkpoint_overhead_fraction"),
                  num(j, "/job/checkpoint/bytes_per_gpu") / (1u << 30));
  } else if (is_training(r)) {
    const double step = num(j, "/step_time_s");
    std::snprintf(buf, sizeof buf, "%10.4f %6.1f%% %8.1f %9.1f %7.1f%% %7.1f%% %7.1f%%", step, 100 * num(j, "/mfu"),
                  num(j, "/tflops_per_gpu"), num(j, "/memory/peak_bytes") / (1u << 30),
                  100 * num(j, "/breakdown_s/compute") / step, 100 * num(j, "/breakdown_s/exposed_comm") / step,
                  100 * num(j, "/breakdown_s/bubble") / step);
  } else {
    std::snprintf(buf, sizeof buf, "%9.3f %9.3f %9.4f %10.1f %6.1f%%",
                  num(j, "/goodput_requests_per_s") / num(j, "/fleet/gpus"), num(j, "/ttft_s/p99"),
                  num(j, "/tpot_s/p99"), num(j, "/throughput/output_tokens_per_s_per_gpu"),
                  100 * num(j, "/kv_cache/peak_utilization"));
  }
  return buf;
}

std::string header(const SweepResult& r) {
  if (r.objective.job) return "step (s)     days    ETTR  interrupt.  ckpt ovh  ckpt GiB";
  if (is_training(r)) {
    return "step (s)    MFU  TFLOP/s  peak GiB  compute  exp.comm   bubble";
  }
  return "goodput/GPU  TTFT p99  TPOT p99  out tok/s/GPU  KV peak";
}

// The breakdown terms whose change explains most of the difference between two training rows.
std::string why_better(const SweepRow& best, const SweepRow& other) {
  const char* terms[][2] = {{"compute", "/breakdown_s/compute"},
                            {"exposed TP comm", "/breakdown_s/exposed_comm_by_group/tp"},
                            {"exposed DP comm", "/breakdown_s/exposed_comm_by_group/dp"},
                            {"exposed PP comm", "/breakdown_s/exposed_comm_by_group/pp"},
                            {"exposed CP comm", "/breakdown_s/exposed_comm_by_group/cp"},
                            {"exposed EP comm", "/breakdown_s/exposed_comm_by_group/ep"},
                            {"pipeline bubble", "/breakdown_s/bubble"},
                            {"optimizer", "/breakdown_s/optimizer"},
                            {"waiting", "/breakdown_s/other"}};
  struct D {
    const char* name;
    double delta;
  };
  std::vector<D> ds;
  for (const auto& t : terms) {
    const double d = num(other.report, t[1]) - num(best.report, t[1]);
    if (std::isfinite(d) && d != 0) ds.push_back({t[0], d});
  }
  std::stable_sort(ds.begin(), ds.end(),
                   [](const D& a, const D& b) { return std::fabs(a.delta) > std::fabs(b.delta); });
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, ds.size()); ++i) {
    s += (i ? ", " : "") + std::string(ds[i].name) + (ds[i].delta > 0 ? " -" : " +") +
         fmt("%.4g s", std::fabs(ds[i].delta));
  }
  return s;
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string sweep_report_text(const SweepResult& r) {
  const Counts c = counts(r);
  std::string s = "ClusterTwin sweep: " + r.scenario + "\n";
  s += "  objective " + std::string(r.objective.name) + " (" + std::string(r.objective.doc) + ", " +
       (r.objective.minimize ? "lower" : "higher") + " is better)\n";
  s += "  " + with_commas(r.rows.size()) + " configurations" +
       (r.variants > 1 ? " in " + with_commas(static_cast<std::size_t>(r.variants)) + " variants" : "") + ": " +
       (c.invalid ? with_commas(c.invalid) + " invalid, " : std::string()) + with_commas(c.oom) + " out of memory, " +
       with_commas(c.pruned) + " pruned (cannot reach the top " + std::to_string(r.top) + "), " +
       with_commas(c.simulated) + " simulated\n\n";
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(r.top), r.ranking.size());
  // 52 columns, wider (up to 80) when a shown label needs it.
  std::size_t label_w = 52;
  for (std::size_t k = 0; k < shown; ++k) label_w = std::max(label_w, r.rows[r.ranking[k]].label.size() + 1);
  label_w = std::min<std::size_t>(label_w, 80);
  s += "  rank  " + pad("configuration", label_w) + " " + pad("objective", 12) + " " + header(r) + "\n";
  auto line = [&](std::size_t rank, const SweepRow& row) {
    char head[16];
    std::snprintf(head, sizeof head, "  %4zu  ", rank);
    return std::string(head) + pad(row.label, label_w) + " " + pad(objective_text(r.objective, row.objective), 12) +
           " " + figures(r, row) + "\n";
  };
  for (std::size_t k = 0; k < shown; ++k) s += line(k + 1, r.rows[r.ranking[k]]);
  if (r.written) {
    const SweepRow& w = r.rows[*r.written];
    const auto it = std::find(r.ranking.begin(), r.ranking.end(), *r.written);
    if (it == r.ranking.end()) {
      s += "\n  the scenario's own layout did not run: " + w.reason + "\n";
    } else {
      const std::size_t rank = static_cast<std::size_t>(it - r.ranking.begin()) + 1;
      if (rank > shown) s += "   ...\n" + line(rank, w);
      const SweepRow& best = r.rows[r.ranking.front()];
      if (rank == 1) {
        s += "\n  the scenario's own layout is the best found\n";
      } else {
        const double gain = r.objective.minimize ? w.objective / best.objective - 1 : best.objective / w.objective - 1;
        s += "\n  the scenario's own layout ranks " + std::to_string(rank) + " of " + with_commas(r.ranking.size()) +
             "; the best is " + fmt("%.1f%%", 100 * gain) + " better";
        if (is_training(r)) s += " (" + why_better(best, w) + ")";
        s += "\n";
      }
    }
  }
  // Aggregated against disaggregated (/sweep/serving_auto/disaggregated): the best of each.
  {
    const SweepRow *agg = nullptr, *dis = nullptr;
    std::size_t agg_rank = 0, dis_rank = 0;
    for (std::size_t k = 0; k < r.ranking.size(); ++k) {
      const SweepRow& row = r.rows[r.ranking[k]];
      const auto it = row.sets.find("/serving/disaggregation");
      if (it == row.sets.end()) continue;
      if (it->is_null() && !agg) {
        agg = &row;
        agg_rank = k + 1;
      }
      if (it->is_object() && !dis) {
        dis = &row;
        dis_rank = k + 1;
      }
    }
    if (agg && dis) {
      s += "\n  best aggregated:    " + agg->label + " (rank " + std::to_string(agg_rank) + ", " +
           objective_text(r.objective, agg->objective) + ")\n";
      s += "  best disaggregated: " + dis->label + " (rank " + std::to_string(dis_rank) + ", " +
           objective_text(r.objective, dis->objective) + ")\n";
    }
  }
  if (r.ranking.size() >= 2 && is_training(r)) {
    const SweepRow& a = r.rows[r.ranking[0]];
    const SweepRow& b = r.rows[r.ranking[1]];
    const std::string why = why_better(a, b);
    if (!why.empty()) s += "  the best against the runner-up: " + why + "\n";
  }
  if (c.oom > 0) {
    // What fills memory in the layouts that do not fit, by largest term.
    std::map<std::string, std::size_t> by_term;
    const SweepRow* example = nullptr;
    for (const auto& row : r.rows) {
      if (row.status != SweepStatus::out_of_memory) continue;
      if (!example) example = &row;
      // A training refusal names its largest term after the overshoot; a serving one says why.
      if (row.reason.rfind("out of memory: peak", 0) != 0) {
        ++by_term["weights or activations beyond the KV budget"];
        continue;
      }
      const auto semi = row.reason.find("; ");
      const std::string rest = semi == std::string::npos ? row.reason : row.reason.substr(semi + 2);
      const auto end = rest.find_first_of("0123456789");
      std::string term = rest.substr(0, end);
      while (!term.empty() && term.back() == ' ') term.pop_back();
      ++by_term[term];
    }
    s += "\n  out of memory (" + with_commas(c.oom) + "), by largest term:";
    for (const auto& [term, n] : by_term) s += " " + term + " " + with_commas(n) + ";";
    s.back() = '\n';
    s += "    e.g. " + example->label + ": " + example->reason + "\n";
  }
  if (c.invalid > 0) {
    const auto it = std::find_if(r.rows.begin(), r.rows.end(),
                                 [](const SweepRow& row) { return row.status == SweepStatus::invalid; });
    s += "\n  invalid (" + with_commas(c.invalid) + "), the scenario cannot take them: e.g. " + it->label + ": " +
         it->reason + "\n";
  }
  if (r.bound_violations > 0) {
    s += "\n  warning: " + std::to_string(r.bound_violations) +
         " simulated step times fell below their lower bound: pruning may have dropped a better layout; rerun with "
         "/sweep/exhaustive true and report it\n";
  }
  return s;
}

OrderedJson sweep_report_json(const SweepResult& r) {
  const Counts c = counts(r);
  OrderedJson j;
  j["kind"] = "sweep";
  j["scenario"] = r.scenario;
  j["objective"] = {{"name", r.objective.name}, {"minimize", r.objective.minimize}};
  j["configurations"] = r.rows.size();
  j["variants"] = r.variants;
  j["simulated"] = c.simulated;
  j["out_of_memory"] = c.oom;
  j["pruned"] = c.pruned;
  j["invalid"] = c.invalid;
  j["exhaustive"] = r.exhaustive;
  j["bound_violations"] = r.bound_violations;
  j["ranking"] = r.ranking;
  j["written"] = r.written ? OrderedJson(*r.written) : OrderedJson(nullptr);
  std::vector<std::size_t> rank_of(r.rows.size(), 0);
  for (std::size_t k = 0; k < r.ranking.size(); ++k) rank_of[r.ranking[k]] = k + 1;
  OrderedJson rows = OrderedJson::array();
  for (const auto& row : r.rows) {
    OrderedJson o;
    o["index"] = row.index;
    o["rank"] = rank_of[row.index] ? OrderedJson(rank_of[row.index]) : OrderedJson(nullptr);
    o["label"] = row.label;
    o["status"] = sweep_status_names.name(row.status);
    if (!row.reason.empty()) o["reason"] = row.reason;
    if (row.status == SweepStatus::simulated) o["objective"] = row.objective;
    if (row.bound_s >= 0) o["step_time_lower_bound_s"] = row.bound_s;
    o["sets"] = row.sets;
    if (row.status == SweepStatus::simulated) o["report"] = row.report;
    rows.push_back(std::move(o));
  }
  j["rows"] = std::move(rows);
  return j;
}

std::string sweep_report_csv(const SweepResult& r) {
  std::vector<std::string> keys;
  for (const auto& row : r.rows) {
    for (const auto& [k, v] : row.sets.items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  std::vector<std::pair<std::string, const char*>> metrics =
      is_training(r)
          ? std::vector<std::pair<std::string, const char*>>{{"step_time_s", "/step_time_s"},
                                                             {"mfu", "/mfu"},
                                                             {"tflops_per_gpu", "/tflops_per_gpu"},
                                                             {"tokens_per_s", "/tokens_per_s"},
                                                             {"peak_bytes", "/memory/peak_bytes"},
                                                             {"compute_s", "/breakdown_s/compute"},
                                                             {"exposed_comm_s", "/breakdown_s/exposed_comm"},
                                                             {"bubble_s", "/breakdown_s/bubble"}}
          : std::vector<std::pair<std::string, const char*>>{{"goodput_requests_per_s", "/goodput_requests_per_s"},
                                                             {"ttft_p50_s", "/ttft_s/p50"},
                                                             {"ttft_p99_s", "/ttft_s/p99"},
                                                             {"tpot_p50_s", "/tpot_s/p50"},
                                                             {"tpot_p99_s", "/tpot_s/p99"},
                                                             {"output_tokens_per_s", "/throughput/output_tokens_per_s"},
                                                             {"kv_peak_utilization", "/kv_cache/peak_utilization"},
                                                             {"gpus", "/fleet/gpus"}};
  if (r.objective.job) {
    metrics.insert(metrics.end(), {{"time_to_train_days", "/job/time_to_train_days"},
                                   {"effective_training_time_ratio", "/job/effective_training_time_ratio"},
                                   {"interruptions", "/job/interruptions/total"},
                                   {"checkpoint_overhead_fraction", "/job/checkpoint_overhead_fraction"},
                                   {"checkpoint_bytes_per_gpu", "/job/checkpoint/bytes_per_gpu"}});
  }
  std::vector<std::size_t> rank_of(r.rows.size(), 0);
  for (std::size_t k = 0; k < r.ranking.size(); ++k) rank_of[r.ranking[k]] = k + 1;
  std::string s = "index,rank,status,label," + std::string(r.objective.name);
  for (const auto& k : keys) s += "," + csv_field(k);
  for (const auto& m : metrics) s += "," + m.first;
  s += ",step_time_lower_bound_s,reason\n";
  for (const auto& row : r.rows) {
    s += std::to_string(row.index) + "," + (rank_of[row.index] ? std::to_string(rank_of[row.index]) : "") + "," +
         std::string(sweep_status_names.name(row.status)) + "," + csv_field(row.label) + ",";
    if (row.status == SweepStatus::simulated) s += fmt("%.10g", row.objective);
    for (const auto& k : keys) {
      s += ",";
      if (row.sets.contains(k)) {
        const auto& v = row.sets[k];
        s += csv_field(v.is_string() ? v.get<std::string>() : v.dump());
      }
    }
    for (const auto& m : metrics) {
      s += ",";
      if (row.status == SweepStatus::simulated) {
        const double v = num(row.report, m.second);
        if (std::isfinite(v)) s += fmt("%.10g", v);
      }
    }
    s += "," + (row.bound_s >= 0 ? fmt("%.10g", row.bound_s) : std::string()) + "," + csv_field(row.reason) + "\n";
  }
  return s;
}

std::string sweep_report_svg(const SweepResult& r) {
  const std::string title = xml(r.scenario + ": " + std::string(r.objective.name));
  // One numeric axis and no layouts: the objective against the axis (latency against load).
  std::string axis;
  bool line = r.rows.size() >= 2;
  for (const auto& row : r.rows) {
    if (row.sets.size() != 1 || !row.sets.begin().value().is_number()) line = false;
    if (line && axis.empty()) axis = row.sets.begin().key();
  }
  const int w = 900;
  std::string s;
  if (line) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& row : r.rows) {
      if (row.status == SweepStatus::simulated) pts.emplace_back(row.sets.begin().value().get<double>(), row.objective);
    }
    const int h = 500, l = 90, b = 60, t = 40;
    double x0 = 1e300, x1 = -1e300, y1 = 0;
    for (auto [x, y] : pts) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
    if (pts.empty() || x1 <= x0) x1 = x0 + 1;
    if (y1 <= 0) y1 = 1;
    auto px = [&](double x) { return l + (x - x0) / (x1 - x0) * (w - l - 30); };
    auto py = [&](double y) { return h - b - y / y1 * (h - b - t); };
    s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
        "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<text x=\"" + std::to_string(w / 2) + "\" y=\"20\" text-anchor=\"middle\">" + title + "</text>\n";
    s += "<line x1=\"" + std::to_string(l) + "\" y1=\"" + std::to_string(h - b) + "\" x2=\"" + std::to_string(w - 30) +
         "\" y2=\"" + std::to_string(h - b) + "\" stroke=\"black\"/>\n";
    s += "<line x1=\"" + std::to_string(l) + "\" y1=\"" + std::to_string(t) + "\" x2=\"" + std::to_string(l) +
         "\" y2=\"" + std::to_string(h - b) + "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + std::to_string(w / 2) + "\" y=\"" + std::to_string(h - 15) + "\" text-anchor=\"middle\">" +
         xml(axis) + "</text>\n";
    s += "<text x=\"15\" y=\"" + std::to_string(h / 2) + "\" transform=\"rotate(-90 15 " + std::to_string(h / 2) +
         ")\" text-anchor=\"middle\">" + xml(std::string(r.objective.name)) + "</text>\n";
    for (int k = 0; k <= 4; ++k) {
      const double y = y1 * k / 4;
      s += "<text x=\"" + std::to_string(l - 5) + "\" y=\"" + fmt("%.1f", py(y) + 4) + "\" text-anchor=\"end\">" +
           fmt("%.4g", y) + "</text>\n";
    }
    std::string poly;
    for (auto [x, y] : pts) {
      poly += fmt("%.1f", px(x)) + "," + fmt("%.1f", py(y)) + " ";
      s += "<circle cx=\"" + fmt("%.1f", px(x)) + "\" cy=\"" + fmt("%.1f", py(y)) + "\" r=\"3\" fill=\"#1f77b4\"/>\n";
      s += "<text x=\"" + fmt("%.1f", px(x)) + "\" y=\"" + std::to_string(h - b + 15) + "\" text-anchor=\"middle\">" +
           fmt("%.4g", x) + "</text>\n";
    }
    s += "<polyline points=\"" + poly + "\" fill=\"none\" stroke=\"#1f77b4\"/>\n</svg>\n";
    return s;
  }
  const std::size_t n = std::min<std::size_t>(40, r.ranking.size());
  const int bar_h = 18, top = 40, label_w = 420;
  const int h = top + static_cast<int>(n) * bar_h + 30;
  double vmax = 0;
  for (std::size_t k = 0; k < n; ++k) vmax = std::max(vmax, r.rows[r.ranking[k]].objective);
  if (vmax <= 0) vmax = 1;
  s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
      "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<text x=\"" + std::to_string(w / 2) + "\" y=\"20\" text-anchor=\"middle\">" + title + " (best first)</text>\n";
  for (std::size_t k = 0; k < n; ++k) {
    const SweepRow& row = r.rows[r.ranking[k]];
    const int y = top + static_cast<int>(k) * bar_h;
    const double bw = row.objective / vmax * (w - label_w - 90);
    const bool written = r.written && *r.written == row.index;
    s += "<text x=\"" + std::to_string(label_w - 6) + "\" y=\"" + std::to_string(y + 13) + "\" text-anchor=\"end\">" +
         xml(row.label) + "</text>\n";
    s += "<rect x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" + fmt("%.1f", bw) +
         "\" height=\"" + std::to_string(bar_h - 4) + "\" fill=\"" + (written ? "#d62728" : "#1f77b4") + "\"/>\n";
    s += "<text x=\"" + fmt("%.1f", label_w + bw + 4) + "\" y=\"" + std::to_string(y + 13) + "\">" +
         xml(objective_text(r.objective, row.objective)) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

// Megatron-LM's --pipeline-model-parallel-layout for layers per virtual stage (virtual stage =
// chunk x pp + stage, Megatron's order too): "t" a decoder layer, "E" the embedding in the first
// virtual stage, "L" the loss in the last, stages split by "|", a run of equal stages as
// "(X|)*k". Llama 3 405B's (0, 1 x 126, 0) is "E|(t|)*126,L".
std::string megatron_pipeline_layout(const std::vector<int>& layers) {
  std::vector<std::string> stages;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::string x = i == 0 ? "E" : "";
    x += layers[i] > 1 ? "t*" + std::to_string(layers[i]) : std::string(static_cast<std::size_t>(layers[i]), 't');
    if (i + 1 == layers.size()) x += "L";
    stages.push_back(x);
  }
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t j = i;
    while (j < stages.size() && stages[j] == stages[i]) ++j;
    const std::size_t k = j - i;
    const bool last = j == stages.size();
    if (k > 1) {
      out += "(" + stages[i] + "|)*" + std::to_string(k) + ",";  // not the last: only it holds "L"
    } else {
      out += stages[i] + (last ? "" : "|");
    }
    i = j;
  }
  return out;
}

// How the layers split over the stages, as Megatron-LM takes it: nothing for an even split without
// virtual stages, --num-layers-per-virtual-pipeline-stage for an even interleaved one, else the
// whole layout (uneven stages, the embedding or the loss counted as a layer, an explicit list).
std::string pipeline_split_flags(int model_layers, const Parallelism& p) {
  if (p.pp <= 1) return "";
  const PipelineSplit split = pipeline_split(model_layers, p);
  const bool even = std::all_of(split.layers.begin(), split.layers.end(), [&](int n) { return n == split.layers[0]; });
  if (even && split.v == 1) return "";
  if (even) return " --num-layers-per-virtual-pipeline-stage " + std::to_string(split.layers[0]);
  return " --pipeline-model-parallel-layout \"" + megatron_pipeline_layout(split.layers) + "\"";
}

std::string launch_flags(const Scenario& sc) {
  std::string s;
  if (const auto* tj = std::get_if<TrainingJob>(&sc.job)) {
    const TrainingConfig& t = tj->training;
    const Parallelism& p = t.parallel;
    s = "torchrun --nnodes " + std::to_string(sc.cluster.nodes) + " --nproc-per-node " +
        std::to_string(sc.cluster.gpus_per_node) + " pretrain_gpt.py \\\n";
    s += "  --tensor-model-parallel-size " + std::to_string(p.tp) + " --pipeline-model-parallel-size " +
         std::to_string(p.pp);
    s += pipeline_split_flags(tj->model.layers, p);
    if (p.cp > 1) s += " --context-parallel-size " + std::to_string(p.cp);
    if (p.ep > 1) s += " --expert-model-parallel-size " + std::to_string(p.ep);
    if (p.ep > 1 && experts_folded(p)) s += " --expert-tensor-parallel-size 1";
    if (p.sequence_parallel) s += " --sequence-parallel";
    if (p.tp_comm_overlap) s += " --tp-comm-overlap";
    if (p.zero_stage == 1 || p.zero_stage == 2) s += " --use-distributed-optimizer";
    if (p.zero_stage == 3) s += " --use-torch-fsdp2";
    s += " \\\n  --micro-batch-size " + std::to_string(t.micro_batch) + " --global-batch-size " +
         std::to_string(t.global_batch) + " --seq-length " + std::to_string(t.seq_len);
    if (t.recompute == Recompute::selective) s += " --recompute-activations";
    if (t.recompute == Recompute::full) {
      s += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
    }
    if (t.precision.compute == Dtype::bf16) s += " --bf16";
    if (t.precision.compute == Dtype::fp16) s += " --fp16";
    if (t.precision.compute == Dtype::fp8) s += " --bf16 --fp8-format hybrid";
    s += "\n";
    if (p.zero_stage == 2) {
      s += "# ZeRO-2 shards gradients too: Megatron-LM's distributed optimizer shards optimizer states only; "
           "DeepSpeed: \"zero_optimization\": {\"stage\": 2}\n";
    }
    return s;
  }
  const ServingJob& j = serving_job(sc);
  if (j.disaggregation) {
    // vLLM's disaggregated prefill: separate instances joined by a KV connector.
    const auto& d = *j.disaggregation;
    s = "# disaggregated: " + std::to_string(d.prefill_replicas) + " prefill instance(s) of TP " +
        std::to_string(d.prefill.tp) + " and " + std::to_string(d.decode_replicas) + " decode instance(s) of TP " +
        std::to_string(d.decode.tp) + ", joined by a KV connector (--kv-transfer-config)\n";
    s += "vllm serve " + j.model.name + " --tensor-parallel-size " + std::to_string(d.prefill.tp) +
         " --kv-transfer-config '{\"kv_role\": \"kv_producer\"}'   # each prefill instance\n";
    s += "vllm serve " + j.model.name + " --tensor-parallel-size " + std::to_string(d.decode.tp) +
         " --kv-transfer-config '{\"kv_role\": \"kv_consumer\"}'   # each decode instance\n";
    return s;
  }
  s = "vllm serve " + j.model.name + " --tensor-parallel-size " + std::to_string(j.deployment.tp);
  if (j.deployment.pp > 1) s += " --pipeline-parallel-size " + std::to_string(j.deployment.pp);
  if (j.deployment.expert_parallel) s += " --enable-expert-parallel";
  if (j.deployment.quantization != Quantization::none) {
    s += std::string(" --quantization ") + std::string(quantization_names.name(j.deployment.quantization));
  }
  if (j.deployment.kv_dtype != KvCacheDtype::automatic) s += " --kv-cache-dtype fp8";
  s += " \\\n  --max-num-seqs " + std::to_string(j.scheduler.max_num_seqs) + " --max-num-batched-tokens " +
       std::to_string(j.scheduler.max_num_batched_tokens) + " --gpu-memory-utilization " +
       fmt("%g", j.scheduler.gpu_memory_utilization) + " --block-size " + std::to_string(j.scheduler.block_size);
  if (j.data_parallel_size > 1) s += " --data-parallel-size " + std::to_string(j.data_parallel_size);
  if (!j.scheduler.enable_chunked_prefill) s += " --no-enable-chunked-prefill";
  if (!j.deployment.cuda_graphs) s += " --enforce-eager";
  s += "\n";
  return s;
}

}  // namespace ctwin
