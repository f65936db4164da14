// Building a TimelineModel from a trace: the construction stages in order, with progress.
#include "viz/timeline_model.hpp"

namespace ctwin::viz {

TimelineModel::TimelineModel(Trace trace, const ProgressFn& progress) : trace_(std::move(trace)) {
  const ProgressFn report = [&](double f, const char* stage) {
    if (progress) progress(f, stage);
  };
  index_events(report);
  report(0.7, "grouping lanes");
  group_lanes();  // may intern "counters", so strings are final only after it
  build_comm_overlap();
  name_match_.assign(trace_.strings.size(), 0);
  report(0.8, "building the overview");
  build_overview();
  report(0.9, "building utilization lanes");
  build_utilization_grid();
  scratch_.reserve(trace_.lanes.size());
  cursors_.reserve(trace_.lanes.size());
  layout();
  report(1, "ready");
}

}  // namespace ctwin::viz
