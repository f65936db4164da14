#include "workloads/serving_sim.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <queue>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/quantile_histogram.hpp"
#include "workloads/serving_scheduler.hpp"

namespace ctwin {
namespace {

constexpr Time kUnset{-1};

// A request admitted or queued, in a reusable slot.
struct Live {
  Request r;
  ServiceKey key;
  std::int64_t generated = 0;       // output tokens emitted (exact unless decoding on the fast path)
  std::int64_t computed = 0;        // prefill progress, cached prefix included
  std::int64_t prefill_target = 0;  // tokens the prefill computes: prompt + tokens generated before
  std::int64_t cap_tokens = 0;      // KV tokens its blocks hold
  std::int64_t chunk = 0;           // prefill tokens scheduled this iteration
  std::int64_t sync_step = 0;       // fast path: decode step at which `generated` was exact
  std::uint32_t epoch = 0;          // fast path: invalidates heap entries
  Time first_scheduled = kUnset;
  Time first_token = kUnset;
  std::int32_t preemptions = 0;
  bool decoding = false;
  bool swapped = false;
  bool resume_decoding = false;  // swapped out while decoding
  Time ready = kUnset;           // KV offloading: its pages from the host tier are in by then
  Time kv_loaded = kUnset;       // the end of its first load (the request record's)
};

struct Entry {  // a waiting or running request, ordered by service key
  ServiceKey key;
  std::int32_t slot;
  bool operator<(const Entry& o) const { return key < o.key; }
  bool operator>(const Entry& o) const { return o.key < key; }
};

// The running (or prefilling) requests in service-key order, unique keys, as a sorted vector: a
// replica runs at most max_num_seqs requests and arrivals come in at the back, where a tree's
// node per request missed the cache on each insert, erase and walk (a fleet steps a hundred
// replicas in turn, so none stays in the cache).
class EntrySet {
 public:
  using const_iterator = std::vector<Entry>::const_iterator;
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  void clear() { v_.clear(); }
  void insert(const Entry& e) {
    const auto it = std::lower_bound(v_.begin(), v_.end(), e);
    if (it == v_.end() || e < *it) v_.insert(it, e);
  }
  std::size_t count(const Entry& e) const {
    const auto it = std::lower_bound(v_.begin(), v_.end(), e);
    return it != v_.end() && !(e < *it) ? 1 : 0;
  }
  void erase(const Entry& e) {
    const auto it = std::lower_bound(v_.begin(), v_.end(), e);
    if (it != v_.end() && !(e < *it)) v_.erase(it);
  }
  void erase(const_iterator it) { v_.erase(it); }

 private:
  std::vector<Entry> v_;
};

// The waiting queue, lowest service key first. Arrivals under FCFS come in rising key order
// and go to a FIFO run; a key below the run's last (a preempted request, a higher priority) goes
// to a heap beside it. With 10^5 requests waiting a heap alone misses the cache on every level.
class WaitingQueue {
 public:
  void push(const Entry& e) {
    if (run_.empty() || run_.back() < e) {
      run_.push_back(e);
    } else {
      heap_.push(e);
    }
  }
  bool empty() const { return run_.empty() && heap_.empty(); }
  std::size_t size() const { return run_.size() + heap_.size(); }
  const Entry& top() const {
    if (heap_.empty()) return run_.front();
    if (run_.empty() || heap_.top() < run_.front()) return heap_.top();
    return run_.front();
  }
  void pop() {
    if (!heap_.empty() && (run_.empty() || heap_.top() < run_.front())) {
      heap_.pop();
    } else {
      run_.pop_front();
    }
  }

 private:
  std::deque<Entry> run_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

struct StepEvent {  // fast path: at decode step `step`, slot needs a block or finishes
  std::int64_t step;
  std::int32_t slot;
  std::uint32_t epoch;  // the slot's epoch when pushed; stale when it moved on
  bool operator>(const StepEvent& o) const { return step > o.step; }  // same step: sorted after popping
};
using EventHeap = std::priority_queue<StepEvent, std::vector<StepEvent>, std::greater<>>;

// Fast path: the block-allocation events. Nearly all fall within a block's worth of steps, so
// they go to a ring of per-step buckets (O(1) in and out, where a heap of hundreds of entries
// costs a sift each); the rare farther (or already due) ones go to a heap beside it.
class StepCalendar {
 public:
  void push(const StepEvent& e, std::int64_t now) {
    const std::int64_t ahead = e.step - (now + 1);
    if (ahead >= 1 && ahead < kRing) {
      ring_[static_cast<std::size_t>(e.step & (kRing - 1))].push_back(e);
    } else {
      far_.push(e);
    }
  }
  // Every event at step now + 1 or before, appended to out (unordered).
  template <class F>
  void take_due(std::int64_t now, F&& out) {
    const std::int64_t target = now + 1;
    // A bucket holds one step's events as long as every step is visited; one pushed a lap later
    // (a step skipped, which the loop never does) stays for its own turn.
    auto& b = ring_[static_cast<std::size_t>(target & (kRing - 1))];
    std::size_t kept = 0;
    for (const StepEvent& e : b) {
      if (e.step <= target) {
        out(e);
      } else {
        b[kept++] = e;
      }
    }
    b.resize(kept);
    while (!far_.empty() && far_.top().step <= target) {
      out(far_.top());
      far_.pop();
    }
  }

