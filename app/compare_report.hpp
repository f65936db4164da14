// `ctwin compare`'s report: two runs of the same kind side by side, the change of each figure,
// and the change explained by the breakdown's terms (docs/compare.md).
//
// Every figure is read from the two runs' own reports (training_report_json,
// serving_report_json) at a JSON pointer, and the diff is keyed by that pointer, so a figure
// in the comparison is always the one `ctwin run --json` prints under the same path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare_ops.hpp"
#include "scenario.hpp"
#include "serving_report.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// How a figure is shown: seconds in ms, bytes in GiB, fractions in percent (their change in
// percentage points), rates and counts as numbers, a verdict (0 fits, 1 out of memory) as words.
enum class FigureUnit { seconds, bytes, fraction, rate, count, verdict };

struct FigureDiff {
  std::string pointer;  // into each run's report: "/breakdown_s/exposed_comm_by_group/dp"
  std::string label;    // "exposed DP comm"
  FigureUnit unit = FigureUnit::seconds;
  double a = 0, b = 0;
  double delta() const { return b - a; }
  // Whether the change is more than rounding: sums of doubles (a serving run's GPU time) can
  // differ in the last bits for the same time spent.
  bool changed() const;
  // The change relative to A, in percent; none when A is zero (no base to be a percent of).
  std::optional<double> delta_pct() const;
};

struct Comparison {
  JobKind kind = JobKind::training;
  std::string a_label, b_label;  // where each run came from: "FILE --set /p=v"
  nlohmann::ordered_json a_report, b_report;
  std::vector<FigureDiff> figures;       // in report order
  std::vector<std::string> explanation;  // sentences, the biggest change first within each part
  std::vector<OpDiff> ops;               // with traces: the op groups whose time changed most
};

// The pointers of GPU 0's breakdown terms in a training report. They are disjoint and add up to
// the step time (step_breakdown_ps splits [0, makespan) of GPU 0 into them), so their changes
// add up to the step time's change.
inline constexpr std::string_view breakdown_term_pointers[] = {
    "/breakdown_s/compute",
    "/breakdown_s/exposed_comm_by_group/tp",
    "/breakdown_s/exposed_comm_by_group/cp",
    "/breakdown_s/exposed_comm_by_group/ep",
    "/breakdown_s/exposed_comm_by_group/dp",
    "/breakdown_s/exposed_comm_by_group/pp",
    "/breakdown_s/bubble",
    "/breakdown_s/optimizer",
    "/breakdown_s/other",
};

// Labels default to each scenario's file.
Comparison compare_training(const Scenario& a, const TrainingResult& ra, const Scenario& b, const TrainingResult& rb);
Comparison compare_serving(const Scenario& a, const ServingFleetRun& ra, const Scenario& b, const ServingFleetRun& rb);

// Adds the op groups of two traces (op_differences) and a sentence for each to the explanation.
void add_op_differences(Comparison& c, std::vector<OpDiff> ops);

// The figure at `pointer`; null when the comparison has none.
const FigureDiff* find_figure(const Comparison& c, std::string_view pointer);

// {"a": report, "b": report, "diff": {pointer: {label, a, b, delta, delta_pct}}, "explanation":
// [...], "ops": [...] (with traces)}.
nlohmann::ordered_json comparison_json(const Comparison& c);
std::string comparison_text(const Comparison& c);

}  // namespace ctwin
