// The job engine: one replication of a training job as a loop over events (failures, repairs,
// checkpoint milestones, background writes ending, recovery stages ending), advancing training
// in closed form between them. Job time is double seconds (see job.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>

#include "job_engine.hpp"
#include "sim/random.hpp"

namespace ctwin {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kDay = 86400;
// A job still running after this long, or this many events, never ends (failures outpace its
// recovery): an error rather than a loop without end.
constexpr double kMaxJobTimeS = 1e9;  // 31.7 years
constexpr std::int64_t kMaxJobEvents = 200'000'000;

// What a draw is for; with the seed, the replication and an index it makes the key.
enum Purpose : std::uint64_t {
  kInterarrival = 1,  // + cause index
  kNodePick = 32,
  kNodeInReplica = 33,
  kSlowInit = 34,
  kSlowOnset = 35,      // the exposure (healthy node-days) to the next node turning slow
  kSlowOnsetPick = 36,  // which healthy node
};

double draw(std::uint64_t seed, std::uint64_t rep, std::uint64_t purpose, std::uint64_t index) {
  return uniform01(mix64(mix64(seed) ^ rep) ^ mix64((purpose << 32) ^ index));
}

// Step time buckets accumulated over a stretch of training.
struct Buckets {
  double productive_s = 0, elastic_s = 0, straggler_s = 0, background_s = 0, data_s = 0;
  void add(const StepSplit& s, double n) {
    productive_s += s.productive_s * n;
    elastic_s += s.elastic_s * n;
    straggler_s += s.straggler_s * n;
    background_s += s.background_s * n;
    data_s += s.data_s * n;
  }
  void add(const Buckets& b) {
    productive_s += b.productive_s;
    elastic_s += b.elastic_s;
    straggler_s += b.straggler_s;
    background_s += b.background_s;
    data_s += b.data_s;
  }
  double total() const { return productive_s + elastic_s + straggler_s + background_s + data_s; }
};

enum class Phase : std::uint8_t { train, stall, recover, done };
enum class Stall : std::uint8_t { sync_write, host_copy, wait_background, link_retry, stop_save };
enum class Stage : std::uint8_t { detection, reschedule, wait_repair, restart, load };
JobEventKind stage_event(Stage s) {
  switch (s) {
    case Stage::detection:
      return JobEventKind::detection;
    case Stage::reschedule:
    case Stage::wait_repair:
      return JobEventKind::reschedule;
    case Stage::restart:
      return JobEventKind::restart;
    case Stage::load:
      return JobEventKind::load;
  }
  return JobEventKind::restart;
}

enum class StopReason : std::uint8_t { none, planned, checkpoint };

struct Repair {
  double at_s = 0;
  int replica = -1;  // shrink: the replica that comes back; -1: a node back to the spare pool
  bool operator>(const Repair& o) const { return at_s > o.at_s || (at_s == o.at_s && replica > o.replica); }
};

class JobRun {
 public:
  JobRun(const JobSpec& spec, const JobInputs& in, JobStepCache& cache, int replication)
      : s_(spec), in_(in), cache_(cache), rep_(static_cast<std::uint64_t>(replication)) {}

  JobResult run();

 private:
  // Configuration and derived values.
  JobConfiguration config() const { return {.dp = active_dp_, .slow_gpus = active_slow_, .background_write = bg_}; }
  const StepSplit& split(const JobConfiguration& c);
  const StepSplit& split_uncached(const JobConfiguration& c);
  double active_gpus() const { return static_cast<double>(active_dp_) * gpus_per_replica_; }
  double active_nodes() const { return active_gpus() / in_.gpus_per_node; }
  double units(const FailureCauseSpec& c) const;
  double bytes_per_rank() const { return total_ckpt_bytes_ / active_gpus(); }
  double nic_share() const { return in_.nic_bytes_per_s_per_node / in_.gpus_per_node; }
  double write_s() const;
  double read_s() const;
  double host_copy_s() const;
  double peer_s() const;
  double save_s() const;  // a stop's full save: durable before the job stops
  double load_time_s() const { return s_.checkpoint.mode == CheckpointMode::in_memory ? peer_s() : read_s(); }
  // The wall time of one step at diurnal factor f: the step slowed by f, the data stall not.
  static double wall_s(const StepSplit& sp, double f) { return f == 1 ? sp.eff_s : sp.eff_s + (f - 1) * sp.step_s; }
  bool node_in_job(std::size_t node) const {
    return in_job_[node * static_cast<std::size_t>(in_.gpus_per_node) / static_cast<std::size_t>(gpus_per_replica_)] !=
           0;
  }
  double healthy_nodes() const { return std::max(0.0, active_nodes() - active_slow_); }
  // The diurnal factor of the clock hour holding t_ (cached per hour: the loop asks every event).
  double hour_factor() {
    if (!(s_.stragglers.diurnal_amplitude > 0)) return 1;
    const double hour = std::floor(t_ / 3600);
    if (hour != factor_hour_) {
      factor_hour_ = hour;
      factor_ = diurnal_factor(s_.stragglers, t_);
    }
    return factor_;
  }
  double restart_time_s() const {
    return s_.restart.container_start_s + s_.restart.nccl_init_s(static_cast<int>(std::lround(active_gpus())));
  }

  // Events.
  double next_interarrival(int cause);
  void advance(double t);
  void start_period();
  void begin_stall(Stall k, double dur);
  // Training stops for `why`: a background write is abandoned, and a full save runs first.
  void stop_and_save(StopReason why);
  void begin_checkpoint();
  void end_stall();
  void commit(const Buckets& b);
  void rollback(int cause);
  void fail(int cause, int first_node, int nodes);
  void start_recovery(int cause, double detect_s, double resched_s, StopReason stop);
  void next_stage();
  void enter_train();
  void repair(const Repair& r);
  void set_active_replicas();
  void emit(JobEventKind k, double start, double end, int cause = 0, int nodes = -1);
  // Slow-node onset: exposure in healthy node-days, as the failure causes'.
  double next_onset();
  void set_onset(double rem);
  void slow_onset();

