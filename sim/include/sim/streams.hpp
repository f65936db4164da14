// Streams of tasks, as on a GPU: tasks on one stream run in order, one at a time; tasks on
// different streams overlap; a task may also wait for tasks on other streams (events, in
// CUDA terms) or for the members of a rendezvous on other devices (a collective starts only
// when every member has reached it, so one slow rank delays its whole group).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "sim/id.hpp"
#include "sim/time.hpp"

namespace ctwin {

struct StreamTag;
struct TaskTag;
struct RendezvousTag;
using StreamId = Id<StreamTag>;
using TaskId = Id<TaskTag>;
using RendezvousId = Id<RendezvousTag>;

// 16 bytes: a step graph holds millions (the caller keeps what a task stands for by its index).
struct Task {
  Time duration{};          // for plain tasks; rendezvous members take their time from the handler
  StreamId stream;          // none: a free task, started as soon as its dependencies are met
  RendezvousId rendezvous;  // valid for a member of a collective
};

class TaskGraph {
 public:
  StreamId add_stream();
  TaskId add_task(StreamId stream, Time duration, std::span<const TaskId> deps = {});
  RendezvousId add_rendezvous();
  TaskId add_member(StreamId stream, RendezvousId r, std::span<const TaskId> deps = {});
  // `after` may start only once `before` has finished.
  void add_dep(TaskId before, TaskId after);
  // Room for this many tasks and dependencies: a caller that knows its graph's size up front
  // spares the copies (and fresh pages) of growing the arrays by doubling.
  void reserve(std::size_t tasks, std::size_t deps);

  std::size_t stream_count() const { return streams_; }
  std::size_t task_count() const { return tasks_.size(); }
  std::size_t rendezvous_count() const { return rendezvous_; }
  const Task& task(TaskId t) const { return tasks_[t.value]; }

 private:
  friend class StreamExecutor;
  std::size_t streams_ = 0;
  std::size_t rendezvous_ = 0;  // a rendezvous's members are the tasks naming it, in task order
  std::vector<Task> tasks_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> deps_;  // (before, after)
};

struct TaskTiming {
  Time ready{};  // reached the head of its stream with all dependencies met
  Time start{};  // began running (later than ready for a member waiting on its peers)
  Time end{};
};

// Runs a TaskGraph on an Engine. Plain tasks take their duration (or the duration hook's
// answer at start time). When every member of a rendezvous is ready, the rendezvous handler
// is called; it must later call finish_rendezvous (directly or from a scheduled event).
class StreamExecutor {
 public:
  using RendezvousHandler = std::function<void(RendezvousId, Time now)>;
  using DurationHook = std::function<Time(TaskId, Time now)>;

  StreamExecutor(Engine& engine, const TaskGraph& graph);

  void on_rendezvous(RendezvousHandler h) { rendezvous_handler_ = std::move(h); }
  void on_duration(DurationHook h) { duration_hook_ = std::move(h); }

  // Makes every task that can start now start; run the engine afterwards.
  void start();
  // Ends every member of r at the engine's current time.
  void finish_rendezvous(RendezvousId r);

  // True while a task of stream s is running (or waiting on its rendezvous).
  bool busy(StreamId s) const { return stream_busy_[s.value] != 0; }
  bool all_done() const { return done_ == graph_.task_count(); }
  std::size_t done_count() const { return done_; }
  const std::vector<TaskTiming>& timings() const { return timings_; }
  const TaskTiming& timing(TaskId t) const { return timings_[t.value]; }
  Time makespan() const { return makespan_; }  // the latest end so far
  // The members of rendezvous r, in the order they were added.
  std::span<const std::uint32_t> members(RendezvousId r) const {
    return {member_tasks_.data() + member_offsets_[r.value], member_tasks_.data() + member_offsets_[r.value + 1]};
  }

 private:
  void try_start(std::uint32_t stream);
  void begin(std::uint32_t task);
  void finish(std::uint32_t task);

  Engine& engine_;
  const TaskGraph& graph_;
  RendezvousHandler rendezvous_handler_;
  DurationHook duration_hook_;

  std::vector<std::uint32_t> pending_deps_;
  std::vector<std::uint32_t> succ_offsets_;  // CSR of successors
  std::vector<std::uint32_t> succ_;
  std::vector<std::uint32_t> stream_offsets_;  // CSR of each stream's tasks, in submission order
  std::vector<std::uint32_t> stream_tasks_;
  std::vector<std::uint32_t> stream_head_;
  std::vector<std::uint8_t> stream_busy_;
  std::vector<std::uint32_t> member_offsets_;  // CSR of each rendezvous's members
  std::vector<std::uint32_t> member_tasks_;
  std::vector<std::uint32_t> arrived_;  // per rendezvous
  std::vector<TaskTiming> timings_;
  std::size_t done_ = 0;
  Time makespan_{};
};

}  // namespace ctwin
