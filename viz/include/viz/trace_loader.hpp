// Loading a trace off the UI thread, with a progress fraction a window can show as a bar.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "sim/trace.hpp"
#include "viz/timeline_model.hpp"

namespace ctwin::viz {

// Reads a .ctt or .json trace, reporting the fraction of the file read.
Trace read_trace_with_progress(const std::string& path, const ProgressFn& progress);

// Loads a trace and builds its model on a background thread; the UI polls progress().
class TraceLoader {
 public:
  explicit TraceLoader(std::string path);
  ~TraceLoader();
  TraceLoader(const TraceLoader&) = delete;
  TraceLoader& operator=(const TraceLoader&) = delete;

  bool done() const { return done_.load(std::memory_order_acquire); }
  double progress() const { return progress_.load(std::memory_order_relaxed); }
  std::string stage() const;
  // After done(): the model, or rethrows the load's exception (InputError for a bad file).
  std::unique_ptr<TimelineModel> take();
  // Blocks until done.
  void wait();

 private:
  struct State;
  std::string path_;
  std::atomic<bool> done_{false};
  std::atomic<double> progress_{0};
  std::unique_ptr<State> state_;
};

}  // namespace ctwin::viz
