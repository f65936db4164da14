// The job engine's time-varying stragglers: the diurnal step-time factor (Llama 3, 2024,
// sec. 3.3.4: "diurnal 1-2% throughput variation") against hand sums of its hourly values, and
// slow nodes that appear during the run against the binomial law of independent exponential
// onsets and hand-timed deterministic limits.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tolerance.hpp"
#include "workloads/job.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

// No random failures, no checkpoints within the job, a free restart path: the wall time is the
// steps' time alone.
JobSpec plain_spec() {
  JobSpec s;
  for (auto& c : s.causes) c.rate = 0;
  s.checkpoint.interval_steps = 1'000'000'000;
  s.checkpoint.mode = CheckpointMode::sync;
  s.elasticity.policy = ElasticPolicy::wait;
  s.monte_carlo.search_points = 0;
  s.detection.watchdog_s = 0;
  s.restart = {.reschedule_with_spare_s = 0,
               .reschedule_without_spare_s = 100,
               .repair_s = 1e9,
               .container_start_s = 0,
               .nccl_init_base_s = 0,
               .nccl_init_per_rank_s = 0};
  return s;
}

// `nodes` nodes of 8 GPUs, one DP replica per node, nothing to checkpoint.
JobInputs nodes_inputs(int nodes) {
  JobInputs in;
  in.gpus = 8 * nodes;
  in.gpus_per_node = 8;
  in.dp = nodes;
  in.nodes_per_replica = 1;
  in.tokens_per_step = 1000;
  in.checkpoint_bytes_per_gpu = 0;
  in.nic_bytes_per_s_per_node = 100e9;
  in.pcie_bytes_per_s_per_gpu = 20e9;
  return in;
}

double hundred_s(const JobConfiguration&) { return 100.0; }

// The hourly factor written out independently: hour h's midpoint h + 0.5 (hours after midnight).
double hour_factor(double a, double peak, int h) {
  return 1 + a * (1 + std::cos(2 * kPi * ((h % 24) + 0.5 - peak) / 24)) / 2;
}

void check_accounting(const JobResult& r) {
  CHECK(r.productive_s + r.lost.total() == rel_approx(r.time_to_train_s, 1e-12));
}

// Instants (failure, resize, eviction, slow_node) aside and background writes beside, the
// timeline's events follow each other end to end from 0 to the time to train.
void check_tiles(const JobResult& r) {
  double end = 0;
  for (const JobEvent& e : r.timeline) {
    if (e.kind == JobEventKind::failure || e.kind == JobEventKind::resize || e.kind == JobEventKind::eviction ||
        e.kind == JobEventKind::slow_node) {
      CHECK(e.start_s == e.end_s);
      continue;
    }
    if (e.kind == JobEventKind::checkpoint_write) continue;
    CHECK(e.start_s == rel_approx(end, 1e-12));
    end = e.end_s;
  }
  CHECK(end == rel_approx(r.time_to_train_s, 1e-12));
}

}  // namespace

TEST_CASE("diurnal factor: 1 + A at the peak hour, 1 twelve hours later, 1 + A/2 six hours away, period 24 h") {
  JobStragglers s;
  s.diurnal_amplitude = 0.02;
  s.diurnal_peak_hour = 14.5;                                               // the midpoint of hour 14 (14:00 to 15:00)
  CHECK(diurnal_factor(s, 14 * 3600.0) == rel_approx(1.02, 1e-15));         // cos 0 = 1
  CHECK(diurnal_factor(s, 15 * 3600.0 - 1e-3) == rel_approx(1.02, 1e-15));  // still hour 14
  CHECK(diurnal_factor(s, 2 * 3600.0 + 1800) == rel_approx(1.0, 1e-15));    // 2.5 h: cos(-pi) = -1
  CHECK(diurnal_factor(s, 8 * 3600.0) == rel_approx(1.01, 1e-15));          // 8.5 h: cos(-pi/2) = 0
  CHECK(diurnal_factor(s, 20 * 3600.0) == rel_approx(1.01, 1e-15));         // 20.5 h: cos(pi/2) = 0
  CHECK(diurnal_factor(s, 86400.0 * 3 + 14 * 3600.0) == rel_approx(1.02, 1e-15));  // day 4, same hour
  // The default peak (15:00) falls between midpoints: hours 14 and 15 share the top value,
  // 1 + A (1 + cos(pi / 24)) / 2.
  s.diurnal_peak_hour = 15;
  const double top = 1 + 0.02 * (1 + std::cos(kPi / 24)) / 2;
  CHECK(diurnal_factor(s, 14 * 3600.0 + 10) == rel_approx(top, 1e-15));
  CHECK(diurnal_factor(s, 15 * 3600.0 + 10) == rel_approx(top, 1e-15));
  // The mean of the 24 hourly values is 1 + A/2: cos over 24 equally spaced points sums to 0.
  double sum = 0;
  for (int h = 0; h < 24; ++h) sum += diurnal_factor(s, h * 3600.0 + 1);
  CHECK(sum / 24 == rel_approx(1.01, 1e-14));
  s.diurnal_amplitude = 0;
  CHECK(diurnal_factor(s, 14 * 3600.0) == 1);
}

