#include "compare_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include "report_format.hpp"
#include "training_report.hpp"

namespace ctwin {

namespace {

using J = nlohmann::ordered_json;

struct FigureSpec {
  std::string_view section;  // the text table's heading above the row
  std::string_view pointer;
  std::string_view label;
  FigureUnit unit;
};

constexpr std::string_view kHeadline = "";
constexpr std::string_view kStep = "where the step goes (GPU 0; the terms add up to the step time)";
constexpr std::string_view kMemory = "memory per GPU (peak stage)";

constexpr FigureSpec training_figures[] = {
    {kHeadline, "/step_time_s", "step time", FigureUnit::seconds},
    {kHeadline, "/tokens_per_s", "tokens/s", FigureUnit::rate},
    {kHeadline, "/tflops_per_gpu", "model TFLOP/s per GPU", FigureUnit::rate},
    {kHeadline, "/mfu", "MFU", FigureUnit::fraction},
    {kStep, breakdown_term_pointers[0], "compute", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[1], "exposed TP comm", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[2], "exposed CP comm", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[3], "exposed EP comm", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[4], "exposed DP comm", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[5], "exposed PP comm", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[6], "pipeline bubble", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[7], "optimizer", FigureUnit::seconds},
    {kStep, breakdown_term_pointers[8], "waiting for peer ranks", FigureUnit::seconds},
    {kMemory, "/memory/by_kind/weights", "weights", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/grads", "gradients", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/optimizer", "optimizer states", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/activations", "activations", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/recompute", "recomputed layer", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/gathered", "ZeRO-3 gathered units", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/comm_buffers", "comm buffers", FigureUnit::bytes},
    {kMemory, "/memory/by_kind/overhead", "overhead", FigureUnit::bytes},
    {kMemory, "/memory/allocated_bytes", "allocated (PyTorch peak)", FigureUnit::bytes},
    {kMemory, "/memory/reserved_bytes", "reserved (allocator)", FigureUnit::bytes},
    {kMemory, "/memory/peak_bytes", "peak", FigureUnit::bytes},
    {kMemory, "/memory/capacity_bytes", "capacity", FigureUnit::bytes},
    {kMemory, "/memory/oom", "verdict", FigureUnit::verdict},
};

constexpr std::string_view kLatency = "latency";
constexpr std::string_view kThroughput = "throughput";
constexpr std::string_view kKv = "KV cache and memory per GPU";
constexpr std::string_view kGpuTime = "GPU time (the parts add up to the makespan)";
constexpr std::string_view kCost = "cost and energy (docs/serving.md)";

constexpr FigureSpec serving_figures[] = {
    {kLatency, "/ttft_s/p50", "TTFT p50", FigureUnit::seconds},
    {kLatency, "/ttft_s/p99", "TTFT p99", FigureUnit::seconds},
    {kLatency, "/tpot_s/p50", "TPOT p50", FigureUnit::seconds},
    {kLatency, "/tpot_s/p99", "TPOT p99", FigureUnit::seconds},
    {kLatency, "/e2e_s/p50", "E2E p50", FigureUnit::seconds},
    {kLatency, "/e2e_s/p99", "E2E p99", FigureUnit::seconds},
    {kLatency, "/queueing_s/p99", "queueing p99", FigureUnit::seconds},
    {kThroughput, "/throughput/requests_per_s", "requests/s", FigureUnit::rate},
    {kThroughput, "/throughput/output_tokens_per_s", "output tokens/s", FigureUnit::rate},
    {kThroughput, "/goodput_requests_per_s", "goodput (requests/s in SLO)", FigureUnit::rate},
    {kThroughput, "/slo_attainment", "SLO attainment", FigureUnit::fraction},
    {kThroughput, "/requests/completed", "requests completed", FigureUnit::count},
    {kKv, "/kv_cache/peak_utilization", "KV cache peak use", FigureUnit::fraction},
    {kKv, "/kv_cache/mean_utilization", "KV cache mean use", FigureUnit::fraction},
    {kKv, "/kv_cache/blocks", "KV cache blocks", FigureUnit::count},
    {kKv, "/preemptions", "preemptions", FigureUnit::count},
    {kKv, "/memory_per_gpu/weights_bytes", "weights", FigureUnit::bytes},
    {kKv, "/memory_per_gpu/kv_cache_bytes", "KV cache", FigureUnit::bytes},
    {kGpuTime, "/makespan_s", "makespan", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/prefill", "prefill", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/decode", "decode", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/comm", "communication", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/overhead", "overhead", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/draft", "draft model", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/swap", "KV swap", FigureUnit::seconds},
    {kGpuTime, "/gpu_time_s/idle", "idle", FigureUnit::seconds},
    {kCost, "/cost/gpu_hours", "GPU-hours", FigureUnit::rate},
    {kCost, "/cost/total_usd", "cost, USD", FigureUnit::rate},
    {kCost, "/cost/usd_per_million_input_tokens", "USD per M input tokens", FigureUnit::rate},
    {kCost, "/cost/usd_per_million_output_tokens", "USD per M output tokens", FigureUnit::rate},
    {kCost, "/cost/usd_per_million_tokens", "USD per M tokens", FigureUnit::rate},
    {kCost, "/energy/energy_kwh", "energy, kWh", FigureUnit::rate},
    {kCost, "/energy/average_power_w_per_gpu", "power per GPU, W", FigureUnit::rate},
    {kCost, "/energy/joules_per_output_token", "J per output token", FigureUnit::rate},
};

// The figure's value in a report; none when the report lacks it or holds no number there (an
// SLO attainment without an SLO).
std::optional<double> figure_value(const J& report, std::string_view pointer) {
  const J::json_pointer ptr{std::string(pointer)};
  if (!report.contains(ptr)) return std::nullopt;
  const J& v = report.at(ptr);
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

std::string section_of(const FigureDiff& f, std::span<const FigureSpec> specs) {
  for (const auto& s : specs) {
    if (s.pointer == f.pointer) return std::string(s.section);
  }
  return "";
}

std::vector<FigureDiff> read_figures(const J& a, const J& b, std::span<const FigureSpec> specs) {
  std::vector<FigureDiff> out;
  for (const auto& s : specs) {
    const auto va = figure_value(a, s.pointer), vb = figure_value(b, s.pointer);
    if (!va || !vb) continue;
    out.push_back(FigureDiff{std::string(s.pointer), std::string(s.label), s.unit, *va, *vb});
  }
  return out;
}

std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string value_text(FigureUnit u, double v) {
  switch (u) {
    case FigureUnit::seconds:
      return format_ms(v, 3);
    case FigureUnit::bytes:
      return format_gib(v);
    case FigureUnit::fraction:
      return printf_string("%.1f%%", 100 * v);
    case FigureUnit::rate:
      return human_number(v);
    case FigureUnit::count:
      return printf_string("%.0f", v);
    case FigureUnit::verdict:
      return v != 0 ? "OUT OF MEMORY" : "fits";
  }
  return "";
}

// The size of a change, without its sign: "412.000 ms", "6.10 GiB", "3.2 pp".
std::string amount_text(FigureUnit u, double d) {
  const double m = std::fabs(d);
  switch (u) {
    case FigureUnit::seconds:
      return format_ms(m, 3);
    case FigureUnit::bytes:
      return format_gib(m);
    case FigureUnit::fraction:
      return printf_string("%.1f pp", 100 * m);
    case FigureUnit::rate:
    case FigureUnit::count:
      return human_number(m);
    case FigureUnit::verdict:
      return "";
  }
  return "";
}

std::string pct_text(double pct) { return printf_string("%+.1f%%", pct); }

std::string change_text(const FigureDiff& f) {
  const double d = f.delta();
  if (!f.changed()) return "same";
  if (f.unit == FigureUnit::verdict) return "changed";
  // Built by append: GCC 12's -Wrestrict misreads a one-character literal + string here.
  std::string s(1, d > 0 ? '+' : '-');
  s += amount_text(f.unit, d);
  if (const auto p = f.delta_pct()) s += " (" + pct_text(*p) + ")";
  return s;
}

std::string share(double part, double whole) { return printf_string("%.1f%%", whole > 0 ? 100 * part / whole : 0.0); }

// "exposed DP comm grew by 412.000 ms (2.2% -> 10.9% of the step)".
std::string term_sentence(const FigureDiff& f, double step_a, double step_b) {
  const std::string shares = share(f.a, step_a) + " -> " + share(f.b, step_b) + " of the step";
  const bool comm = f.label.starts_with("exposed ");
  if (comm && f.a == 0) {
    return f.label.substr(8) + " became exposed: " + format_ms(f.b, 3) + " on the critical path (" + shares + ")";
  }
  if (comm && f.b == 0) {
    return f.label.substr(8) + " is now hidden: " + format_ms(f.a, 3) + " left the critical path (" + shares + ")";
  }
  const std::string what = f.label == "pipeline bubble" ? "the pipeline bubble" : f.label;
  return what + (f.delta() > 0 ? " grew" : " shrank") + " by " + amount_text(f.unit, f.delta()) + " (" +
         format_ms(f.a, 3) + " -> " + format_ms(f.b, 3) + ", " + shares + ")";
}

// "activations grew by 6.10 GiB (5.99 GiB -> 12.09 GiB)", "TTFT p99 rose by ...".
std::string change_sentence(const FigureDiff& f, const char* up, const char* down) {
  std::string s = f.label + " " + (f.delta() > 0 ? up : down) + " by " + amount_text(f.unit, f.delta()) + " (" +
                  value_text(f.unit, f.a) + " -> " + value_text(f.unit, f.b);
  if (const auto p = f.delta_pct(); p && f.unit != FigureUnit::fraction) s += ", " + pct_text(*p);
  return s + ")";
}

// The figures under `prefix` that changed, the biggest change first.
std::vector<const FigureDiff*> changed_by_size(const std::vector<FigureDiff>& figs, std::string_view prefix) {
  std::vector<const FigureDiff*> out;
  for (const auto& f : figs) {
    if (f.pointer.starts_with(prefix) && f.changed()) out.push_back(&f);
  }
  std::stable_sort(out.begin(), out.end(), [](const FigureDiff* x, const FigureDiff* y) {
    return std::fabs(x->delta()) > std::fabs(y->delta());
  });
  return out;
}

std::size_t index_of(const std::vector<FigureDiff>& figs, std::string_view pointer) {
  for (std::size_t i = 0; i < figs.size(); ++i) {
    if (figs[i].pointer == pointer) return i;
  }
  return figs.size();
}

std::vector<std::string> explain_training(const std::vector<FigureDiff>& figs) {
  std::vector<std::string> out;
  const FigureDiff& step = figs[index_of(figs, "/step_time_s")];
  if (!step.changed()) {
    out.push_back("the step time is the same, " + format_ms(step.a, 3));
  } else {
    out.push_back(change_sentence(step, "grew", "shrank") + "; by term of GPU 0's breakdown, the biggest first:");
  }
  // The breakdown terms, by the size of their change.
  for (const FigureDiff* t : changed_by_size(figs, "/breakdown_s/")) out.push_back(term_sentence(*t, step.a, step.b));
  // Memory: the terms that changed, then the peak and the verdict.
  // The terms that make up the allocation, as the report's by_kind lists them.
  const auto mem = changed_by_size(figs, "/memory/by_kind/");
  for (const FigureDiff* m : mem) out.push_back(change_sentence(*m, "grew", "shrank"));
  const FigureDiff& peak = figs[index_of(figs, "/memory/peak_bytes")];
  const FigureDiff& cap = figs[index_of(figs, "/memory/capacity_bytes")];
  if (peak.changed()) {
    out.push_back(change_sentence(peak, "grew", "shrank") + " of " + value_text(FigureUnit::bytes, cap.b));
  } else if (mem.empty()) {
    out.push_back("memory per GPU is the same, peak " + value_text(FigureUnit::bytes, peak.a));
  }
  const FigureDiff& oom = figs[index_of(figs, "/memory/oom")];
  if (oom.a == 0 && oom.b != 0) out.push_back("B runs out of memory where A fits");
  if (oom.a != 0 && oom.b == 0) out.push_back("B fits in memory where A runs out");
  return out;
}

std::vector<std::string> explain_serving(const std::vector<FigureDiff>& figs, std::span<const FigureSpec> specs) {
  std::vector<std::string> out;
  auto in_section = [&](std::string_view section) {
    std::vector<const FigureDiff*> v;
    for (const auto& f : figs) {
      if (section_of(f, specs) == section && f.changed() && f.pointer != "/makespan_s") v.push_back(&f);
    }
    return v;
  };
  // Latencies by relative change: a p99 that doubled matters more than a p50 up a little.
  auto lat = in_section(kLatency);
  std::stable_sort(lat.begin(), lat.end(), [](const FigureDiff* x, const FigureDiff* y) {
    return std::fabs(x->delta_pct().value_or(0)) > std::fabs(y->delta_pct().value_or(0));
  });
  for (const FigureDiff* f : lat) out.push_back(change_sentence(*f, "rose", "fell"));
  if (lat.empty()) out.push_back("the latencies are the same");
  for (const FigureDiff* f : in_section(kThroughput)) out.push_back(change_sentence(*f, "rose", "fell"));
  const FigureDiff& span = figs[index_of(figs, "/makespan_s")];
  if (span.changed()) {
    out.push_back(change_sentence(span, "grew", "shrank") + "; by GPU time part, the biggest first:");
    auto parts = in_section(kGpuTime);
    std::stable_sort(parts.begin(), parts.end(), [](const FigureDiff* x, const FigureDiff* y) {
      return std::fabs(x->delta()) > std::fabs(y->delta());
    });
    for (const FigureDiff* f : parts) out.push_back(change_sentence(*f, "grew", "shrank") + " of GPU time");
  }
  for (const FigureDiff* f : in_section(kKv)) out.push_back(change_sentence(*f, "grew", "shrank"));
  return out;
}

std::string op_sentence(const OpDiff& d) {
  auto where = [](const OpGroupTimes& g) {
    return g.first_s ? format_ms(*g.first_s, 3) + " (" + g.first_lane + ")" : std::string("never");
  };
  std::string s = "op '" + d.name + "' (" + d.kind + ") " + (d.delta_s() > 0 ? "took " : "saved ") +
                  format_ms(std::fabs(d.delta_s()), 3) + (d.delta_s() > 0 ? " more" : "") + ": " +
                  format_ms(d.a.total_s, 3) + " -> " + format_ms(d.b.total_s, 3) + " over " +
                  std::to_string(d.a.count) + " -> " + std::to_string(d.b.count) + " events; first at " + where(d.a) +
                  " in A, " + where(d.b) + " in B";
  return s;
}

J group_json(const OpGroupTimes& g) {
  J j{{"total_s", g.total_s}, {"count", g.count}};
  j["first_s"] = g.first_s ? J(*g.first_s) : J(nullptr);
  j["first_lane"] = g.first_lane;
  return j;
}

const char* unit_name(FigureUnit u) {
  switch (u) {
    case FigureUnit::seconds:
      return "s";
    case FigureUnit::bytes:
      return "bytes";
    case FigureUnit::fraction:
      return "fraction";
    case FigureUnit::rate:
      return "per_s";
    case FigureUnit::count:
      return "count";
    case FigureUnit::verdict:
      return "oom";
  }
  return "";
}

}  // namespace

bool FigureDiff::changed() const { return std::fabs(b - a) > 1e-12 * std::max(std::fabs(a), std::fabs(b)); }

std::optional<double> FigureDiff::delta_pct() const {
  if (a == 0) return std::nullopt;
  return 100 * (b - a) / std::fabs(a);
}

Comparison compare_training(const Scenario& a, const TrainingResult& ra, const Scenario& b, const TrainingResult& rb) {
  Comparison c;
  c.kind = JobKind::training;
  c.a_label = a.file;
  c.b_label = b.file;
  c.a_report = training_report_json(a, ra);
  c.b_report = training_report_json(b, rb);
  c.figures = read_figures(c.a_report, c.b_report, training_figures);
  c.explanation = explain_training(c.figures);
  return c;
}

Comparison compare_serving(const Scenario& a, const ServingFleetRun& ra, const Scenario& b, const ServingFleetRun& rb) {
  Comparison c;
  c.kind = JobKind::serving;
  c.a_label = a.file;
  c.b_label = b.file;
  c.a_report = serving_report_json(a, ra);
  c.b_report = serving_report_json(b, rb);
  c.figures = read_figures(c.a_report, c.b_report, serving_figures);
  c.explanation = explain_serving(c.figures, serving_figures);
  return c;
}

void add_op_differences(Comparison& c, std::vector<OpDiff> ops) {
  for (const auto& d : ops) c.explanation.push_back(op_sentence(d));
  c.ops = std::move(ops);
}

const FigureDiff* find_figure(const Comparison& c, std::string_view pointer) {
  const std::size_t i = index_of(c.figures, pointer);
  return i < c.figures.size() ? &c.figures[i] : nullptr;
}

J comparison_json(const Comparison& c) {
  J j;
  j["kind"] = job_kind_names.name(c.kind);
  j["labels"] = J{{"a", c.a_label}, {"b", c.b_label}};
  j["a"] = c.a_report;
  j["b"] = c.b_report;
  J diff = J::object();
  for (const auto& f : c.figures) {
    J d{{"label", f.label}, {"unit", unit_name(f.unit)}, {"a", f.a}, {"b", f.b}, {"delta", f.delta()}};
    const auto p = f.delta_pct();
    d["delta_pct"] = p ? J(*p) : J(nullptr);
    diff[f.pointer] = d;
  }
  j["diff"] = diff;
  j["explanation"] = c.explanation;
  if (!c.ops.empty()) {
    J ops = J::array();
    for (const auto& d : c.ops) {
      ops.push_back(J{{"name", d.name},
                      {"kind", d.kind},
                      {"delta_s", d.delta_s()},
                      {"a", group_json(d.a)},
                      {"b", group_json(d.b)}});
    }
    j["ops"] = ops;
  }
  return j;
}

std::string comparison_text(const Comparison& c) {
  const std::span<const FigureSpec> specs =
      c.kind == JobKind::training ? std::span<const FigureSpec>(training_figures) : serving_figures;
  std::string o = std::string("ClusterTwin comparison (") + std::string(job_kind_names.name(c.kind)) + ")\n";
  o += "  A: " + c.a_report.value("scenario", std::string()) + "  [" + c.a_label + "]\n";
  o += "  B: " + c.b_report.value("scenario", std::string()) + "  [" + c.b_label + "]\n";
  char line[512];
  std::snprintf(line, sizeof line, "\n  %-30s %16s %16s   %s\n", "figure", "A", "B", "change (B - A)");
  o += line;
  std::string section = "";
  for (const auto& f : c.figures) {
    // Terms that are zero in both runs (no CP, no pipeline) only crowd the table.
    if (f.a == 0 && f.b == 0 && f.unit != FigureUnit::verdict && f.pointer != "/step_time_s") continue;
    if (const std::string s = section_of(f, specs); s != section) {
      section = s;
      o += "\n  " + section + "\n";
    }
    std::snprintf(line, sizeof line, "  %-30s %16s %16s   %s\n", ("  " + f.label).c_str(),
                  value_text(f.unit, f.a).c_str(), value_text(f.unit, f.b).c_str(), change_text(f).c_str());
    o += line;
  }
  o += "\n  what changed\n";
  for (const auto& e : c.explanation) o += "    - " + e + "\n";
  return o;
}

}  // namespace ctwin