  const JobSpec& s_;
  const JobInputs& in_;
  JobStepCache& cache_;
  std::uint64_t rep_;
  JobResult r_;

  int gpus_per_replica_ = 0;
  double total_ckpt_bytes_ = 0;
  double total_tokens_ = 0;
  double t_ = 0;
  Phase phase_ = Phase::train;
  double phase_end_ = kInf;
  double phase_start_ = 0;
  Stall stall_ = Stall::sync_write;
  // Recovery: the stages still to run (front first), the cause (-1: a stop) and the stop reason.
  std::vector<std::pair<Stage, double>> stages_;
  Stage stage_ = Stage::detection;
  int rec_cause_ = -1;
  StopReason stop_ = StopReason::none;

  // Progress: done, at the restore point R, at the in-flight snapshot S.
  double tokens_ = 0, steps_ = 0;
  double r_tokens_ = 0, r_steps_ = 0;
  double s_tokens_ = 0, s_steps_ = 0;
  Buckets acc_rs_, acc_s_;  // R..S and after S (after R when nothing is in flight)
  bool in_flight_ = false;
  double restorable_at_ = kInf;
  bool bg_ = false;
  double bg_start_ = 0, bg_end_ = kInf;
  std::int64_t ckpt_count_ = 0;
  double since_ck_ = 0, ck_target_ = 1;
  double slow_steps_ = 0;

  // Replicas and nodes.
  std::vector<char> up_;      // shrink: replica r is repaired (available)
  std::vector<char> in_job_;  // replica r is in the job
  int active_dp_ = 0;
  std::vector<char> slow_;  // node holds a slow GPU
  int active_slow_ = 0;
  int spares_free_ = 0;
  std::priority_queue<Repair, std::vector<Repair>, std::greater<Repair>> repairs_;
  bool pending_evict_ = false;   // lemon eviction at the next checkpoint
  bool pending_rejoin_ = false;  // repaired replicas rejoin at the next checkpoint
  bool pending_planned_ = false;

  // Failures: each cause's exposure (unit-days) left to its next failure as of rem_t_, the
  // units exposed since, and so the failure's time (kept until the units change: a shrink or a
  // rejoin); the draw indices; the earliest cause.
  std::array<double, kFailureCauses> rem_{};
  std::array<double, kFailureCauses> rem_t_{};
  std::array<double, kFailureCauses> units_{};
  std::array<double, kFailureCauses> fail_at_{};
  std::array<std::uint64_t, kFailureCauses> idx_{};
  int first_fail_ = -1;
  void set_failure(int c, double rem);
  void rescale_failures();
  void find_first_failure();
  std::vector<ScheduledFailure> scheduled_;
  std::size_t next_sched_ = 0;