 private:
  static constexpr std::int64_t kRing = 64;
  std::array<std::vector<StepEvent>, kRing> ring_;
  EventHeap far_;
};

template <bool kFast>
class Replica {
 public:
  Replica(TrafficSource& src, KvCache& kv, const IterationCostModel& cost, const SchedulerConfig& c,
          const ReplicaOptions& o, Time start = Time{0})
      : src_(src), kv_(kv), cost_(cost), c_(c), o_(o), k_(c.num_speculative_tokens), bs_(kv.block_size()), t_(start) {
    check_scheduler_config(c);
    if (bs_ != c.block_size) throw std::invalid_argument("the KV cache's block size differs from block_size");
    if (c.preemption == PreemptionMode::swap && !(o.host_link_bytes_per_s > 0))
      throw std::invalid_argument("swap preemption needs host_link_bytes_per_s > 0");
    if (kFast && k_ > 0) throw std::logic_error("the fast loop does not run speculative decoding");
    if (c.enable_lora) {
      if (!(o.lora_adapter_bytes > 0 && o.host_link_bytes_per_s > 0 && c.lora_load_bytes_per_s > 0))
        throw std::invalid_argument(
            "LoRA needs lora_adapter_bytes, host_link_bytes_per_s and lora_load_bytes_per_s > 0");
      lora_.emplace(c.max_loras, c.max_cpu_loras);
    }
  }

  ServingResult run() {
    while (step()) {
    }
    return finish();
  }

  // ---- the steps a driver takes (SteppableReplica): run() is `while (step()) {}` then finish()
  Time now() const { return t_; }
  bool busy() const { return !running_.empty() || !waiting_.empty(); }
  // Admits what has arrived by now(), then runs one iteration or, idle, jumps to the next known
  // arrival; false (nothing done) when none is known.
  bool step() {
    admit_arrivals(t_);
    if (running_.empty() && waiting_.empty()) {
      auto next = src_.next_arrival();
      if (!next) return false;       // exhausted, or a closed loop with nobody left to send
      *next += o_.request_overhead;  // when the scheduler sees it
      res_.gpu_time.idle_s += (std::max(*next, t_) - t_).seconds();
      t_ = std::max(*next, t_);
      return true;
    }
    const bool ran = iterate(t_);
    empty_in_a_row_ = ran ? 0 : empty_in_a_row_ + 1;
    if (empty_in_a_row_ > 2) throw std::logic_error("serving scheduler made no progress");
    return true;
  }
  ReplicaLoad load() const { return busy() ? load_ : ReplicaLoad{0, 0, kv_.used_blocks(), kv_.num_blocks()}; }
  // Idle: the clock moves to t, idle (a driver hands it a request that arrived before now).
  void idle_until(Time t) {
    if (busy() || t <= t_) return;
    res_.gpu_time.idle_s += (t - t_).seconds();
    t_ = t;
  }
  // The requests admitted and not finished, in service order, dropped (a crash); the replica is
  // not stepped again.
  std::vector<Request> abort() {
    std::vector<Request> out;
    for (const Entry& e : running_) out.push_back(slots_[e.slot].r);
    for (; !waiting_.empty(); waiting_.pop()) out.push_back(slots_[waiting_.top().slot].r);
    running_.clear();
    prefilling_.clear();
    return out;
  }
  ServingResult finish() {
    finish_result(t_);
    return std::move(res_);
  }

 private:
  // ---- requests in and out
  void admit_arrivals(Time t) {
    while (true) {
      const auto a = src_.next_arrival();
      if (!a || *a + o_.request_overhead > t) return;
      const Request r = src_.pop();
      if (r.prefilled && r.output_tokens < 2)
        throw std::invalid_argument("prefilled request " + std::to_string(r.id) +
                                    " has nothing left to decode (output_tokens < 2)");
      ++res_.arrived_requests;
      if (rejection_reason(r, c_, kv_.num_blocks())) {
        ++res_.rejected_requests;
        if (o_.hooks.on_request) o_.hooks.on_request(RequestRecord{.request = r, .rejected = true});
        src_.completed(r, t);  // answered at once with an error: a closed-loop user goes on
        continue;
      }
      const auto s = new_slot();
      Live& l = slots_[s];
      const auto epoch = l.epoch + 1;  // heap entries of the slot's last request stay stale
      l = Live{};
      l.epoch = epoch;
      l.r = r;
      l.key = service_key(r, cls(r), c_.policy);
      l.prefill_target = r.prompt_tokens;
      waiting_.push({l.key, s});
    }
  }
  const RequestClass& cls(const Request& r) const {
    const auto& cs = src_.classes();
    if (r.cls < 0 || r.cls >= static_cast<std::int32_t>(cs.size()))
      throw std::invalid_argument("request " + std::to_string(r.id) + " refers to class " + std::to_string(r.cls) +
                                  " of " + std::to_string(cs.size()));
    return cs[static_cast<std::size_t>(r.cls)];
  }
  std::int32_t new_slot() {
    if (!free_.empty()) {
      const auto s = free_.back();
      free_.pop_back();
      return s;
    }
    slots_.emplace_back();
    return static_cast<std::int32_t>(slots_.size() - 1);
  }

