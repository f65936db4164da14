// Human-readable tables for reports and benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace ctwin {

// "61,234,567"
std::string with_commas(std::uint64_t n);

// Formats a number for a table: engineering notation where it helps a reader.
std::string human_number(double v);
// "12.34 GiB" (bytes over 2^30, two decimals) and "1.234 ms" (seconds, `decimals` places).
std::string format_gib(double bytes);
std::string format_ms(double seconds, int decimals);
// Two columns, name and value, for a flat JSON object (nested objects are indented).
std::string format_figures_table(const std::string& title, const nlohmann::ordered_json& j);

}  // namespace ctwin
