// Engine throughput in the classic "hold" model: a fixed population of pending events;
// each dispatched event schedules one successor at now + a random increment. Compared with
// a std::priority_queue of std::function events driven by the same increment sequence.
#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <random>
#include <vector>

#include "bench.hpp"
#include "sim/engine.hpp"

namespace ctwin {
namespace {

using Clock = std::chrono::steady_clock;

// Increments drawn up front so both queues see identical work and no RNG in the timed loop.
std::vector<std::int64_t> make_increments(std::size_t n) {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> exp(1.0 / 1e6);  // mean 1 us in ps
  std::vector<std::int64_t> v(n);
  for (auto& x : v) x = static_cast<std::int64_t>(exp(rng)) + 1;
  return v;
}

struct EngineHold {
  Engine engine;
  const std::vector<std::int64_t>* inc;
  std::size_t next = 0;
  std::uint64_t remaining = 0;
  void fire() {
    if (remaining == 0) return;
    --remaining;
    const std::int64_t d = (*inc)[next++ & (inc->size() - 1)];
    engine.schedule_in(Time{d}, [this] { fire(); });
  }
};

double run_engine(std::size_t pending, std::uint64_t events, const std::vector<std::int64_t>& inc) {
  EngineHold h;
  h.inc = &inc;
  for (std::size_t i = 0; i < pending; ++i) h.engine.schedule_at(Time{inc[i]}, [&h] { h.fire(); });
  h.next = pending;
  h.remaining = events;
  const auto t0 = Clock::now();
  const std::uint64_t n = h.engine.run();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(n) / s;
}

struct BaselineEvent {
  std::int64_t time;
  std::uint64_t seq;
  std::function<void()> fn;
};
struct Later {
  bool operator()(const BaselineEvent& a, const BaselineEvent& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

struct BaselineHold {
  std::priority_queue<BaselineEvent, std::vector<BaselineEvent>, Later> q;
  const std::vector<std::int64_t>* inc;
  std::int64_t now = 0;
  std::uint64_t seq = 0;
  std::uint64_t remaining = 0;
  std::size_t next = 0;
  void fire() {
    if (remaining == 0) return;
    --remaining;
    q.push(BaselineEvent{now + (*inc)[next++ & (inc->size() - 1)], seq++, [this] { fire(); }});
  }
};

double run_baseline(std::size_t pending, std::uint64_t events, const std::vector<std::int64_t>& inc) {
  BaselineHold h;
  h.inc = &inc;
  for (std::size_t i = 0; i < pending; ++i) h.q.push(BaselineEvent{inc[i], h.seq++, [&h] { h.fire(); }});
  h.next = pending;
  h.remaining = events;
  std::uint64_t dispatched = 0;
  const auto t0 = Clock::now();
  while (!h.q.empty()) {
    BaselineEvent e = std::move(const_cast<BaselineEvent&>(h.q.top()));
    h.q.pop();
    h.now = e.time;
    ++dispatched;
    e.fn();
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(dispatched) / s;
}

}  // namespace

nlohmann::ordered_json bench_engine(const BenchOptions& o) {
  const std::size_t pending = o.quick ? 10000 : 1000000;
  const std::uint64_t events = o.quick ? 100000 : 10000000;
  const auto inc = make_increments(1u << 22);  // power of two: indices wrap with a mask
  const double engine_eps = run_engine(pending, events, inc);
  const double baseline_eps = run_baseline(pending, events, inc);
  nlohmann::ordered_json j;
  j["pending_events"] = pending;
  j["dispatched_events"] = events + pending;
  j["events_per_s"] = engine_eps;
  j["baseline_events_per_s"] = baseline_eps;
  j["ratio"] = engine_eps / baseline_eps;
  return j;
}

}  // namespace ctwin