  // ---- decode bookkeeping (fast: sums and events; reference: recomputed each iteration)
  std::int64_t gen(const Live& l) const {
    return kFast && l.decoding ? l.generated + (step_ - l.sync_step) : l.generated;
  }
  void sync(Live& l) {
    l.generated = gen(l);
    l.sync_step = step_;
  }
  void join_decode(std::int32_t s) {
    Live& l = slots_[s];
    l.decoding = true;
    l.sync_step = step_;
    ++decoders_;
    if (l.r.lora >= 0) ++lora_decoders_;
    if constexpr (kFast) {
      ctx_sum_ += l.r.prompt_tokens + l.generated;
      push_events(s);
    }
  }
  void leave_decode(std::int32_t s) {
    Live& l = slots_[s];
    sync(l);
    l.decoding = false;
    --decoders_;
    if (l.r.lora >= 0) --lora_decoders_;
    if constexpr (kFast) {
      ctx_sum_ -= l.r.prompt_tokens + l.generated;
      ++l.epoch;
    }
  }
  void push_events(std::int32_t s) {
    push_alloc_event(s);
    const Live& l = slots_[s];
    finish_events_.push({l.sync_step + l.r.output_tokens - l.generated, s, l.epoch});
  }
  void push_alloc_event(std::int32_t s) {
    const Live& l = slots_[s];
    // Step s needs prompt + generated-before-s tokens: beyond cap_tokens first at this step.
    const std::int64_t alloc_step =
        std::max(step_ + 1, l.sync_step + l.cap_tokens - (l.r.prompt_tokens + l.generated) + 2);
    if (alloc_step <= l.sync_step + l.r.output_tokens - l.generated)
      alloc_events_.push({alloc_step, s, l.epoch}, step_);
  }

  // ---- preemption
  bool preempt_victim(std::int32_t asking) {  // true when `asking` itself was preempted
    const auto it = std::prev(running_.end());
    const std::int32_t v = it->slot;
    running_.erase(it);
    Live& l = slots_[v];
    lora_leave(l.r);
    const bool was_decoding = l.decoding;
    if (was_decoding) leave_decode(v);
    prefilling_.erase({l.key, v});
    l.chunk = 0;
    l.ready = kUnset;
    bool swapped = false;
    if (c_.preemption == PreemptionMode::swap) {
      if (const auto moved = kv_.swap_out(l.r)) {
        swapped = true;
        l.swapped = true;
        l.resume_decoding = was_decoding;
        ++res_.preemptions_swap;
        res_.swapped_blocks += *moved;
        swap_s_ += static_cast<double>(*moved) * o_.kv_block_bytes / o_.host_link_bytes_per_s;
      }
    }
    if (!swapped) {
      kv_.release(l.r);
      ++res_.preemptions_recompute;
      l.computed = 0;
      l.cap_tokens = 0;
      l.prefill_target = l.r.prompt_tokens + l.generated;
    }
    ++l.preemptions;
    preempted_ = true;
    waiting_.push({l.key, v});
    return v == asking;
  }
  // Grows s's KV to `tokens`, preempting from the back while it does not fit; false when s
  // itself was preempted.
  bool grow(std::int32_t s, std::int64_t tokens) {
    Live& l = slots_[s];
    if (tokens <= l.cap_tokens) return true;
    while (!kv_.allocate(l.r, tokens))
      if (preempt_victim(s)) return false;
    l.cap_tokens = (tokens + bs_ - 1) / bs_ * bs_;
    return true;
  }

