// Times, byte counts and FLOP counts as the viewer shows them.
#include "viz/text_format.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ctwin::viz {

std::size_t format_time(double ps, char* buf, std::size_t size) {
  const double a = std::fabs(ps);
  const char* unit = "ps";
  double v = ps;
  if (a == 0) {
    return static_cast<std::size_t>(std::max(0, std::snprintf(buf, size, "0")));
  } else if (a < 1e3) {
    unit = "ps";
  } else if (a < 1e6) {
    v = ps / 1e3, unit = "ns";
  } else if (a < 1e9) {
    v = ps / 1e6, unit = "us";
  } else if (a < 1e12) {
    v = ps / 1e9, unit = "ms";
  } else if (a < 60e12) {
    v = ps / 1e12, unit = "s";
  } else if (a < 3600e12) {
    v = ps / 60e12, unit = "min";
  } else if (a < 86400e12) {
    v = ps / 3600e12, unit = "h";
  } else {
    v = ps / 86400e12, unit = "d";
  }
  int n = std::snprintf(buf, size, "%.4g %s", v, unit);
  return n < 0 ? 0 : std::min(static_cast<std::size_t>(n), size ? size - 1 : 0);
}

std::string format_time(double ps) {
  char buf[48];
  auto n = format_time(ps, buf, sizeof buf);
  return std::string(buf, n);
}

double axis_tick_step_ps(double min_ps) {
  if (!(min_ps > 1)) return 1;
  constexpr double kSecond = 1e12, kMinute = 60 * kSecond, kHour = 60 * kMinute, kDay = 24 * kHour;
  if (min_ps <= kMinute) {
    const double p = std::pow(10.0, std::floor(std::log10(min_ps)));
    const double m = min_ps / p;
    return std::min(kMinute, (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p);
  }
  static constexpr double kClock[] = {1,  2,   5,   10,  15, 30,  // minutes
                                      60, 120, 180, 360, 720};    // hours, in minutes
  for (double m : kClock) {
    if (m * kMinute >= min_ps) return m * kMinute;
  }
  // Days: 1, 2, 5 x 10^k.
  const double days = min_ps / kDay;
  const double p = std::pow(10.0, std::floor(std::log10(days)));
  const double m = days / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p * kDay;
}

std::size_t axis_tick_label(double t_ps, double step_ps, char* buf, std::size_t size) {
  const bool zero = std::fabs(t_ps) < step_ps * 1e-6;  // no "-0"
  int n = 0;
  if (step_ps < 60e12) {
    const char* unit = "ps";
    double div = 1;
    if (step_ps >= 1e12)
      unit = "s", div = 1e12;
    else if (step_ps >= 1e9)
      unit = "ms", div = 1e9;
    else if (step_ps >= 1e6)
      unit = "us", div = 1e6;
    else if (step_ps >= 1e3)
      unit = "ns", div = 1e3;
    n = std::snprintf(buf, size, "%.0f %s", zero ? 0.0 : t_ps / div, unit);
  } else if (zero) {
    n = std::snprintf(buf, size, "0");
  } else {
    // Whole minutes since the start (ticks fall on whole minutes), as days, hours and minutes,
    // the zero parts left out.
    const long long minutes = std::llround(t_ps / 60e12);
    const long long m = std::llabs(minutes);
    const long long d = m / 1440, h = m / 60 % 24, mm = m % 60;
    n = std::snprintf(buf, size, "%s", minutes < 0 ? "-" : "");
    const char* sep = "";
    auto part = [&](long long v, const char* unit) {
      if (v <= 0 || n < 0 || static_cast<std::size_t>(n) >= size) return;
      const int k = std::snprintf(buf + n, size - static_cast<std::size_t>(n), "%s%lld%s", sep, v, unit);
      n = k < 0 ? -1 : n + k;
      sep = " ";
    };
    part(d, "d");
    part(h, "h");
    part(mm, "m");
  }
  return n < 0 ? 0 : std::min(static_cast<std::size_t>(n), size ? size - 1 : 0);
}

std::string axis_tick_label(double t_ps, double step_ps) {
  char buf[64];
  return std::string(buf, axis_tick_label(t_ps, step_ps, buf, sizeof buf));
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 5) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.4g %s", bytes, kUnits[u]);
  return buf;
}