  // Slow-node onset: the exposure left (healthy node-days) as of onset_t_, the healthy nodes
  // exposed since, the next onset's time, the draw indices.
  double onset_rem_ = kInf, onset_t_ = 0, onset_units_ = 0, onset_at_ = kInf;
  std::uint64_t onset_idx_ = 0, onset_picks_ = 0;
  std::array<std::pair<JobConfiguration, const StepSplit*>, 2> recent_{};
  int recent_next_ = 0;
  double factor_hour_ = -1, factor_ = 1;
};

const StepSplit& JobRun::split(const JobConfiguration& c) {
  // The last two configurations asked (training with and without a background write): the
  // cache's linear search grows with the slow-GPU counts that onset brings.
  for (const auto& [k, v] : recent_) {
    if (v != nullptr && k == c) return *v;
  }
  const StepSplit& sp = split_uncached(c);
  recent_[recent_next_] = {c, &sp};
  recent_next_ ^= 1;
  return sp;
}

const StepSplit& JobRun::split_uncached(const JobConfiguration& c) {
  if (const StepSplit* hit = cache_.split(c)) return *hit;
  StepSplit sp;
  sp.step_s = cache_.step(c);
  const double full = cache_.step({.dp = in_.dp, .slow_gpus = 0, .background_write = false});
  const double base = cache_.step({.dp = c.dp, .slow_gpus = 0, .background_write = false});
  const double slow =
      c.slow_gpus > 0 ? cache_.step({.dp = c.dp, .slow_gpus = c.slow_gpus, .background_write = false}) : base;
  const double frac = static_cast<double>(c.dp) / in_.dp;
  sp.tokens = s_.elasticity.keep_global_batch ? in_.tokens_per_step : in_.tokens_per_step * frac;
  sp.productive_s = full * sp.tokens / in_.tokens_per_step;
  sp.elastic_s = base - sp.productive_s;
  sp.straggler_s = slow - base;
  sp.background_s = sp.step_s - slow;
  const double samples = (s_.elasticity.keep_global_batch ? in_.samples_per_step : in_.samples_per_step * frac);
  const double nodes = static_cast<double>(c.dp) * gpus_per_replica_ / in_.gpus_per_node;
  sp.data_s = s_.data_loader.stall_s(samples / nodes, sp.step_s);
  sp.eff_s = sp.step_s + sp.data_s;
  return cache_.put_split(c, sp);
}

double JobRun::units(const FailureCauseSpec& c) const {
  switch (c.unit) {
    case RateUnit::per_gpu_day:
      return active_gpus();
    case RateUnit::per_node_day:
      return active_nodes();
    case RateUnit::per_job_day:
      return 1;
  }
  return 0;
}

double JobRun::write_s() const {
  return storage_transfer_s(bytes_per_rank(), static_cast<int>(std::lround(active_gpus())),
                            s_.storage.write_bytes_per_s, s_.storage.per_client_bytes_per_s, nic_share());
}
double JobRun::read_s() const {
  return storage_transfer_s(bytes_per_rank(), static_cast<int>(std::lround(active_gpus())), s_.storage.read_bytes_per_s,
                            s_.storage.per_client_bytes_per_s, nic_share());
}
double JobRun::host_copy_s() const {
  return in_.pcie_bytes_per_s_per_gpu > 0 ? bytes_per_rank() / in_.pcie_bytes_per_s_per_gpu : 0;
}
double JobRun::peer_s() const {
  return in_.nic_bytes_per_s_per_node > 0 ? bytes_per_rank() * in_.gpus_per_node / in_.nic_bytes_per_s_per_node : 0;
}
double JobRun::save_s() const {
  switch (s_.checkpoint.mode) {
    case CheckpointMode::sync:
      return write_s();
    case CheckpointMode::async:
      return host_copy_s() + write_s();
    case CheckpointMode::in_memory:
      return host_copy_s() + peer_s();
  }
  return 0;
}

double JobRun::next_interarrival(int cause) {
  const FailureCauseSpec& c = s_.causes[static_cast<std::size_t>(cause)];
  if (c.rate <= 0) return kInf;
  const double u = draw(s_.monte_carlo.seed, rep_, kInterarrival + static_cast<std::uint64_t>(cause), idx_[cause]++);
  const double mean = 1 / c.rate;  // unit-days between failures
  if (c.distribution == FailureDistribution::weibull) {
    const double k = c.weibull_shape;
    const double scale = mean / std::tgamma(1 + 1 / k);
    return scale * std::pow(-std::log(u), 1 / k);
  }
  return -std::log(u) * mean;
}

void JobRun::set_failure(int c, double rem) {
  rem_[c] = rem;
  rem_t_[c] = t_;
  fail_at_[c] = units_[c] > 0 && rem < kInf ? t_ + rem * kDay / units_[c] : kInf;
}

// The job's size changed: each cause's exposure left is what it was less what the old size
// used up; the failure times follow at the new size.
void JobRun::rescale_failures() {
  for (int c = 0; c < kFailureCauses; ++c) {
    const double used = units_[c] * (t_ - rem_t_[c]) / kDay;
    const double left = rem_[c] < kInf ? std::max(0.0, rem_[c] - used) : kInf;
    units_[c] = units(s_.causes[static_cast<std::size_t>(c)]);
    set_failure(c, left);
  }
  find_first_failure();
}

void JobRun::find_first_failure() {
  first_fail_ = -1;
  double best = kInf;
  for (int c = 0; c < kFailureCauses; ++c) {
    if (fail_at_[c] < best) {
      best = fail_at_[c];
      first_fail_ = c;
    }
  }
}

void JobRun::emit(JobEventKind k, double start, double end, int cause, int nodes) {
  if (!s_.timeline || r_.timeline.size() >= s_.max_timeline_events) return;
  const int n = nodes >= 0 ? nodes : static_cast<int>(std::lround(active_nodes()));
  if (k == JobEventKind::train && !r_.timeline.empty()) {
    JobEvent& last = r_.timeline.back();
    if (last.kind == JobEventKind::train && last.end_s == start && last.dp == active_dp_) {
      last.end_s = end;
      return;
    }
  }
  r_.timeline.push_back({.kind = k,
                         .cause = static_cast<FailureCause>(cause),
                         .start_s = start,
                         .end_s = end,
                         .nodes = n,
                         .dp = active_dp_,
                         .step = static_cast<std::int64_t>(std::floor(steps_ + 1e-9))});
}

double JobRun::next_onset() {
  const double rate = s_.stragglers.slow_onset_per_node_day;
  if (!(rate > 0)) return kInf;
  return -std::log(draw(s_.monte_carlo.seed, rep_, kSlowOnset, onset_idx_++)) / rate;  // node-days
}

void JobRun::set_onset(double rem) {
  onset_rem_ = rem;
  onset_t_ = t_;
  onset_units_ = healthy_nodes();
  onset_at_ = onset_units_ > 0 && rem < kInf ? t_ + rem * kDay / onset_units_ : kInf;
}

// A healthy node in the job turns slow (picked uniformly); the next onset is drawn.
void JobRun::slow_onset() {
  // Rejection sampling: a node drawn uniformly, kept when healthy and in the job (uniform over
  // those); after 64 misses (nearly all slow or out), a scan picks among them.
  const std::size_t nodes = slow_.size();
  std::size_t pick = nodes;
  for (int tries = 0; tries < 64 && pick == nodes; ++tries) {
    const double u = draw(s_.monte_carlo.seed, rep_, kSlowOnsetPick, onset_picks_++);
    const std::size_t node = std::min(nodes - 1, static_cast<std::size_t>(u * static_cast<double>(nodes)));
    if (!slow_[node] && node_in_job(node)) pick = node;
  }
  if (pick == nodes) {
    std::size_t healthy = 0;
    for (std::size_t node = 0; node < nodes; ++node) healthy += !slow_[node] && node_in_job(node) ? 1 : 0;
    if (healthy > 0) {
      const double u = draw(s_.monte_carlo.seed, rep_, kSlowOnsetPick, onset_picks_++);
      std::size_t k = std::min(healthy - 1, static_cast<std::size_t>(u * static_cast<double>(healthy)));
      for (std::size_t node = 0; node < nodes && pick == nodes; ++node) {
        if (!slow_[node] && node_in_job(node) && k-- == 0) pick = node;
      }
    }
  }
  if (pick < nodes) {
    slow_[pick] = 1;
    if (active_slow_ == 0) slow_steps_ = 0;  // the first slow node in the job: its count starts
    ++active_slow_;
    ++r_.slow_onsets;
    emit(JobEventKind::slow_node, t_, t_, 0, 1);
  }
  set_onset(next_onset());
}

// Moves time to t: exposure for the failure processes, training progress, the stage buckets.
void JobRun::advance(double t) {
  const double dt = t - t_;
  if (dt <= 0) return;
  if (phase_ == Phase::train) {
    const JobConfiguration cfg = config();
    const StepSplit& sp = split(cfg);
    // The stretch lies within one clock hour (an event at every hour while training with a
    // diurnal amplitude): one factor.
    const double f = hour_factor();
    double n = dt / wall_s(sp, f);
    if (cache_.per_step) {
      // The reference: step_fn asked again for every step (whole or part) of the stretch.
      double sum = 0;
      const auto whole = static_cast<std::int64_t>(std::ceil(n - 1e-12));
      for (std::int64_t i = 0; i < whole; ++i) sum += cache_.fn(cfg);
      if (whole > 0) n = dt / (sum / static_cast<double>(whole) * f + sp.data_s);
    }
    emit(JobEventKind::train, t_, t);  // before the progress: the segment's first step
    acc_s_.add(sp, n);
    if (f != 1) acc_s_.straggler_s += (f - 1) * sp.step_s * n;  // the diurnal slowdown
    tokens_ += n * sp.tokens;
    steps_ += n;
    since_ck_ += n;
    if (active_slow_ > 0) slow_steps_ += n;
  } else if (phase_ == Phase::recover) {
    double* bucket = nullptr;
    switch (stage_) {
      case Stage::detection:
        bucket = &r_.lost.detection_s;
        break;
      case Stage::reschedule:
      case Stage::wait_repair:
        bucket = &r_.lost.reschedule_s;
        break;
      case Stage::restart:
        bucket = &r_.lost.restart_s;
        break;
      case Stage::load:
        bucket = &r_.lost.load_s;
        break;
    }
    *bucket += dt;
    if (rec_cause_ >= 0) r_.lost_by_cause_s[static_cast<std::size_t>(rec_cause_)] += dt;
  } else if (phase_ == Phase::stall) {
    if (stall_ == Stall::link_retry) {
      r_.lost.link_retry_s += dt;
    } else {
      r_.lost.checkpoint_s += dt;
    }
  }
  t_ = t;
}

void JobRun::commit(const Buckets& b) {
  r_.productive_s += b.productive_s;
  r_.lost.elastic_s += b.elastic_s;
  r_.lost.straggler_s += b.straggler_s;
  r_.lost.checkpoint_s += b.background_s;
  r_.lost.data_stall_s += b.data_s;
}

// A new checkpoint period: its length in steps at the current configuration.
void JobRun::start_period() {
  since_ck_ = 0;
  if (s_.checkpoint.interval_steps > 0) {
    ck_target_ = static_cast<double>(s_.checkpoint.interval_steps);
  } else {
    const double eff = split(config()).eff_s;
    ck_target_ = std::max(1.0, std::ceil(s_.checkpoint.interval_s / eff - 1e-9));
  }
}

void JobRun::begin_stall(Stall k, double dur) {
  phase_ = Phase::stall;
  stall_ = k;
  phase_start_ = t_;
  phase_end_ = t_ + dur;
}

void JobRun::stop_and_save(StopReason why) {
  stop_ = why;
  bg_ = false;
  bg_end_ = kInf;
  in_flight_ = false;
  restorable_at_ = kInf;
  begin_stall(Stall::stop_save, save_s());
}

void JobRun::begin_checkpoint() {
  ++r_.checkpoints;
  if (pending_evict_ || pending_rejoin_) {
    // A lemon eviction or a rejoin replaces this checkpoint: a full save, then a restart.
    stop_and_save(StopReason::checkpoint);
    return;
  }
  switch (s_.checkpoint.mode) {
    case CheckpointMode::sync:
      begin_stall(Stall::sync_write, write_s());
      return;
    case CheckpointMode::async:
    case CheckpointMode::in_memory:
      if (bg_) {
        begin_stall(Stall::wait_background, kInf);
      } else {
        begin_stall(Stall::host_copy, host_copy_s());
      }
      return;
  }
}

void JobRun::end_stall() {
  const double start = phase_start_;
  switch (stall_) {
    case Stall::sync_write:
      emit(JobEventKind::checkpoint, start, t_);
      commit(acc_rs_);
      commit(acc_s_);
      acc_rs_ = acc_s_ = {};
      r_tokens_ = tokens_;
      r_steps_ = steps_;
      enter_train();
      start_period();
      return;
    case Stall::host_copy: {
      emit(JobEventKind::checkpoint, start, t_);
      // The snapshot is the state now; its storage (or peer) copy runs in the background.
      acc_rs_.add(acc_s_);
      acc_s_ = {};
      s_tokens_ = tokens_;
      s_steps_ = steps_;
      in_flight_ = true;
      ++ckpt_count_;
      const bool storage =
          s_.checkpoint.mode == CheckpointMode::async || ckpt_count_ % std::max(1, s_.checkpoint.storage_every) == 0;
      double restorable = 0, bg = 0;
      if (s_.checkpoint.mode == CheckpointMode::async) {
        restorable = bg = write_s();
      } else {
        restorable = peer_s();
        bg = restorable + (storage ? write_s() : 0);
      }
      bg_ = true;
      bg_start_ = t_;
      bg_end_ = t_ + bg;
      restorable_at_ = t_ + restorable;
      enter_train();
      start_period();
      return;
    }
    case Stall::wait_background:
      begin_stall(Stall::host_copy, host_copy_s());
      phase_start_ = start;  // one checkpoint stall on the timeline: the wait and the copy
      return;
    case Stall::link_retry:
      emit(JobEventKind::link_retry, start, t_, static_cast<int>(FailureCause::link_flap));
      enter_train();
      return;
    case Stall::stop_save: {
      emit(JobEventKind::checkpoint, start, t_);
      commit(acc_rs_);
      commit(acc_s_);
      acc_rs_ = acc_s_ = {};
      r_tokens_ = tokens_;
      r_steps_ = steps_;
      const StopReason why = stop_;
      double resched = 0;
      if (why == StopReason::checkpoint && pending_evict_) {
        // The lemons go; replacements come from the spare pool or the cluster.
        pending_evict_ = false;
        int n = 0;
        for (const char sl : slow_) n += sl;
        if (s_.elasticity.policy == ElasticPolicy::hot_spare && spares_free_ >= n) {
          spares_free_ -= n;
          for (int i = 0; i < n; ++i) repairs_.push({t_ + s_.restart.repair_s, -1});
          resched = s_.restart.reschedule_with_spare_s;
        } else {
          resched = s_.restart.reschedule_without_spare_s;
        }
        emit(JobEventKind::eviction, t_, t_, 0, n);
        std::fill(slow_.begin(), slow_.end(), 0);
        active_slow_ = 0;
        slow_steps_ = 0;
        ++r_.evictions;
      }
      if (why == StopReason::checkpoint && pending_rejoin_) {
        pending_rejoin_ = false;
        const int before = active_dp_;
        set_active_replicas();
        if (active_dp_ != before) {
          ++r_.resizes;
          emit(JobEventKind::resize, t_, t_);
        }
      }
      const int cause = why == StopReason::planned ? static_cast<int>(FailureCause::planned) : -1;
      start_recovery(cause, 0, resched, why);
      return;
    }
  }
}

void JobRun::enter_train() {
  phase_ = Phase::train;
  phase_start_ = t_;
  phase_end_ = kInf;
}

// Back to the restore point: the work since is lost.
void JobRun::rollback(int cause) {
  const double lost = acc_rs_.total() + acc_s_.total();
  r_.lost.lost_work_s += lost;
  if (cause >= 0) r_.lost_by_cause_s[static_cast<std::size_t>(cause)] += lost;
  acc_rs_ = acc_s_ = {};
  tokens_ = r_tokens_;
  steps_ = r_steps_;
  in_flight_ = false;
  restorable_at_ = kInf;
  if (bg_) {
    emit(JobEventKind::checkpoint_write, bg_start_, t_);
    bg_ = false;
    bg_end_ = kInf;
  }
}

void JobRun::set_active_replicas() {
  int n = 0;
  for (std::size_t r = 0; r < up_.size(); ++r) {
    in_job_[r] = up_[r];
    n += up_[r];
  }
  const bool changed = n != active_dp_;
  active_dp_ = n;
  if (changed) rescale_failures();
  active_slow_ = 0;
  for (std::size_t node = 0; node < slow_.size(); ++node) {
    if (!slow_[node]) continue;
    const auto first = static_cast<int>(node) * in_.gpus_per_node / gpus_per_replica_;
    if (in_job_[static_cast<std::size_t>(first)]) ++active_slow_;
  }
}

// A fault of `cause` taking nodes [first_node, first_node + nodes) (nodes 0: none).
void JobRun::fail(int cause, int first_node, int nodes) {
  const FailureCauseSpec& c = s_.causes[static_cast<std::size_t>(cause)];
  const bool interrupts = !(cause == static_cast<int>(FailureCause::link_flap) && c.absorbed) &&
                          cause != static_cast<int>(FailureCause::planned);
  if (interrupts && phase_ == Phase::stall) {
    // The stall under way stops here (on the timeline up to now).
    emit(stall_ == Stall::link_retry ? JobEventKind::link_retry : JobEventKind::checkpoint, phase_start_, t_,
         stall_ == Stall::link_retry ? static_cast<int>(FailureCause::link_flap) : 0);
  }
  if (interrupts && phase_ == Phase::recover) {
    // The recovery under way stops here; its stage so far goes on the timeline.
    if (t_ > phase_start_) emit(stage_event(stage_), phase_start_, t_, std::max(rec_cause_, 0));
    stages_.clear();
  }
  emit(JobEventKind::failure, t_, t_, cause, nodes);
  if (cause == static_cast<int>(FailureCause::link_flap) && c.absorbed) {
    ++r_.link_flaps_absorbed;
    if (phase_ == Phase::train) begin_stall(Stall::link_retry, c.retry_s);
    return;
  }
  if (cause == static_cast<int>(FailureCause::planned)) {
    ++r_.interruptions;
    ++r_.interruptions_by_cause[static_cast<std::size_t>(cause)];
    if (phase_ == Phase::train) {
      stop_and_save(StopReason::planned);
    } else {
      pending_planned_ = true;
    }
    return;
  }
  ++r_.interruptions;
  ++r_.interruptions_by_cause[static_cast<std::size_t>(cause)];
  rollback(cause);
  // The nodes taken: slow ones are replaced by healthy ones.
  const int total_nodes = in_.nodes();
  const int lo = std::clamp(first_node, 0, total_nodes);
  const int hi = std::clamp(first_node + nodes, 0, total_nodes);
  for (int n = lo; n < hi; ++n) slow_[static_cast<std::size_t>(n)] = 0;
  double resched = 0;
  const int lost_nodes = hi - lo;
  if (lost_nodes > 0) {
    switch (s_.elasticity.policy) {
      case ElasticPolicy::wait:
        resched = s_.restart.reschedule_without_spare_s;
        break;
      case ElasticPolicy::hot_spare:
        if (spares_free_ >= lost_nodes) {
          spares_free_ -= lost_nodes;
          for (int i = 0; i < lost_nodes; ++i) repairs_.push({t_ + s_.restart.repair_s, -1});
          resched = s_.restart.reschedule_with_spare_s;
        } else {
          resched = s_.restart.reschedule_without_spare_s;
        }
        break;
      case ElasticPolicy::shrink: {
        // Every replica with a GPU on a lost node leaves until the node is repaired.
        const int r0 = lo * in_.gpus_per_node / gpus_per_replica_;
        const int r1 = (hi * in_.gpus_per_node - 1) / gpus_per_replica_;
        for (int r = r0; r <= r1; ++r) {
          if (!up_[static_cast<std::size_t>(r)]) continue;
          up_[static_cast<std::size_t>(r)] = 0;
          repairs_.push({t_ + s_.restart.repair_s, r});
        }
        const int before = active_dp_;
        set_active_replicas();
        if (active_dp_ != before) {
          ++r_.resizes;
          emit(JobEventKind::resize, t_, t_);
        }
        break;
      }
    }
  }
  if (s_.elasticity.policy != ElasticPolicy::shrink) {
    int n = 0;
    for (const char sl : slow_) n += sl;
    active_slow_ = n;
  }
  start_recovery(cause, s_.detection.seconds(c.detected_by), resched, StopReason::none);
}

void JobRun::start_recovery(int cause, double detect_s, double resched_s, StopReason stop) {
  phase_ = Phase::recover;
  rec_cause_ = cause;
  stop_ = stop;
  stages_.clear();
  if (detect_s > 0) stages_.push_back({Stage::detection, detect_s});
  if (s_.elasticity.policy == ElasticPolicy::shrink && active_dp_ < s_.elasticity.min_dp) {
    stages_.push_back({Stage::wait_repair, kInf});
  } else if (resched_s > 0) {
    stages_.push_back({Stage::reschedule, resched_s});
  }
  stages_.push_back({Stage::restart, -1});  // durations at the stage's start (the job's size then)
  stages_.push_back({Stage::load, -1});
  std::reverse(stages_.begin(), stages_.end());
  phase_start_ = t_;  // nothing of the phase before is a stage
  next_stage();
}

void JobRun::next_stage() {
  if (phase_ == Phase::recover && t_ > phase_start_) {
    emit(stage_event(stage_), phase_start_, t_, std::max(rec_cause_, 0));
  }
  if (stages_.empty()) {
    enter_train();
    start_period();
    return;
  }
  auto [stage, dur] = stages_.back();
  stages_.pop_back();
  if (stage == Stage::restart) dur = restart_time_s();
  if (stage == Stage::load) dur = load_time_s();
  stage_ = stage;
  phase_ = Phase::recover;
  phase_start_ = t_;
  phase_end_ = t_ + dur;
}

void JobRun::repair(const Repair& rp) {
  if (rp.replica < 0) {
    ++spares_free_;
    return;
  }
  up_[static_cast<std::size_t>(rp.replica)] = 1;
  if (phase_ == Phase::recover && stage_ == Stage::wait_repair) {
    int avail = 0;
    for (const char u : up_) avail += u;
    if (avail >= s_.elasticity.min_dp) {
      set_active_replicas();
      ++r_.resizes;
      emit(JobEventKind::resize, t_, t_);
      next_stage();
    }
    return;
  }
  pending_rejoin_ = true;
}

JobResult JobRun::run() {
  const int nodes = in_.nodes();
  gpus_per_replica_ = in_.gpus / in_.dp;
  total_ckpt_bytes_ = in_.checkpoint_bytes_per_gpu * in_.gpus;
  total_tokens_ = s_.train_tokens > 0 ? s_.train_tokens : static_cast<double>(s_.train_steps) * in_.tokens_per_step;
  up_.assign(static_cast<std::size_t>(in_.dp), 1);
  in_job_.assign(static_cast<std::size_t>(in_.dp), 1);
  active_dp_ = in_.dp;
  spares_free_ = s_.elasticity.policy == ElasticPolicy::hot_spare ? s_.elasticity.spare_nodes : 0;
  slow_.assign(static_cast<std::size_t>(nodes), 0);
  const auto n_slow = static_cast<int>(std::lround(s_.stragglers.slow_node_fraction * nodes));
  if (n_slow > 0) {
    // n_slow distinct nodes: a partial Fisher-Yates shuffle with keyed draws.
    std::vector<int> perm(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) perm[static_cast<std::size_t>(i)] = i;
    for (int i = 0; i < n_slow; ++i) {
      const double u = draw(s_.monte_carlo.seed, rep_, kSlowInit, static_cast<std::uint64_t>(i));
      const int j = i + std::min(nodes - i - 1, static_cast<int>(u * (nodes - i)));
      std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
      slow_[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])] = 1;
    }
  }
  active_slow_ = n_slow;
  for (int c = 0; c < kFailureCauses; ++c) {
    units_[c] = units(s_.causes[static_cast<std::size_t>(c)]);
    set_failure(c, next_interarrival(c));
  }
  find_first_failure();
  set_onset(next_onset());
  scheduled_ = s_.failures;
  std::stable_sort(scheduled_.begin(), scheduled_.end(),
                   [](const ScheduledFailure& a, const ScheduledFailure& b) { return a.at_s < b.at_s; });

  const StepSplit& full = split({.dp = in_.dp, .slow_gpus = 0, .background_write = false});
  r_.step_s = full.step_s;
  enter_train();
  start_period();

  std::uint64_t picks = 0;
  std::int64_t events = 0;
  while (phase_ != Phase::done) {
    if (t_ > kMaxJobTimeS || ++events > kMaxJobEvents) {
      throw std::invalid_argument(
          "job: no end in sight after " + std::to_string(events) + " events and " + std::to_string(t_ / kDay) +
          " days with " + std::to_string(tokens_ / total_tokens_ * 100) + "% of the tokens done and " +
          std::to_string(r_.interruptions) +
          " interruptions: failures come faster than the job recovers and checkpoints (expected a job that ends "
          "within " +
          std::to_string(kMaxJobTimeS / kDay / 365) + " years)");
    }
    if (phase_ == Phase::train && pending_planned_) {
      pending_planned_ = false;
      stop_and_save(StopReason::planned);
    }
    if (onset_rem_ < kInf && healthy_nodes() != onset_units_) {
      // The healthy nodes changed (an onset, a failure's replacement, an eviction, a resize):
      // the exposure left is what it was less what the old count used up.
      const double used = onset_units_ * (t_ - onset_t_) / kDay;
      set_onset(std::max(0.0, onset_rem_ - used));
    }
    // The next event of each kind.
    const int fail_cause = first_fail_;
    const double t_fail = fail_cause >= 0 ? std::max(t_, fail_at_[fail_cause]) : kInf;
    const double t_sched = next_sched_ < scheduled_.size() ? std::max(t_, scheduled_[next_sched_].at_s) : kInf;
    const double t_repair = repairs_.empty() ? kInf : std::max(t_, repairs_.top().at_s);
    const double t_onset = std::max(t_, onset_at_);
    // The next clock hour while training with a diurnal factor (the factor changes there).
    const double t_hour =
        phase_ == Phase::train && s_.stragglers.diurnal_amplitude > 0 ? (std::floor(t_ / 3600) + 1) * 3600 : kInf;
    enum class Milestone { none, checkpoint, end, evict } milestone = Milestone::none;
    double t_phase = phase_end_;
    if (phase_ == Phase::train) {
      const StepSplit& sp = split(config());
      const double wall = wall_s(sp, hour_factor());  // a step's wall time this hour
      t_phase = kInf;
      const double to_end = (total_tokens_ - tokens_) / sp.tokens;
      const double to_ck = ck_target_ - since_ck_;
      if (to_end <= to_ck) {
        t_phase = t_ + std::max(0.0, to_end) * wall;
        milestone = Milestone::end;
      } else {
        t_phase = t_ + std::max(0.0, to_ck) * wall;
        milestone = Milestone::checkpoint;
      }
      if (s_.stragglers.evict_after_slow_steps > 0 && active_slow_ > 0 && !pending_evict_) {
        const double to_evict = static_cast<double>(s_.stragglers.evict_after_slow_steps) - slow_steps_;
        const double te = t_ + std::max(0.0, to_evict) * wall;
        if (te < t_phase) {
          t_phase = te;
          milestone = Milestone::evict;
        }
      }
    }
    const double t_restorable = in_flight_ ? restorable_at_ : kInf;
    const double t_bg = bg_ ? bg_end_ : kInf;
    // The earliest; ties: the background write, the phase, repairs, scheduled, slow-node onset,
    // the clock hour, then random failures.
    double t_next = std::min({t_restorable, t_bg, t_phase, t_repair, t_sched, t_onset, t_hour, t_fail});
    if (t_next == kInf) throw std::logic_error("job engine: no next event");
    advance(t_next);
    if (t_restorable == t_next) {
      commit(acc_rs_);
      acc_rs_ = {};
      r_tokens_ = s_tokens_;
      r_steps_ = s_steps_;
      in_flight_ = false;
      restorable_at_ = kInf;
      continue;
    }
    if (t_bg == t_next) {
      emit(JobEventKind::checkpoint_write, bg_start_, t_);
      bg_ = false;
      bg_end_ = kInf;
      if (phase_ == Phase::stall && stall_ == Stall::wait_background) end_stall();
      continue;
    }
    if (t_phase == t_next) {
      if (phase_ == Phase::train) {
        if (milestone == Milestone::end) {
          tokens_ = total_tokens_;
          commit(acc_rs_);
          commit(acc_s_);
          phase_ = Phase::done;
          break;
        }
        if (milestone == Milestone::evict) {
          pending_evict_ = true;
          continue;
        }
        since_ck_ = ck_target_;
        begin_checkpoint();
      } else if (phase_ == Phase::stall) {
        end_stall();
      } else {
        next_stage();
      }
      continue;
    }
    if (t_repair == t_next) {
      const Repair rp = repairs_.top();
      repairs_.pop();
      repair(rp);
      continue;
    }
    if (t_sched == t_next) {
      const ScheduledFailure f = scheduled_[next_sched_++];
      const auto cause = static_cast<int>(f.cause);
      int first = f.first_node, count = f.nodes;
      if (count < 0) {
        const FailureScope sc = s_.causes[static_cast<std::size_t>(cause)].scope;
        count = sc == FailureScope::none ? 0 : sc == FailureScope::network_switch ? s_.nodes_per_switch : 1;
        if (sc == FailureScope::network_switch) first = first / s_.nodes_per_switch * s_.nodes_per_switch;
      }
      fail(cause, first, count);
      continue;
    }
    if (t_onset == t_next) {
      slow_onset();
      continue;
    }
    if (t_hour == t_next) continue;  // training goes on at the new hour's factor
    // A random failure: its nodes among those in the job.
    const auto c = static_cast<std::size_t>(fail_cause);
    set_failure(fail_cause, next_interarrival(fail_cause));
    find_first_failure();
    const FailureScope sc = s_.causes[c].scope;
    int first = 0, count = 0;
    if (sc != FailureScope::none) {
      const double u = draw(s_.monte_carlo.seed, rep_, kNodePick, picks);
      const double u2 = draw(s_.monte_carlo.seed, rep_, kNodeInReplica, picks);
      ++picks;
      const int k = std::min(active_dp_ - 1, static_cast<int>(u * active_dp_));
      int replica = 0;
      for (int r = 0, seen = 0; r < in_.dp; ++r) {
        if (!in_job_[static_cast<std::size_t>(r)]) continue;
        if (seen++ == k) {
          replica = r;
          break;
        }
      }
      const int gpu =
          replica * gpus_per_replica_ + std::min(gpus_per_replica_ - 1, static_cast<int>(u2 * gpus_per_replica_));
      const int node = gpu / in_.gpus_per_node;
      if (sc == FailureScope::network_switch) {
        first = node / s_.nodes_per_switch * s_.nodes_per_switch;
        count = s_.nodes_per_switch;
      } else {
        first = node;
        count = 1;
      }
    }
    fail(fail_cause, first, count);
  }

  r_.time_to_train_s = t_;
  r_.steps = static_cast<std::int64_t>(std::llround(steps_));
  r_.ettr = t_ > 0 ? r_.productive_s / t_ : 1;
  r_.checkpoint_overhead_fraction = t_ > 0 ? r_.lost.checkpoint_s / t_ : 0;
  return std::move(r_);
}

}  // namespace