TEST_CASE("diurnal: a job of exactly k days takes k days; steps per hour are 3600 / (step x f_h)") {
  // 100 s steps: hour h runs 36 / f_h steps. A job of the steps of two whole days ends at exactly
  // 2 x 86400 s; its time per step is the step times the harmonic mean of f, which is within
  // A^2/4 of the arithmetic mean 1 + A/2 (f in [1, 1 + A]: their ratio is 1 + var/mean^2 <= 1 + A^2/4).
  const double a = 0.02, peak = 15;
  double steps_per_day = 0;
  for (int h = 0; h < 24; ++h) steps_per_day += 3600 / (100 * hour_factor(a, peak, h));
  JobSpec s = plain_spec();
  s.stragglers.diurnal_amplitude = a;
  s.stragglers.diurnal_peak_hour = peak;
  s.train_tokens = 2 * steps_per_day * 1000;
  const JobResult r = run_job(s, nodes_inputs(2), hundred_s);
  const double steps = 2 * steps_per_day;
  CHECK(r.time_to_train_s == rel_approx(2 * 86400, 1e-9));
  CHECK(r.productive_s == rel_approx(steps * 100, 1e-9));
  // The extra time is the straggler bucket.
  CHECK(r.lost.straggler_s == rel_approx(2 * 86400 - steps * 100, 1e-6));
  CHECK(r.time_to_train_s / (steps * 100) == rel_approx(1 + a / 2, a * a / 4));
  check_accounting(r);
  check_tiles(r);
}

TEST_CASE("diurnal: a job shorter than a day, from midnight, takes the hand sum of its hours") {
  // 100 steps of 100 s at A = 0.1, peak 15:00: hours 0 and 1 run 36/f_0 + 36/f_1 steps, the rest
  // run in hour 2 at 100 f_2 s each.
  const double a = 0.1, peak = 15;
  const double f0 = hour_factor(a, peak, 0), f1 = hour_factor(a, peak, 1), f2 = hour_factor(a, peak, 2);
  const double rest = 100 - 36 / f0 - 36 / f1;
  REQUIRE(rest * 100 * f2 < 3600);  // ends within hour 2
  const double expected = 7200 + rest * 100 * f2;
  JobSpec s = plain_spec();
  s.train_steps = 100;
  s.stragglers.diurnal_amplitude = a;
  s.stragglers.diurnal_peak_hour = peak;
  const JobResult r = run_job(s, nodes_inputs(2), hundred_s);
  CHECK(r.time_to_train_s == rel_approx(expected, 1e-12));
  CHECK(r.productive_s == rel_approx(10000, 1e-12));
  CHECK(r.lost.straggler_s == rel_approx(expected - 10000, 1e-9));
  CHECK(r.steps == 100);
  check_accounting(r);
  // The peak at 01:30 instead (hours 0 to 2 near it): slower.
  s.stragglers.diurnal_peak_hour = 1.5;
  CHECK(run_job(s, nodes_inputs(2), hundred_s).time_to_train_s > expected + 100);
}

TEST_CASE("diurnal: checkpoints come after interval_steps steps of slowed time, the first at 18 x 100 s x f_0") {
  JobSpec s = plain_spec();
  JobInputs in = nodes_inputs(2);
  in.checkpoint_bytes_per_gpu = 1e9;  // 0.2 s a sync checkpoint (1 GB at 5 GB/s per client)
  s.train_steps = 200;
  s.checkpoint.interval_steps = 18;
  s.stragglers.diurnal_amplitude = 0.1;
  const JobResult r = run_job(s, in, hundred_s);
  const double f0 = hour_factor(0.1, 15, 0);
  const JobEvent* first = nullptr;
  for (const JobEvent& e : r.timeline) {
    if (e.kind == JobEventKind::checkpoint) {
      first = &e;
      break;
    }
  }
  REQUIRE(first != nullptr);
  CHECK(first->start_s == rel_approx(1800 * f0, 1e-12));
  CHECK(first->end_s - first->start_s == rel_approx(0.2, 1e-9));
  CHECK(r.checkpoints == 11);  // after steps 18, 36, ..., 198
  CHECK(r.lost.checkpoint_s == rel_approx(11 * 0.2, 1e-9));
  check_accounting(r);
  check_tiles(r);
}

