// Human-readable tables for reports and benchmarks.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ctwin {

// Formats a number for a table: engineering notation where it helps a reader.
std::string human_number(double v);
// Two columns, name and value, for a flat JSON object (nested objects are indented).
std::string format_figures_table(const std::string& title, const nlohmann::ordered_json& j);

}  // namespace ctwin