  // ---- LoRA adapters (serving_lora.hpp), as vLLM v1's scheduler and LRU worker manager
  // Whether r's adapter would take the batch past max_loras distinct adapters (those of the
  // running requests): r then waits, keeping its place.
  bool lora_blocked(const Request& r) const {
    if (r.lora < 0) return false;
    if (!lora_)
      throw std::invalid_argument("request " + std::to_string(r.id) + " names LoRA adapter " + std::to_string(r.lora) +
                                  " but LoRA is off (enable_lora)");
    return !lora_->pinned(r.lora) && lora_->pinned_adapters() >= c_.max_loras;
  }
  // r joins the running requests: its adapter pinned, loaded into a GPU slot first when absent
  // (host link, after a storage read when not in the host cache), blocking this iteration.
  void lora_join(const Request& r) {
    if (r.lora < 0) return;
    const auto src = lora_->acquire(r.lora);
    if (!src) throw std::logic_error("no LoRA slot free within max_loras");
    if (*src == LoraSource::gpu) return;
    const double bytes = o_.lora_adapter_bytes;
    double load_s = bytes / o_.host_link_bytes_per_s;
    if (*src == LoraSource::storage) load_s += bytes / c_.lora_load_bytes_per_s;
    lora_->stats().load_bytes += bytes;
    lora_->stats().load_s += load_s;
    lora_load_s_ += load_s;
  }
  void lora_leave(const Request& r) {
    if (r.lora >= 0) lora_->unpin(r.lora);
  }
  // The batch's adapter tokens and distinct adapters: every decoding request runs, so with
  // decodes the running requests' adapters; a prefill-only iteration counts its chunks'.
  void add_lora(BatchShape& b, bool decode_now) {
    b.lora_rank = c_.max_lora_rank;
    lora_seen_.clear();
    for (const Entry& e : prefilling_) {
      const Live& l = slots_[e.slot];
      if (l.chunk == 0 || l.r.lora < 0) continue;
      b.lora_tokens += l.chunk;
      if (std::find(lora_seen_.begin(), lora_seen_.end(), l.r.lora) == lora_seen_.end()) lora_seen_.push_back(l.r.lora);
    }
    b.lora_adapters = static_cast<std::int32_t>(lora_seen_.size());
    if (decode_now && lora_decoders_ > 0) {
      b.lora_tokens += lora_decoders_ * (1 + k_);
      b.lora_adapters = lora_->pinned_adapters();
    }
  }

  // ---- one iteration
  bool iterate(Time& t) {
    preempted_ = false;
    swap_s_ = 0;
    lora_load_s_ = 0;
    std::int64_t budget = c_.max_num_batched_tokens;
    bool decode_now = true;
    if (c_.batching == BatchingMode::static_batching) {
      if (running_.empty()) {
        form_static_batch(t);
        decode_now = prefilling_.empty();  // a batch of prefilled requests decodes at once
      }
    } else {
      swap_in_waiting();
      if (c_.enable_chunked_prefill) {
        schedule_decodes();
        budget -= decoders_ * (1 + k_);
        schedule_prefills(budget, t);
      } else {
        // vLLM's scheduler without chunked prefill: prefill-only iterations first.
        schedule_prefills(budget, t);
        decode_now = prefilling_.empty();
        if (decode_now) schedule_decodes();
      }
    }
    take_kv_loads();
    BatchShape b = shape(decode_now);
    if (lora_) add_lora(b, decode_now);
    if (b.prefill_seqs == 0 && b.decode_seqs == 0 && swap_s_ == 0 && kv_load_s_ == 0) return wait_for_kv_loads(t);
    load_ = {static_cast<std::int64_t>(waiting_.size()), static_cast<std::int64_t>(running_.size()), kv_.used_blocks(),
             kv_.num_blocks()};
    const IterationTime it = b.prefill_seqs + b.decode_seqs > 0 ? cost_.iteration(b) : IterationTime{};
    const Time end = t + seconds(it.total_s) + seconds(swap_s_) + seconds(lora_load_s_) + seconds(kv_load_s_);
    const double used =
        static_cast<double>(kv_.used_blocks()) / static_cast<double>(std::max<std::int64_t>(1, kv_.num_blocks()));
    res_.kv_peak_utilization = std::max(res_.kv_peak_utilization, used);
    kv_time_ += used * (end - t).seconds();
    auto& g = res_.gpu_time;
    g.prefill_s += it.prefill_s;
    g.decode_s += it.decode_s;
    g.comm_s += it.comm_s;
    g.overhead_s += it.overhead_s;
    g.draft_s += it.draft_s;
    g.swap_s += swap_s_;
    g.lora_s += it.lora_s;
    g.lora_load_s += lora_load_s_;
    g.kv_load_s += kv_load_s_;
    // rounding of the picosecond clock
    g.idle_s += (end - t).seconds() - it.total_s - swap_s_ - lora_load_s_ - kv_load_s_;
    res_.prefill_tokens_computed += b.prefill_tokens;
    ++res_.iterations;
    if (o_.hooks.on_iteration)
      o_.hooks.on_iteration(IterationRecord{res_.iterations - 1, t, end, b, it, swap_s_, kv_.used_blocks(),
                                            static_cast<std::int64_t>(waiting_.size()),
                                            static_cast<std::int64_t>(running_.size())});
    apply(decode_now && b.decode_seqs > 0, end);
    t = end;
    return true;
  }