TEST_CASE("diurnal: a failure rolls the slowed steps back into lost work; the books still balance") {
  JobSpec s = plain_spec();
  JobInputs in = nodes_inputs(2);
  in.checkpoint_bytes_per_gpu = 1e9;
  s.train_steps = 200;
  s.checkpoint.interval_steps = 18;
  s.stragglers.diurnal_amplitude = 0.1;
  s.causes[static_cast<int>(FailureCause::software)].detected_by = DetectedBy::immediate;
  // Checkpoint 1 ends at 1800 f_0 + 0.2 s; the failure 1000 s later loses those 1000 s.
  const double f0 = hour_factor(0.1, 15, 0);
  s.failures.push_back({.at_s = 1800 * f0 + 0.2 + 1000, .cause = FailureCause::software});
  const JobResult r = run_job(s, in, hundred_s);
  CHECK(r.lost.lost_work_s == rel_approx(1000, 1e-9));
  CHECK(r.interruptions == 1);
  check_accounting(r);
  check_tiles(r);
}

TEST_CASE("diurnal amplitude 0 gives the engine's results without diurnal variation, whatever the peak hour") {
  JobSpec s = plain_spec();
  JobInputs in = nodes_inputs(2);
  in.checkpoint_bytes_per_gpu = 1e9;
  s.train_steps = 5000;
  s.checkpoint.interval_steps = 100;
  s.causes = default_failure_causes();
  s.causes[static_cast<int>(FailureCause::software)].rate = 0.5;  // some failures in 5.8 days
  const JobResult base = run_job(s, in, hundred_s);
  s.stragglers.diurnal_peak_hour = 3;
  s.stragglers.diurnal_amplitude = 0;
  const JobResult r = run_job(s, in, hundred_s);
  CHECK(r.time_to_train_s == base.time_to_train_s);
  CHECK(r.lost.straggler_s == base.lost.straggler_s);
  CHECK(r.interruptions == base.interruptions);
  CHECK(r.timeline.size() == base.timeline.size());
  CHECK(base.interruptions > 0);
}

TEST_CASE("slow-node onset: nodes turned slow by time T follow Binomial(N, 1 - exp(-r T)), about r N T") {
  // 16 nodes, r = 0.1 per healthy node-day, 10 days (8,640 steps of 100 s; slowdown 1, so the
  // time is exactly 10 days whatever turns slow). Each node turns slow after its own Exp(r) time
  // (a Poisson process over the healthy nodes picking one of them uniformly is that): the count
  // is Binomial(16, p = 1 - e^-1); r N T = 16 is its first-order limit (r T << 1), not used at rT = 1.
  JobSpec s = plain_spec();
  s.train_steps = 8640;
  s.stragglers.slow_onset_per_node_day = 0.1;
  const JobInputs in = nodes_inputs(16);
  const StepTimeFn step = straggler_step_fn(hundred_s, 1.0);
  const int reps = 200;
  double sum = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const JobResult r = run_job_replication(s, in, step, rep);
    CHECK(r.time_to_train_s == rel_approx(864000, 1e-12));
    sum += static_cast<double>(r.slow_onsets);
  }
  const double p = 1 - std::exp(-1.0);
  const double mean = 16 * p;                                    // 10.11
  const double sd_of_mean = std::sqrt(16 * p * (1 - p) / reps);  // 0.136
  const double seen = sum / reps;
  CAPTURE(seen);
  CHECK(seen == abs_approx(mean, 4 * sd_of_mean));  // nodes
  // At r T = 0.01 the first-order r N T = 0.16 holds to 1%; 2,000 replications: sd of mean 0.009.
  s.stragglers.slow_onset_per_node_day = 0.001;
  double small = 0;
  const int many = 2000;
  for (int rep = 0; rep < many; ++rep) {
    small += static_cast<double>(run_job_replication(s, in, step, rep).slow_onsets);
  }
  const double small_mean = small / many;
  CAPTURE(small_mean);
  CHECK(small_mean == abs_approx(0.16, 4 * std::sqrt(0.16 / many)));  // Poisson sd; nodes
}

