#include "sim/streams.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/huge_pages.hpp"

namespace ctwin {

StreamId TaskGraph::add_stream() { return StreamId{static_cast<std::uint32_t>(streams_++)}; }

TaskId TaskGraph::add_task(StreamId stream, Time duration, std::span<const TaskId> deps) {
  if (stream.valid() && stream.value >= streams_) throw std::logic_error("TaskGraph::add_task: unknown stream");
  TaskId id{static_cast<std::uint32_t>(tasks_.size())};
  tasks_.push_back(Task{duration, stream, RendezvousId::none()});
  for (TaskId d : deps) add_dep(d, id);
  return id;
}

RendezvousId TaskGraph::add_rendezvous() { return RendezvousId{static_cast<std::uint32_t>(rendezvous_++)}; }

TaskId TaskGraph::add_member(StreamId stream, RendezvousId r, std::span<const TaskId> deps) {
  if (!r.valid() || r.value >= rendezvous_) throw std::out_of_range("TaskGraph::add_member: unknown rendezvous");
  TaskId id = add_task(stream, Time{}, deps);
  tasks_[id.value].rendezvous = r;
  return id;
}

void TaskGraph::reserve(std::size_t tasks, std::size_t deps) {
  reserve_huge(tasks_, tasks);
  reserve_huge(deps_, deps);
}

void TaskGraph::add_dep(TaskId before, TaskId after) {
  if (before.value >= tasks_.size() || after.value >= tasks_.size() || before == after) {
    throw std::logic_error("TaskGraph::add_dep: bad task id");
  }
  deps_.emplace_back(before.value, after.value);
}

StreamExecutor::StreamExecutor(Engine& engine, const TaskGraph& graph) : engine_(engine), graph_(graph) {
  const auto n = graph.tasks_.size();
  reserve_huge(pending_deps_, n);
  reserve_huge(succ_offsets_, n + 1);
  reserve_huge(succ_, graph.deps_.size());
  reserve_huge(timings_, n);
  pending_deps_.assign(n, 0);
  succ_offsets_.assign(n + 1, 0);
  for (auto [b, a] : graph.deps_) {
    ++pending_deps_[a];
    ++succ_offsets_[b + 1];
  }
  for (std::size_t i = 0; i < n; ++i) succ_offsets_[i + 1] += succ_offsets_[i];
  succ_.resize(graph.deps_.size());
  std::vector<std::uint32_t> fill(succ_offsets_.begin(), succ_offsets_.end() - 1);
  for (auto [b, a] : graph.deps_) succ_[fill[b]++] = a;

  const auto s = graph.streams_;
  stream_offsets_.assign(s + 1, 0);
  for (const Task& t : graph.tasks_) {
    if (t.stream.valid()) ++stream_offsets_[t.stream.value + 1];
  }
  for (std::size_t i = 0; i < s; ++i) stream_offsets_[i + 1] += stream_offsets_[i];
  reserve_huge(stream_tasks_, stream_offsets_[s]);
  stream_tasks_.resize(stream_offsets_[s]);
  std::vector<std::uint32_t> sfill(stream_offsets_.begin(), stream_offsets_.end() - 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (graph.tasks_[i].stream.valid()) stream_tasks_[sfill[graph.tasks_[i].stream.value]++] = i;
  }
  stream_head_.assign(stream_offsets_.begin(), stream_offsets_.end() - 1);
  stream_busy_.assign(s, 0);
  // Each rendezvous's members: the tasks that name it, in task order (the order add_member saw).
  const auto nr = graph.rendezvous_;
  member_offsets_.assign(nr + 1, 0);
  for (const Task& t : graph.tasks_) {
    if (t.rendezvous.valid()) ++member_offsets_[t.rendezvous.value + 1];
  }
  for (std::size_t i = 0; i < nr; ++i) member_offsets_[i + 1] += member_offsets_[i];
  member_tasks_.resize(member_offsets_[nr]);
  std::vector<std::uint32_t> mfill(member_offsets_.begin(), member_offsets_.end() - 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (graph.tasks_[i].rendezvous.valid()) member_tasks_[mfill[graph.tasks_[i].rendezvous.value]++] = i;
  }
  arrived_.assign(nr, 0);
  timings_.assign(n, TaskTiming{});
}

void StreamExecutor::start() {
  for (std::uint32_t t = 0; t < graph_.tasks_.size(); ++t) {
    if (!graph_.tasks_[t].stream.valid() && pending_deps_[t] == 0) begin(t);
  }
  for (std::uint32_t s = 0; s < graph_.streams_; ++s) try_start(s);
}

void StreamExecutor::try_start(std::uint32_t s) {
  if (stream_busy_[s] || stream_head_[s] == stream_offsets_[s + 1]) return;
  const std::uint32_t t = stream_tasks_[stream_head_[s]];
  if (pending_deps_[t] != 0) return;
  stream_busy_[s] = 1;
  begin(t);
}

void StreamExecutor::begin(std::uint32_t t) {
  const Time now = engine_.now();
  timings_[t].ready = now;
  const Task& task = graph_.tasks_[t];
  if (task.rendezvous.valid()) {
    const auto r = task.rendezvous.value;
    if (++arrived_[r] == member_offsets_[r + 1] - member_offsets_[r]) {
      for (std::uint32_t m : members(task.rendezvous)) timings_[m].start = now;
      if (!rendezvous_handler_) throw std::logic_error("StreamExecutor: a rendezvous is ready but no handler is set");
      rendezvous_handler_(task.rendezvous, now);
    }
    return;
  }
  timings_[t].start = now;
  const Time d = duration_hook_ ? duration_hook_(TaskId{t}, now) : task.duration;
  engine_.schedule_in(d, [this, t] { finish(t); });
}

void StreamExecutor::finish_rendezvous(RendezvousId r) {
  // Copy: finishing may start tasks, but never modifies the graph.
  for (std::uint32_t m : members(r)) finish(m);
}

void StreamExecutor::finish(std::uint32_t t) {
  timings_[t].end = engine_.now();
  makespan_ = std::max(makespan_, timings_[t].end);
  ++done_;
  const StreamId s = graph_.tasks_[t].stream;
  if (s.valid()) {
    stream_busy_[s.value] = 0;
    ++stream_head_[s.value];
  }
  for (std::uint32_t i = succ_offsets_[t]; i < succ_offsets_[t + 1]; ++i) {
    const std::uint32_t a = succ_[i];
    if (--pending_deps_[a] != 0) continue;
    const StreamId as = graph_.tasks_[a].stream;
    if (as.valid()) {
      try_start(as.value);
    } else {
      begin(a);
    }
  }
  if (s.valid()) try_start(s.value);
}

}  // namespace ctwin