  // KV offloading: loads that admission did not queue (a static batch's, a prefilled request's)
  // block this iteration before its forward pass.
  void take_kv_loads() {
    kv_load_s_ = kv_load_seconds(kv_.take_loads());
    res_.kv_load_link_s += kv_load_s_;
  }
  // The loads' time: each GPU reads its share over its own link at once, from this replica's
  // host memory over PCIe, from another's (a pooled tier) over the network.
  double kv_load_seconds(const KvLoads& l) const {
    double s = 0;
    if (l.local_blocks > 0) s += static_cast<double>(l.local_blocks) * o_.kv_block_bytes / o_.host_link_bytes_per_s;
    if (l.remote_blocks > 0) {
      if (!(o_.remote_kv_bytes_per_s > 0))
        throw std::logic_error("serving: pages from a pooled host tier without ReplicaOptions::remote_kv_bytes_per_s");
      s += static_cast<double>(l.remote_blocks) * o_.kv_block_bytes / o_.remote_kv_bytes_per_s;
    }
    return s;
  }
  // Nothing to run while requests wait for their KV from the host tier: the clock moves to the
  // first of them (GPU time stalled on loads); false when none is loading.
  bool wait_for_kv_loads(Time& t) {
    Time first = kUnset;
    for (const Entry& e : prefilling_) {
      const Time r = slots_[e.slot].ready;
      if (r > t && (first == kUnset || r < first)) first = r;
    }
    if (first == kUnset) return false;
    res_.gpu_time.kv_load_s += (first - t).seconds();
    t = first;
    return true;
  }

  void swap_in_waiting() {
    while (!waiting_.empty() && slots_[waiting_.top().slot].swapped &&
           static_cast<std::int64_t>(running_.size()) < c_.max_num_seqs) {
      const auto s = waiting_.top().slot;
      Live& l = slots_[s];
      if (lora_blocked(l.r)) return;
      // Back in only with room for its next block too, else it would swap straight out again.
      if (kv_.num_blocks() - kv_.used_blocks() < l.cap_tokens / bs_ + 1) return;
      const auto moved = kv_.swap_in(l.r);
      if (!moved) return;
      waiting_.pop();
      res_.swapped_blocks += *moved;
      swap_s_ += static_cast<double>(*moved) * o_.kv_block_bytes / o_.host_link_bytes_per_s;
      l.swapped = false;
      running_.insert({l.key, s});
      lora_join(l.r);
      if (l.resume_decoding) {
        join_decode(s);
      } else {
        prefilling_.insert({l.key, s});
      }
    }
  }

  // Decode-first: every decoding request gets its tokens' KV, in service order; a failure
  // preempts from the back.
  void schedule_decodes() {
    if constexpr (kFast) {
      due_.clear();
      alloc_events_.take_due(step_, [&](const StepEvent& e) {
        if (slots_[e.slot].epoch == e.epoch && slots_[e.slot].decoding) due_.push_back({slots_[e.slot].key, e.slot});
      });
      std::sort(due_.begin(), due_.end());
      for (const Entry& e : due_) {
        Live& l = slots_[e.slot];
        if (!l.decoding) continue;  // preempted meanwhile
        if (grow(e.slot, l.r.prompt_tokens + gen(l))) {
          sync(l);  // its finish event stands: the step it finishes at has not moved
          push_alloc_event(e.slot);
        }
      }
    } else {
      due_.assign(running_.begin(), running_.end());
      for (const Entry& e : due_) {
        Live& l = slots_[e.slot];
        if (!l.decoding || !running_.count(e)) continue;  // preempted meanwhile
        grow(e.slot, l.r.prompt_tokens + l.generated + k_);
      }
    }
  }

  // Running partial prefills, then waiting requests (unless this iteration preempted), within
  // the budget, the sequence limit and the free blocks.
  void schedule_prefills(std::int64_t& budget, Time t) {
    bool first = true;  // no prefill chunk scheduled in this iteration yet
    due_.assign(prefilling_.begin(), prefilling_.end());
    for (const Entry& e : due_) {
      if (!prefilling_.count(e)) continue;
      Live& l = slots_[e.slot];
      if (l.ready > t) continue;  // still loading its KV from the host tier
      const std::int64_t todo = l.prefill_target - l.computed;
      std::int64_t chunk = std::min(budget, todo);
      // Without chunked prefill a prompt whose KV has just come in runs whole, as below.
      if (!c_.enable_chunked_prefill && chunk < todo) chunk = first ? todo : 0;
      if (chunk <= 0) continue;
      if (!grow(e.slot, l.computed + chunk)) continue;
      l.chunk = chunk;
      budget -= chunk;
      first = false;
    }
    if (preempted_) return;
    while (!waiting_.empty() && static_cast<std::int64_t>(running_.size()) < c_.max_num_seqs) {
      const auto s = waiting_.top().slot;
      Live& l = slots_[s];
      if (l.swapped) break;
      if (lora_blocked(l.r)) {  // vLLM v1 skips it for this step; requests behind it may go
        if (budget <= 0) break;
        lora_skipped_.push_back(waiting_.top());
        waiting_.pop();
        continue;
      }
      if (l.r.prefilled && l.first_scheduled == kUnset) {
        if (!admit_prefilled(s, budget, t)) break;
        continue;
      }
      const std::int64_t cached = l.computed = kv_.cached_prefix_tokens(l.r);
      const std::int64_t todo = l.prefill_target - cached;
      std::int64_t chunk = std::min(budget, todo);
      // Without chunked prefill a prompt runs whole; the first of an iteration may exceed the
      // budget (a recomputed prompt + output), else it could never run.
      if (!c_.enable_chunked_prefill && chunk < todo) chunk = first ? todo : 0;
      if (chunk <= 0) break;
      // Guaranteed no evict: its whole context to the last token reserved now, so it never
      // asks for a block again.
      const std::int64_t reserve = c_.capacity == CapacityPolicy::guaranteed_no_evict
                                       ? std::max(cached + chunk, max_kv_tokens(l.r, k_))
                                       : cached + chunk;
      if (!kv_.allocate(l.r, reserve)) break;
      waiting_.pop();
      l.cap_tokens = (reserve + bs_ - 1) / bs_ * bs_;
      if (l.first_scheduled == kUnset) l.first_scheduled = t;
      running_.insert({l.key, s});
      prefilling_.insert({l.key, s});
      lora_join(l.r);
      // Pages found in the host tier load asynchronously, one request after another over the
      // replica's links (vLLM's offloading connector: the request waits for its KV while the
      // others run); its prefill starts in the first iteration after they are in.
      if (const double load_s = kv_load_seconds(kv_.take_loads()); load_s > 0) {
        load_free_ = std::max(load_free_, t) + seconds(load_s);
        l.ready = load_free_;
        if (l.kv_loaded == kUnset) l.kv_loaded = l.ready;
        res_.kv_load_link_s += load_s;
        l.chunk = 0;
        continue;
      }
      l.chunk = chunk;
      budget -= chunk;
      first = false;
    }
    for (const Entry& e : lora_skipped_) waiting_.push(e);
    lora_skipped_.clear();
  }