TEST_CASE("slow-node onset at a very high rate: the whole job runs at the slow step time") {
  // 4 nodes at 1e6 per node-day: the first node turns slow after ~0.02 s, all four within a
  // fraction of a second; 100 steps then take 3 s each (2 s x slowdown 1.5).
  JobSpec s = plain_spec();
  s.train_steps = 100;
  s.stragglers.slow_onset_per_node_day = 1e6;
  const JobResult r = run_job(s, nodes_inputs(4), straggler_step_fn([](const JobConfiguration&) { return 2.0; }, 1.5));
  CHECK(r.time_to_train_s == abs_approx(300, 0.1));  // seconds: the healthy start is < 0.3 s
  CHECK(r.lost.straggler_s == abs_approx(100, 0.1));
  CHECK(r.slow_onsets == 4);
  int instants = 0;
  for (const JobEvent& e : r.timeline) instants += e.kind == JobEventKind::slow_node ? 1 : 0;
  CHECK(instants == 4);
  check_accounting(r);
  check_tiles(r);
}

TEST_CASE("slow-node onset: lemon eviction replaces onset nodes at the checkpoint after evict_after_slow_steps") {
  // As above, with a checkpoint every 10 steps (nothing to write: free) and eviction after 5 slow
  // steps: each checkpoint at steps 10 .. 90 evicts the four slow nodes (a 100 s wait for
  // replacements), which turn slow again during the wait: 9 evictions, 100 steps at 3 s.
  JobSpec s = plain_spec();
  s.train_steps = 100;
  s.checkpoint.interval_steps = 10;
  s.stragglers.slow_onset_per_node_day = 1e6;
  s.stragglers.evict_after_slow_steps = 5;
  const JobResult r = run_job(s, nodes_inputs(4), straggler_step_fn([](const JobConfiguration&) { return 2.0; }, 1.5));
  CHECK(r.evictions == 9);
  CHECK(r.interruptions == 0);
  CHECK(r.lost.reschedule_s == rel_approx(900, 1e-12));
  CHECK(r.time_to_train_s == abs_approx(300 + 900, 0.1));  // seconds
  CHECK(r.slow_onsets == 4 * 10);
  check_accounting(r);
  check_tiles(r);
  // A rate of 0 evicts nothing and runs healthy.
  s.stragglers.slow_onset_per_node_day = 0;
  const JobResult h = run_job(s, nodes_inputs(4), straggler_step_fn([](const JobConfiguration&) { return 2.0; }, 1.5));
  CHECK(h.evictions == 0);
  CHECK(h.time_to_train_s == rel_approx(200, 1e-12));
}

TEST_CASE("slow-node onset draws its own random stream: with slowdown 1 the failures are those without it") {
  JobSpec s = plain_spec();
  s.causes = default_failure_causes();
  s.causes[static_cast<int>(FailureCause::host)].rate = 0.2;  // per node-day: 0.8 a day on 4 nodes, ~10 days
  s.train_steps = 8640;
  s.checkpoint.interval_steps = 36;
  const JobInputs in = nodes_inputs(4);
  const StepTimeFn step = straggler_step_fn(hundred_s, 1.0);
  const JobResult base = run_job_replication(s, in, step, 5);
  s.stragglers.slow_onset_per_node_day = 0.3;
  const JobResult r = run_job_replication(s, in, step, 5);
  CHECK(base.interruptions > 3);
  CHECK(r.slow_onsets > 0);
  CHECK(r.interruptions == base.interruptions);
  CHECK(r.interruptions_by_cause == base.interruptions_by_cause);
  CHECK(r.time_to_train_s == rel_approx(base.time_to_train_s, 1e-12));
  // Deterministic per seed and replication.
  const JobResult again = run_job_replication(s, in, step, 5);
  CHECK(again.slow_onsets == r.slow_onsets);
  CHECK(again.time_to_train_s == r.time_to_train_s);
  check_tiles(run_job(s, in, step));
}

