// Numbers as the viewer shows them: times, byte counts and FLOP counts.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace ctwin::viz {

// "0", "12.5 ns", "3.25 ms", "1.2 s": picoseconds in the unit that keeps 1-3 integer digits.
std::string format_time(double ps);
// Same into a caller's buffer; returns the length written (no allocation).
std::size_t format_time(double ps, char* buf, std::size_t size);
// The time axis's tick step for ticks at least `min_ps` apart: 1, 2 or 5 x 10^k picoseconds up to
// a minute, then clock steps (1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6, 12 h; 1, 2, 5, 10, 20, 50 d ...),
// so a job's days read as days and a step's microseconds as microseconds.
double axis_tick_step_ps(double min_ps);
// A tick's label in the step's unit: "250 us", "12 s"; from a minute up, clock time since the
// start: "45m", "1h 30m", "2d", "1d 6h".
std::string axis_tick_label(double t_ps, double step_ps);
// Same into a caller's buffer; returns the length written (no allocation).
std::size_t axis_tick_label(double t_ps, double step_ps, char* buf, std::size_t size);
// "512 B", "1.5 KiB", "80 GiB".
std::string format_bytes(double bytes);
// "1.2 GFLOP", "3.4 TFLOP".
std::string format_flops(double flops);

// Summary keys (Trace::summary, e.g. "exposed_tp_s") in words ("exposed tensor-parallel
// communication"). One table; an unknown key has its "_s" dropped and '_' turned to ' '.
struct SummaryLabel {
  std::string_view key, words;
};
std::span<const SummaryLabel> summary_labels();
std::string summary_label(std::string_view key);

}  // namespace ctwin::viz