  // A prefilled request (Request::prefilled), first admitted: blocks for its prompt's KV (which
  // arrived with it) and the token this iteration's decode step writes, or its whole context
  // under guaranteed_no_evict; no prefill chunk, its first token counted as emitted, and it
  // decodes from this iteration on within the token budget. False when it does not fit now.
  bool admit_prefilled(std::int32_t s, std::int64_t& budget, Time t) {
    Live& l = slots_[s];
    if (budget < 1 + k_) return false;
    const std::int64_t need = l.r.prompt_tokens + 1 + k_;
    const std::int64_t reserve =
        c_.capacity == CapacityPolicy::guaranteed_no_evict ? std::max(need, max_kv_tokens(l.r, k_)) : need;
    if (!kv_.allocate(l.r, reserve)) return false;
    waiting_.pop();
    place_prefilled(s, reserve, t);
    budget -= 1 + k_;
    return true;
  }
  void place_prefilled(std::int32_t s, std::int64_t reserved, Time t) {
    Live& l = slots_[s];
    l.cap_tokens = (reserved + bs_ - 1) / bs_ * bs_;
    l.computed = l.prefill_target;
    l.generated = 1;
    l.first_scheduled = l.first_token = t;
    running_.insert({l.key, s});
    lora_join(l.r);
    join_decode(s);
  }

  void form_static_batch(Time t) {
    while (!waiting_.empty() && static_cast<std::int64_t>(running_.size()) < c_.max_num_seqs) {
      const auto s = waiting_.top().slot;
      Live& l = slots_[s];
      if (lora_blocked(l.r)) break;  // a static batch closes at the first adapter past max_loras
      l.computed = kv_.cached_prefix_tokens(l.r);
      const std::int64_t full = max_kv_tokens(l.r, k_);  // the batch's KV is reserved up front
      if (!kv_.allocate(l.r, full)) break;
      waiting_.pop();
      if (l.r.prefilled && l.first_scheduled == kUnset) {
        place_prefilled(s, full, t);
        continue;
      }
      l.cap_tokens = (full + bs_ - 1) / bs_ * bs_;
      l.chunk = l.prefill_target - l.computed;
      l.first_scheduled = t;
      running_.insert({l.key, s});
      prefilling_.insert({l.key, s});
      lora_join(l.r);
    }
  }

  BatchShape shape(bool decode_now) {
    BatchShape b;
    b.spec_k = k_;
    b.window = o_.attention_window;
    for (const Entry& e : prefilling_) {
      const Live& l = slots_[e.slot];
      if (l.chunk == 0) continue;
      add_prefill_chunk(b, l.chunk, l.computed);
    }
    if (!decode_now || decoders_ == 0) return b;
    if constexpr (kFast) {
      b.decode_seqs = decoders_;
      b.decode_tokens = decoders_ * (1 + k_);
      b.decode_kv_tokens = static_cast<double>(ctx_sum_);
      b.decode_attended_pairs = static_cast<double>(ctx_sum_);
      if (b.window > 0) {  // no running sum for the windowed layers: each decoder's min(context, w)
        for (const Entry& e : running_) {
          const Live& l = slots_[e.slot];
          if (!l.decoding) continue;
          const auto n = static_cast<double>(std::min(l.r.prompt_tokens + gen(l), b.window));
          b.decode_window_pairs += n;
          b.decode_window_kv_tokens += n;
        }
      }
    } else {
      // Context n: tokens after this step's 1 + k are written.
      for (const Entry& e : running_) {
        const Live& l = slots_[e.slot];
        if (l.decoding) add_decode_sequence(b, l.r.prompt_tokens + l.generated + k_, k_);
      }
    }
    return b;
  }