TEST_CASE("diurnal: the factor slows the step, not the data stall (a loader without prefetch)") {
  // 2 nodes, 64 samples per step (32 a node), 4 workers at 0.5 s a sample: 8 samples/s a node,
  // 4 s to load a batch; without prefetch a step takes 100 f_0 + 4 s. 10 steps end in hour 0.
  JobSpec s = plain_spec();
  s.train_steps = 10;
  s.data_loader.workers = 4;
  s.data_loader.decode_s_per_sample = 0.5;
  s.data_loader.prefetch_batches = 0;
  s.stragglers.diurnal_amplitude = 0.1;
  JobInputs in = nodes_inputs(2);
  in.samples_per_step = 64;
  const double f0 = hour_factor(0.1, 15, 0);
  const JobResult r = run_job(s, in, hundred_s);
  CHECK(r.time_to_train_s == rel_approx(10 * (100 * f0 + 4), 1e-12));
  CHECK(r.lost.data_stall_s == rel_approx(40, 1e-12));
  CHECK(r.lost.straggler_s == rel_approx(1000 * (f0 - 1), 1e-9));
  check_accounting(r);
}

TEST_CASE("diurnal and slow-node onset: the per-step baseline gives the segment engine's answer") {
  JobSpec s = plain_spec();
  JobInputs in = nodes_inputs(2);
  in.checkpoint_bytes_per_gpu = 1e9;
  s.checkpoint.mode = CheckpointMode::async;
  s.checkpoint.interval_steps = 50;
  s.causes[static_cast<int>(FailureCause::gpu)].rate = 0.5;
  s.train_steps = 3000;  // 3.5 days of 100 s steps
  s.stragglers.diurnal_amplitude = 0.02;
  s.stragglers.slow_onset_per_node_day = 0.5;
  s.stragglers.evict_after_slow_steps = 200;
  const StepTimeFn step =
      straggler_step_fn([](const JobConfiguration& c) { return c.background_write ? 110.0 : 100.0; }, 1.2);
  const JobResult a = run_job_replication(s, in, step, 2);
  const JobResult b = run_job_replication_per_step(s, in, step, 2);
  CHECK(a.slow_onsets > 0);
  CHECK(a.interruptions > 0);
  CHECK(b.time_to_train_s == rel_approx(a.time_to_train_s, 1e-9));
  CHECK(b.lost.straggler_s == rel_approx(a.lost.straggler_s, 1e-9));
  CHECK(b.slow_onsets == a.slow_onsets);
  check_accounting(a);
  check_tiles(a);
}

TEST_CASE("diurnal and onset across policies, modes and replica sizes: every second accounted, the timeline tiled") {
  // 3 policies x 3 checkpoint modes x 2 replica sizes (2 nodes; half a node), random failures,
  // initial and onset slow nodes, eviction, a data loader: productive + lost = time to train.
  const ElasticPolicy policies[] = {ElasticPolicy::wait, ElasticPolicy::hot_spare, ElasticPolicy::shrink};
  const CheckpointMode modes[] = {CheckpointMode::sync, CheckpointMode::async, CheckpointMode::in_memory};
  int runs = 0;
  for (const ElasticPolicy p : policies) {
    for (const CheckpointMode m : modes) {
      for (const int gpus_per_replica : {16, 4}) {
        JobSpec s = plain_spec();
        s.causes = default_failure_causes();
        s.causes[static_cast<int>(FailureCause::gpu)].rate = 0.05;  // per GPU-day: ~3 a day on 64 GPUs
        s.elasticity.policy = p;
        s.elasticity.spare_nodes = 2;
        s.restart.repair_s = 7200;
        s.checkpoint.mode = m;
        s.checkpoint.interval_steps = 0;
        s.checkpoint.interval_s = 1800;
        s.train_steps = 4000;  // ~5 days
        s.stragglers.slow_node_fraction = 0.125;
        s.stragglers.slow_onset_per_node_day = 0.2;
        s.stragglers.evict_after_slow_steps = 300;
        s.stragglers.diurnal_amplitude = 0.02;
        s.data_loader.workers = 4;
        s.data_loader.decode_s_per_sample = 0.5;
        JobInputs in = nodes_inputs(8);
        in.dp = in.gpus / gpus_per_replica;
        in.nodes_per_replica = gpus_per_replica / 8;
        in.checkpoint_bytes_per_gpu = 1e9;
        in.samples_per_step = 4096;
        const JobResult r =
            run_job(s, in, straggler_step_fn([](const JobConfiguration& c) { return 8.0 * 100 / c.dp; }, 1.3));
        CAPTURE(runs);
        check_accounting(r);
        check_tiles(r);
        CHECK(r.slow_onsets > 0);
        ++runs;
      }
    }
  }
  CHECK(runs == 18);
}