double JobStepCache::step(const JobConfiguration& c) {
  for (const auto& [k, v] : steps_) {
    if (k == c) return v;
  }
  const double v = fn(c);
  if (!(v > 0) || !std::isfinite(v)) {
    throw std::invalid_argument("job: the step time for dp " + std::to_string(c.dp) + ", slow_gpus " +
                                std::to_string(c.slow_gpus) + (c.background_write ? ", background write" : "") +
                                " is " + std::to_string(v) + " s; expected a finite time > 0");
  }
  steps_.emplace_back(c, v);
  return v;
}

const StepSplit* JobStepCache::split(const JobConfiguration& c) const {
  for (const auto& [k, v] : splits_) {
    if (k == c) return v.get();
  }
  return nullptr;
}

const StepSplit& JobStepCache::put_split(const JobConfiguration& c, const StepSplit& s) {
  splits_.emplace_back(c, std::make_unique<StepSplit>(s));
  return *splits_.back().second;
}

void check_job_inputs(const JobSpec& spec, const JobInputs& in) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("job: " + what); };
  if (in.gpus_per_node <= 0) bad("gpus_per_node must be >= 1");
  if (in.gpus <= 0 || in.gpus % in.gpus_per_node != 0) bad("gpus must be a positive multiple of gpus_per_node");
  if (in.dp <= 0 || in.gpus % in.dp != 0) bad("dp must divide gpus");
  const int gpr = in.gpus / in.dp;
  if (gpr % in.gpus_per_node != 0 && in.gpus_per_node % gpr != 0) {
    bad("a DP replica (gpus / dp GPUs) must span whole nodes or divide a node");
  }
  if (in.nodes_per_replica > 0 && in.nodes_per_replica * in.gpus_per_node != gpr) {
    bad("nodes_per_replica x gpus_per_node must equal gpus / dp");
  }
  if (!(in.tokens_per_step > 0)) bad("tokens_per_step must be > 0");
  if (!(spec.train_tokens > 0) && spec.train_steps <= 0) bad("give train_tokens or train_steps");
  if (in.checkpoint_bytes_per_gpu < 0) bad("checkpoint_bytes_per_gpu must be >= 0");
  if (in.checkpoint_bytes_per_gpu > 0 && !(in.nic_bytes_per_s_per_node > 0)) {
    bad("nic_bytes_per_s_per_node must be > 0 with checkpoint bytes");
  }
  if (spec.nodes_per_switch <= 0) bad("nodes_per_switch must be >= 1");
  if (spec.elasticity.policy == ElasticPolicy::shrink && spec.elasticity.min_dp > in.dp) {
    bad("elasticity.min_dp must be <= dp");
  }
}