  // ---- after the iteration
  void apply(bool decoded, Time end) {
    done_.clear();
    if (decoded) {
      ++step_;
      if constexpr (kFast) {
        ctx_sum_ += decoders_;
        while (!finish_events_.empty() && finish_events_.top().step <= step_) {
          const StepEvent e = finish_events_.top();
          finish_events_.pop();
          if (slots_[e.slot].epoch == e.epoch && slots_[e.slot].decoding) done_.push_back({slots_[e.slot].key, e.slot});
        }
        std::sort(done_.begin(), done_.end());
      } else {
        for (const Entry& e : running_) {
          Live& l = slots_[e.slot];
          if (!l.decoding) continue;
          const std::int64_t step = l.generated;  // this request's decode step, a stable key
          const int acc = k_ > 0 ? accepted_draft_tokens(c_, o_.seed, l.r.id, step) : 0;
          l.generated = std::min<std::int64_t>(l.r.output_tokens, l.generated + 1 + acc);
          if (l.generated == l.r.output_tokens) done_.push_back(e);
        }
      }
    }
    // Prefill chunks: a completed prompt emits a token at the iteration's end.
    due_.assign(prefilling_.begin(), prefilling_.end());
    for (const Entry& e : due_) {
      Live& l = slots_[e.slot];
      if (l.chunk == 0) continue;
      l.computed += l.chunk;
      l.chunk = 0;
      if (l.computed < l.prefill_target) continue;
      prefilling_.erase(e);
      ++l.generated;
      if (l.first_token == kUnset) l.first_token = end;
      if (l.generated >= l.r.output_tokens) {
        done_.push_back(e);
      } else {
        join_decode(e.slot);
      }
    }
    for (const Entry& e : done_) finish(e, end);
  }

  void finish(const Entry& e, Time end) {
    Live& l = slots_[e.slot];
    if (l.decoding) leave_decode(e.slot);
    running_.erase(e);
    lora_leave(l.r);
    kv_.release(l.r);
    ++res_.completed_requests;
    res_.input_tokens += l.r.prompt_tokens;
    res_.output_tokens += l.r.output_tokens;
    const double ttft = (l.first_token - l.r.arrival).seconds();
    const double e2e = (end - l.r.arrival).seconds();
    ttft_.add(ttft);
    e2e_.add(e2e);
    queue_.add((l.first_scheduled - l.r.arrival - o_.request_overhead).seconds());
    double tpot = 0;
    if (l.r.output_tokens > 1) {
      tpot = (end - l.first_token).seconds() / static_cast<double>(l.r.output_tokens - 1);
      tpot_.add(tpot);
    }
    const RequestClass& c = cls(l.r);
    const bool met = (c.ttft_slo_s <= 0 || ttft <= c.ttft_slo_s) && (c.tpot_slo_s <= 0 || tpot <= c.tpot_slo_s) &&
                     (c.e2e_slo_s <= 0 || e2e <= c.e2e_slo_s);
    met_ += met ? 1 : 0;
    if (o_.hooks.on_request)
      o_.hooks.on_request(RequestRecord{l.r, false, l.first_scheduled, l.first_token, end, l.preemptions, met,
                                        l.r.arrival + o_.request_overhead,
                                        l.kv_loaded != kUnset ? l.kv_loaded : l.first_scheduled});
    src_.completed(l.r, end);
    ++l.epoch;
    free_.push_back(e.slot);
  }

  static LatencySummary summary(const QuantileHistogram& h) {
    return {h.quantile(0.5), h.quantile(0.9), h.quantile(0.99), h.mean(), h.count()};
  }
  void finish_result(Time t) {
    res_.makespan_s = t.seconds();
    res_.ttft_s = summary(ttft_);
    res_.tpot_s = summary(tpot_);
    res_.e2e_s = summary(e2e_);
    res_.queueing_s = summary(queue_);
    if (res_.makespan_s > 0) {
      res_.requests_per_s = static_cast<double>(res_.completed_requests) / res_.makespan_s;
      res_.input_tokens_per_s = static_cast<double>(res_.input_tokens) / res_.makespan_s;
      res_.output_tokens_per_s = static_cast<double>(res_.output_tokens) / res_.makespan_s;
      res_.goodput_requests_per_s = static_cast<double>(met_) / res_.makespan_s;
      res_.kv_mean_utilization = kv_time_ / res_.makespan_s;
    }
    const auto judged = res_.completed_requests + res_.rejected_requests;
    res_.slo_attainment = judged ? static_cast<double>(met_) / static_cast<double>(judged) : 0;
    res_.kv_stats = kv_.stats();
    if (lora_) res_.lora = lora_->stats();
    if (res_.kv_stats.prefix_query_tokens > 0)
      res_.prefix_hit_rate =
          static_cast<double>(res_.kv_stats.prefix_hit_tokens) / static_cast<double>(res_.kv_stats.prefix_query_tokens);
  }