std::string format_flops(double flops) {
  static constexpr const char* kUnits[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
  int u = 0;
  while (std::fabs(flops) >= 1000 && u < 6) flops /= 1000, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g %s", flops, kUnits[u]);
  return buf;
}

namespace {

// Every key the simulator writes into Trace::summary (workloads/src/training_trace.cpp,
// app/ for serving) and the viewer's own figures, in words.
constexpr SummaryLabel kSummaryLabels[] = {
    {"step_time_s", "step time"},
    {"mfu", "model FLOPs utilization"},
    {"compute_s", "compute"},
    {"optimizer_s", "optimizer step"},
    {"exposed_comm_s", "exposed communication"},
    {"exposed_tp_s", "exposed tensor-parallel communication"},
    {"exposed_cp_s", "exposed context-parallel communication"},
    {"exposed_ep_s", "exposed expert-parallel communication"},
    {"exposed_dp_s", "exposed data-parallel communication"},
    {"exposed_pp_s", "exposed pipeline-parallel communication"},
    {"trace_exposed_comm_s", "exposed communication per GPU (compute idle)"},
    {"trace_overlapped_comm_s", "overlapped communication per GPU (under compute)"},
    {"bubble_s", "pipeline bubble"},
    {"other_s", "other (waiting on peers)"},
    {"tp_size", "tensor-parallel size"},
    {"cp_size", "context-parallel size"},
    {"ep_size", "expert-parallel size"},
    {"dp_size", "data-parallel size"},
    {"pp_size", "pipeline-parallel size"},
    {"tp_stride", "tensor-parallel rank stride"},
    {"cp_stride", "context-parallel rank stride"},
    {"dp_stride", "data-parallel rank stride"},
    {"pp_stride", "pipeline-parallel rank stride"},
    // Serving traces (workloads/serving_trace.hpp).
    {"makespan_s", "makespan"},
    {"ttft_p50_s", "time to first token p50"},
    {"ttft_p99_s", "time to first token p99"},
    {"tpot_p50_s", "time per output token p50"},
    {"tpot_p99_s", "time per output token p99"},
    {"e2e_p50_s", "end-to-end latency p50"},
    {"e2e_p99_s", "end-to-end latency p99"},
    {"queueing_p50_s", "queueing delay p50"},
    {"requests_per_second", "requests per second"},
    {"output_tokens_per_second", "output tokens per second"},
    {"goodput_requests_per_second", "goodput (requests per second meeting every SLO)"},
    {"slo_attainment", "SLO attainment"},
    {"kv_peak_utilization", "KV cache peak utilization"},
    {"kv_mean_utilization", "KV cache mean utilization"},
    {"gpu_prefill_s", "GPU time in prefill"},
    {"gpu_decode_s", "GPU time in decode"},
    {"gpu_comm_s", "GPU time in communication"},
    {"gpu_overhead_s", "GPU time in scheduling overhead"},
    {"gpu_idle_s", "GPU idle"},
};

}  // namespace

std::span<const SummaryLabel> summary_labels() { return kSummaryLabels; }

std::string summary_label(std::string_view key) {
  for (const auto& l : kSummaryLabels) {
    if (l.key == key) return std::string(l.words);
  }
  std::string words(key);
  if (words.size() > 2 && words.compare(words.size() - 2, 2, "_s") == 0) words.resize(words.size() - 2);
  std::replace(words.begin(), words.end(), '_', ' ');
  return words;
}

}  // namespace ctwin::viz