JobResult run_replication(const JobSpec& spec, const JobInputs& in, JobStepCache& cache, int replication) {
  JobRun run(spec, in, cache, replication);
  JobResult r = run.run();
  r.distinct_configurations = cache.calls();
  const double ck_s = [&] {
    const double b = in.checkpoint_bytes_per_gpu;
    const double nic_share = in.nic_bytes_per_s_per_node / in.gpus_per_node;
    const double write =
        storage_transfer_s(b, in.gpus, spec.storage.write_bytes_per_s, spec.storage.per_client_bytes_per_s, nic_share);
    if (spec.checkpoint.mode == CheckpointMode::sync) return write;
    return in.pcie_bytes_per_s_per_gpu > 0 ? b / in.pcie_bytes_per_s_per_gpu : 0.0;
  }();
  r.checkpoint_cost_s = ck_s;
  r.mtbf_s = job_mtbf_s(spec, in);
  r.young_interval_s = std::isfinite(r.mtbf_s) ? young_interval_s(ck_s, r.mtbf_s) : kInf;
  r.daly_interval_s = std::isfinite(r.mtbf_s) ? daly_interval_s(ck_s, r.mtbf_s) : kInf;
  return r;
}

double job_mtbf_s(const JobSpec& spec, const JobInputs& in) {
  double per_s = 0;
  for (int c = 0; c < kFailureCauses; ++c) {
    const FailureCauseSpec& f = spec.causes[static_cast<std::size_t>(c)];
    if (c == static_cast<int>(FailureCause::planned)) continue;
    if (c == static_cast<int>(FailureCause::link_flap) && f.absorbed) continue;
    const double units = f.unit == RateUnit::per_gpu_day    ? in.gpus
                         : f.unit == RateUnit::per_node_day ? in.nodes()
                                                            : 1.0;
    per_s += f.rate * units / kDay;
  }
  return per_s > 0 ? 1 / per_s : kInf;
}

JobResult run_job_replication(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn, int replication) {
  check_job_inputs(spec, in);
  JobStepCache cache{step_fn};
  return run_replication(spec, in, cache, replication);
}

JobResult run_job_replication_per_step(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn,
                                       int replication) {
  check_job_inputs(spec, in);
  JobStepCache cache(step_fn, true);
  return run_replication(spec, in, cache, replication);
}

JobResult run_job(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn) {
  return run_job_replication(spec, in, step_fn, 0);
}

}  // namespace ctwin