  TrafficSource& src_;
  KvCache& kv_;
  const IterationCostModel& cost_;
  const SchedulerConfig& c_;
  const ReplicaOptions& o_;
  const int k_;
  const std::int64_t bs_;

  std::vector<Live> slots_;
  std::vector<std::int32_t> free_;
  WaitingQueue waiting_;
  EntrySet running_;     // all admitted, in service order (the back is preempted first)
  EntrySet prefilling_;  // of which still prefilling
  std::vector<Entry> due_, done_;
  std::int64_t decoders_ = 0;
  std::int64_t step_ = 0;     // decode steps run so far
  std::int64_t ctx_sum_ = 0;  // fast: sum over decoders of prompt + generated
  StepCalendar alloc_events_;
  EventHeap finish_events_;
  bool preempted_ = false;
  double swap_s_ = 0;
  std::optional<LoraAdapterCache> lora_;  // with enable_lora
  double lora_load_s_ = 0;                // this iteration's adapter loads
  double kv_load_s_ = 0;                  // this iteration's blocking loads from the host tier of KV
  Time load_free_{0};                     // when the replica's links finish the loads queued so far
  std::int64_t lora_decoders_ = 0;        // decoding requests with an adapter
  std::vector<std::int32_t> lora_seen_;
  std::vector<Entry> lora_skipped_;  // waiting requests passed over this iteration (max_loras)
  double kv_time_ = 0;
  std::int64_t met_ = 0;
  QuantileHistogram ttft_, tpot_, e2e_, queue_;
  ServingResult res_;
  Time t_;                  // the replica's clock: the end of its last iteration
  int empty_in_a_row_ = 0;  // iterations that ran nothing (a stuck scheduler)
  ReplicaLoad load_;        // as scheduled for the iteration in progress
};

}  // namespace

ServingResult simulate_replica(TrafficSource& source, KvCache& kv, const IterationCostModel& cost,
                               const SchedulerConfig& config, const ReplicaOptions& options) {
  if (config.num_speculative_tokens > 0) return Replica<false>(source, kv, cost, config, options).run();
  return Replica<true>(source, kv, cost, config, options).run();
}

// The stepper's seam over both loops.
struct SteppableReplica::Impl {
  virtual ~Impl() = default;
  virtual Time now() const = 0;
  virtual bool busy() const = 0;
  virtual bool step() = 0;
  virtual ReplicaLoad load() const = 0;
  virtual void idle_until(Time t) = 0;
  virtual std::vector<Request> abort() = 0;
  virtual ServingResult finish() = 0;
};

namespace {
template <bool kFast>
struct StepperOf final : SteppableReplica::Impl {
  template <class... A>
  explicit StepperOf(A&&... a) : r(std::forward<A>(a)...) {}
  Time now() const override { return r.now(); }
  bool busy() const override { return r.busy(); }
  bool step() override { return r.step(); }
  ReplicaLoad load() const override { return r.load(); }
  void idle_until(Time t) override { r.idle_until(t); }
  std::vector<Request> abort() override { return r.abort(); }
  ServingResult finish() override { return r.finish(); }
  Replica<kFast> r;
};
}  // namespace

SteppableReplica::SteppableReplica(TrafficSource& source, KvCache& kv, const IterationCostModel& cost,
                                   const SchedulerConfig& config, const ReplicaOptions& options, Time start,
                                   bool reference) {
  if (!reference && config.num_speculative_tokens == 0) {
    impl_ = std::make_unique<StepperOf<true>>(source, kv, cost, config, options, start);
  } else {
    impl_ = std::make_unique<StepperOf<false>>(source, kv, cost, config, options, start);
  }
}
SteppableReplica::~SteppableReplica() = default;
SteppableReplica::SteppableReplica(SteppableReplica&&) noexcept = default;
SteppableReplica& SteppableReplica::operator=(SteppableReplica&&) noexcept = default;
Time SteppableReplica::now() const { return impl_->now(); }
bool SteppableReplica::busy() const { return impl_->busy(); }
bool SteppableReplica::step() { return impl_->step(); }
ReplicaLoad SteppableReplica::load() const { return impl_->load(); }
void SteppableReplica::idle_until(Time t) { impl_->idle_until(t); }
std::vector<Request> SteppableReplica::abort() { return impl_->abort(); }
ServingResult SteppableReplica::finish() { return impl_->finish(); }

ServingResult simulate_replica_reference(TrafficSource& source, KvCache& kv, const IterationCostModel& cost,
                                         const SchedulerConfig& config, const ReplicaOptions& options) {
  return Replica<false>(source, kv, cost, config, options).run();
}

}  // namespace ctwin
