// Numbers as the viewer shows them: times, byte counts and FLOP counts.
#pragma once

#include <cstddef>
#include <string>

namespace ctwin::viz {

// "0", "12.5 ns", "3.25 ms", "1.2 s": picoseconds in the unit that keeps 1-3 integer digits.
std::string format_time(double ps);
// Same into a caller's buffer; returns the length written (no allocation).
std::size_t format_time(double ps, char* buf, std::size_t size);
// "512 B", "1.5 KiB", "80 GiB".
std::string format_bytes(double bytes);
// "1.2 GFLOP", "3.4 TFLOP".
std::string format_flops(double flops);

}  // namespace ctwin::viz
