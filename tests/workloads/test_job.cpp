// The job engine against hand-worked cases: each test sets up a job small enough to time by hand
// (a closed-form step time, round storage numbers) and compares every second the engine
// reports with the sum worked out in the comment beside it.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "tolerance.hpp"
#include "workloads/job.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

// A job with no random failures, sync checkpoints every 10 steps, 100 steps of 2 s, 16 GPUs in
// 2 nodes of 8, 1 GB per GPU to checkpoint.
// Storage: a rank writes at min(per client 5 GB/s, NIC share 100/8 = 12.5 GB/s) = 5 GB/s:
// 1 GB / 5 GB/s = 0.2 s; the aggregate 16 GB / 2 TB/s = 0.008 s is not the limit: C = 0.2 s.
JobSpec quiet_spec() {
  JobSpec s;
  for (auto& c : s.causes) c.rate = 0;
  s.train_steps = 100;
  s.checkpoint.interval_steps = 10;
  s.checkpoint.mode = CheckpointMode::sync;
  s.elasticity.policy = ElasticPolicy::hot_spare;
  s.elasticity.spare_nodes = 1;
  s.monte_carlo.search_points = 0;
  // The restart path, set here so the cases do not follow the defaults: watchdog 30 s, a spare
  // in 120 s, container 60 s, NCCL init 5 s + 2 ms per rank.
  s.detection.watchdog_s = 30;
  s.restart = {.reschedule_with_spare_s = 120,
               .reschedule_without_spare_s = 3600,
               .repair_s = 86400,
               .container_start_s = 60,
               .nccl_init_base_s = 5,
               .nccl_init_per_rank_s = 2e-3};
  return s;
}

JobInputs small_inputs() {
  JobInputs in;
  in.gpus = 16;
  in.gpus_per_node = 8;
  in.dp = 2;
  in.nodes_per_replica = 1;
  in.tokens_per_step = 1000;
  in.checkpoint_bytes_per_gpu = 1e9;
  in.nic_bytes_per_s_per_node = 100e9;
  in.pcie_bytes_per_s_per_gpu = 20e9;
  in.samples_per_step = 64;
  return in;
}

double constant_step(const JobConfiguration& c) { return c.background_write ? 2.2 : 2.0; }

// Productive time plus every bucket of lost time is the time to train.
void check_accounting(const JobResult& r) {
  CHECK(r.productive_s + r.lost.total() == rel_approx(r.time_to_train_s, 1e-12));
  CHECK(r.ettr == rel_approx(r.productive_s / r.time_to_train_s, 1e-12));
}

}  // namespace

TEST_CASE("no failures: time to train = steps x step time + (checkpoints before the last step) x checkpoint cost") {
  const JobResult r = run_job(quiet_spec(), small_inputs(), constant_step);
  // Checkpoints after steps 10, 20, ..., 90 (none at the end): 9 x 0.2 s.
  CHECK(r.time_to_train_s == rel_approx(100 * 2.0 + 9 * 0.2, 1e-12));
  CHECK(r.productive_s == rel_approx(200, 1e-12));
  CHECK(r.lost.checkpoint_s == rel_approx(1.8, 1e-12));
  CHECK(r.checkpoints == 9);
  CHECK(r.steps == 100);
  CHECK(r.interruptions == 0);
  CHECK(r.checkpoint_overhead_fraction == rel_approx(1.8 / 201.8, 1e-12));
  check_accounting(r);
}

TEST_CASE("one scheduled failure: lost = work since the last checkpoint + detection + reschedule + restart + load") {
  JobSpec s = quiet_spec();
  // Checkpoint 2 ends at 2 x 20.2 = 40.4 s; a GPU fails at 50.5 s, in step 26.
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu});
  const JobResult r = run_job(s, small_inputs(), constant_step);
  const double lost_work = 50.5 - 40.4;
  const double detect = 30;                     // watchdog_s (a GPU fault is seen by the watchdog)
  const double resched = 120;                   // a hot spare is free
  const double restart = 60 + (5 + 2e-3 * 16);  // container start + NCCL init for 16 ranks
  const double load = 0.2;                      // the read mirrors the write: 1 GB at 5 GB/s per rank
  CHECK(r.lost.lost_work_s == rel_approx(lost_work, 1e-12));
  CHECK(r.lost.detection_s == rel_approx(detect, 1e-12));
  CHECK(r.lost.reschedule_s == rel_approx(resched, 1e-12));
  CHECK(r.lost.restart_s == rel_approx(restart, 1e-12));
  CHECK(r.lost.load_s == rel_approx(load, 1e-12));
  // Resumed at step 20: checkpoints 30 .. 90 again, 9 in all.
  CHECK(r.time_to_train_s == rel_approx(201.8 + lost_work + detect + resched + restart + load, 1e-12));
  CHECK(r.interruptions == 1);
  CHECK(r.interruptions_by_cause[static_cast<int>(FailureCause::gpu)] == 1);
  CHECK(r.lost_by_cause_s[static_cast<int>(FailureCause::gpu)] ==
        rel_approx(lost_work + detect + resched + restart + load, 1e-12));
  check_accounting(r);
}

TEST_CASE("detection: nccl timeout, heartbeat interval x misses, watchdog, immediate") {
  JobDetection d;
  d.nccl_timeout_s = 600;
  d.heartbeat_interval_s = 10;
  d.heartbeat_misses = 3;
  d.watchdog_s = 30;
  CHECK(d.seconds(DetectedBy::nccl_timeout) == 600);
  CHECK(d.seconds(DetectedBy::heartbeat) == 30);
  CHECK(d.seconds(DetectedBy::watchdog) == 30);
  CHECK(d.seconds(DetectedBy::immediate) == 0);
  // A host failure (heartbeat) with 20 s x 2 misses: 40 s to know.
  JobSpec s = quiet_spec();
  s.detection.heartbeat_interval_s = 20;
  s.detection.heartbeat_misses = 2;
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::host});
  CHECK(run_job(s, small_inputs(), constant_step).lost.detection_s == rel_approx(40, 1e-12));
}

TEST_CASE("without a free spare a lost node waits reschedule_without_spare_s; the repaired node refills the pool") {
  JobSpec s = quiet_spec();
  s.elasticity.spare_nodes = 1;
  s.train_steps = 10000;     // 20,000 s: both failures while training
  s.restart.repair_s = 1e6;  // never back within the job
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu});
  s.failures.push_back({.at_s = 5000, .cause = FailureCause::gpu});
  const JobResult r = run_job(s, small_inputs(), constant_step);
  CHECK(r.lost.reschedule_s == rel_approx(120 + 3600, 1e-12));
  s.restart.repair_s = 1000;  // back to the pool before the second failure
  CHECK(run_job(s, small_inputs(), constant_step).lost.reschedule_s == rel_approx(120 + 120, 1e-12));
  s.elasticity.policy = ElasticPolicy::wait;
  CHECK(run_job(s, small_inputs(), constant_step).lost.reschedule_s == rel_approx(3600 + 3600, 1e-12));
}

TEST_CASE("a switch failure takes nodes_per_switch nodes: spares for all of them, or a shrink by their replicas") {
  JobSpec s = quiet_spec();
  JobInputs in = small_inputs();
  in.gpus = 64;  // 8 nodes, one replica each
  in.dp = 8;
  s.nodes_per_switch = 4;
  s.elasticity.spare_nodes = 3;  // one short of the switch's 4 nodes
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::network_switch, .first_node = 5});
  const JobResult r = run_job(s, in, constant_step);
  CHECK(r.lost.reschedule_s == rel_approx(3600, 1e-12));
  REQUIRE(r.timeline.size() > 0);
  int failure_nodes = -1;
  for (const JobEvent& e : r.timeline) {
    if (e.kind == JobEventKind::failure) failure_nodes = e.nodes;
  }
  CHECK(failure_nodes == 4);
  s.elasticity.spare_nodes = 4;
  CHECK(run_job(s, in, constant_step).lost.reschedule_s == rel_approx(120, 1e-12));
  // Shrink: the switch's nodes 4..7 hold replicas 4..7, so the job goes on at dp 4.
  s.elasticity.policy = ElasticPolicy::shrink;
  s.restart.repair_s = 1e9;
  std::set<int> dps;
  const JobResult sh = run_job(s, in, [&](const JobConfiguration& c) {
    dps.insert(c.dp);
    return 2.0 * 8 / c.dp;  // the global batch kept: the step takes longer on fewer replicas
  });
  CHECK(dps == std::set<int>{4, 8});
  CHECK(sh.resizes == 1);
  CHECK(sh.lost.reschedule_s == 0);
}

TEST_CASE("shrink runs at step_fn(dp - 1): global batch kept costs step time, shrunk batch costs steps") {
  JobSpec s = quiet_spec();
  JobInputs in = small_inputs();
  in.gpus = 32;  // 4 nodes, 4 replicas
  in.dp = 4;
  in.checkpoint_bytes_per_gpu = 0;  // free checkpoints and loads
  s.elasticity.policy = ElasticPolicy::shrink;
  s.restart = {.reschedule_with_spare_s = 0,
               .reschedule_without_spare_s = 0,
               .repair_s = 1e9,
               .container_start_s = 0,
               .nccl_init_base_s = 0,
               .nccl_init_per_rank_s = 0};
  s.causes[static_cast<int>(FailureCause::gpu)].detected_by = DetectedBy::immediate;
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu, .first_node = 0});
  SUBCASE("keep_global_batch: 80 steps left at step_fn(dp 3) = 2.5 s") {
    const JobResult r = run_job(s, in, [](const JobConfiguration& c) { return c.dp == 4 ? 2.0 : 2.5; });
    // The failure at 50.5 s rolls back to step 20 (40 s): 10.5 s lost; 80 steps x 2.5 s follow.
    CHECK(r.time_to_train_s == rel_approx(50.5 + 80 * 2.5, 1e-12));
    CHECK(r.lost.lost_work_s == rel_approx(10.5, 1e-12));
    CHECK(r.lost.elastic_s == rel_approx(80 * 0.5, 1e-12));
    CHECK(r.steps == 100);
    check_accounting(r);
  }
  SUBCASE("global batch shrunk: 3/4 of the tokens per step, so 80 x 4/3 steps at 2 s") {
    s.elasticity.keep_global_batch = false;
    const JobResult r = run_job(s, in, [](const JobConfiguration&) { return 2.0; });
    const double steps_left = 80.0 * 4 / 3;
    CHECK(r.time_to_train_s == rel_approx(50.5 + steps_left * 2, 1e-12));
    CHECK(r.lost.elastic_s == rel_approx(steps_left * 2 - 80 * 2, 1e-12));
    CHECK(r.steps == std::llround(20 + steps_left));
    check_accounting(r);
  }
}

TEST_CASE("a shrunk job's repaired replica rejoins at its next checkpoint") {
  JobSpec s = quiet_spec();
  JobInputs in = small_inputs();
  in.gpus = 32;
  in.dp = 4;
  in.checkpoint_bytes_per_gpu = 0;
  s.elasticity.policy = ElasticPolicy::shrink;
  s.restart = {.reschedule_with_spare_s = 0,
               .reschedule_without_spare_s = 0,
               .repair_s = 30,
               .container_start_s = 7,
               .nccl_init_base_s = 0,
               .nccl_init_per_rank_s = 0};
  s.causes[static_cast<int>(FailureCause::gpu)].detected_by = DetectedBy::immediate;
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu});
  const JobResult r = run_job(s, in, [](const JobConfiguration& c) { return c.dp == 4 ? 2.0 : 2.5; });
  // 50.5: fail, restart 7 s at dp 3 from step 20 (57.5); repaired at 80.5; the checkpoint at
  // step 30 (57.5 + 25 = 82.5) becomes a stop: restart 7 s at dp 4 (89.5); 70 steps x 2 s.
  CHECK(r.resizes == 2);
  CHECK(r.time_to_train_s == rel_approx(89.5 + 70 * 2, 1e-12));
  CHECK(r.lost.restart_s == rel_approx(14, 1e-12));
  check_accounting(r);
}

TEST_CASE("async checkpoints stall for the host copy only; steps during the background write run at its step time") {
  JobSpec s = quiet_spec();
  s.checkpoint.mode = CheckpointMode::async;
  const JobResult r = run_job(s, small_inputs(), constant_step);
  // Host copy: 1 GB / 20 GB/s = 0.05 s. The write (0.2 s) runs beside steps of 2.2 s instead of
  // 2 s: 0.2 s of wall time makes 0.2 / 2.2 steps, 0.2 x (1 - 2 / 2.2) s later than without it.
  const double per_checkpoint = 0.05 + 0.2 * (1 - 2.0 / 2.2);
  CHECK(r.lost.checkpoint_s == rel_approx(9 * per_checkpoint, 1e-12));
  CHECK(r.time_to_train_s == rel_approx(200 + 9 * per_checkpoint, 1e-12));
  check_accounting(r);
}

TEST_CASE("async: a checkpoint due before the background write ends waits for it") {
  JobSpec s = quiet_spec();
  s.train_steps = 10;
  s.checkpoint.mode = CheckpointMode::async;
  s.checkpoint.interval_steps = 1;
  s.storage.per_client_bytes_per_s = 0.2e9;  // a write takes 1 GB / 0.2 GB/s = 5 s
  const JobResult r = run_job(s, small_inputs(), [](const JobConfiguration&) { return 2.0; });
  // Checkpoint 1 (after step 1): copy to 2.05, write to 7.05; step 2 ends at 4.05 and waits
  // 3 s, copies to 7.10; so each of checkpoints 2..9 takes 5.05 s per step; then step 10.
  CHECK(r.time_to_train_s == rel_approx(2.05 + 8 * 5.05 + 2, 1e-12));
  CHECK(r.lost.checkpoint_s == rel_approx(0.05 + 8 * 3.05, 1e-12));
  check_accounting(r);
}

TEST_CASE("async: a failure during the background write rolls back to the previous checkpoint") {
  JobSpec s = quiet_spec();
  s.checkpoint.mode = CheckpointMode::async;
  s.storage.per_client_bytes_per_s = 0.2e9;  // 5 s writes
  s.causes[static_cast<int>(FailureCause::gpu)].detected_by = DetectedBy::immediate;
  // Checkpoint 1's copy ends at 20.05, its write at 25.05; checkpoint 2's copy ends at
  // 20.05 + 20 + 0.05 = 40.1; a failure at 42 falls in its write: back to step 10 (20.05 s).
  s.failures.push_back({.at_s = 42, .cause = FailureCause::gpu});
  const JobResult r = run_job(s, small_inputs(), [](const JobConfiguration&) { return 2.0; });
  // Lost: the training from 20.05 to 42 less checkpoint 2's copy (0.05 s, a checkpoint stall).
  CHECK(r.lost.lost_work_s == rel_approx(42 - 20.05 - 0.05, 1e-12));
  check_accounting(r);
}

TEST_CASE("in-memory checkpoints: the host copy stalls, the peer copy restores over the NICs") {
  JobSpec s = quiet_spec();
  s.checkpoint.mode = CheckpointMode::in_memory;
  s.causes[static_cast<int>(FailureCause::gpu)].detected_by = DetectedBy::immediate;
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu});
  const JobResult r = run_job(s, small_inputs(), [](const JobConfiguration&) { return 2.0; });
  // A node's 8 GB from its peer over 100 GB/s: 0.08 s (storage would take 0.2 s).
  CHECK(r.lost.load_s == rel_approx(0.08, 1e-12));
  // Checkpoint 2's host copy ends at 40.1 and its peer copy (0.08 s) at 40.18: lost 10.4 s.
  CHECK(r.lost.lost_work_s == rel_approx(50.5 - 40.1, 1e-12));
  check_accounting(r);
}

TEST_CASE("a planned stop saves first: no lost work, then restart and load") {
  JobSpec s = quiet_spec();
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::planned});
  const JobResult r = run_job(s, small_inputs(), constant_step);
  CHECK(r.lost.lost_work_s == 0);
  CHECK(r.lost.detection_s == 0);
  CHECK(r.lost.reschedule_s == 0);
  // The stop's save (0.2 s) and the 9 checkpoints of the run; the period restarts at the stop.
  CHECK(r.lost.checkpoint_s == rel_approx(10 * 0.2, 1e-12));
  CHECK(r.time_to_train_s == rel_approx(200 + 10 * 0.2 + 65.032 + 0.2, 1e-12));
  CHECK(r.interruptions_by_cause[static_cast<int>(FailureCause::planned)] == 1);
  check_accounting(r);
}

TEST_CASE("storage contention: 16,384 ranks are limited by the aggregate, 8 ranks by the per-client limit") {
  // 1 GB per rank; aggregate 2 TB/s; per client 5 GB/s; NIC share 50 GB/s / 8 = 6.25 GB/s.
  CHECK(storage_transfer_s(1e9, 16384, 2e12, 5e9, 6.25e9) == rel_approx(16384e9 / 2e12, 1e-12));  // 8.192 s
  CHECK(storage_transfer_s(1e9, 8, 2e12, 5e9, 6.25e9) == rel_approx(1e9 / 5e9, 1e-12));           // 0.2 s
  // A per-client limit above the NIC's share: the NIC share is the limit.
  CHECK(storage_transfer_s(1e9, 8, 2e12, 10e9, 6.25e9) == rel_approx(0.16, 1e-12));
}

TEST_CASE("a checkpoint's ranks share their node's NIC: 8 ranks on a 16 GB/s node write at 2 GB/s each") {
  JobInputs in = small_inputs();
  in.nic_bytes_per_s_per_node = 16e9;
  const JobResult r = run_job(quiet_spec(), in, constant_step);
  // 1 GB at min(5, 16 / 8) GB/s = 0.5 s a checkpoint, 9 of them.
  CHECK(r.lost.checkpoint_s == rel_approx(9 * 0.5, 1e-12));
}

TEST_CASE("the data loader stalls a step by max(0, need / rate - step) in steady state, need / rate without prefetch") {
  JobDataLoader d;
  d.workers = 4;
  d.decode_s_per_sample = 0.5;  // 8 samples/s per node
  CHECK(d.stall_s(32, 2.0) == rel_approx(32.0 / 8 - 2, 1e-12));
  CHECK(d.stall_s(8, 2.0) == 0);
  d.decode_s_per_sample = 0.1;  // 40 samples/s of CPU, but 1 GB/s / 100 MB = 10 samples/s of reads
  d.read_bytes_per_s = 1e9;
  d.bytes_per_sample = 1e8;
  CHECK(d.stall_s(32, 2.0) == rel_approx(3.2 - 2, 1e-12));
  d.prefetch_batches = 0;
  CHECK(d.stall_s(32, 2.0) == rel_approx(3.2, 1e-12));
  // In a job: 64 samples per step over 2 nodes (4 replicas of 4 GPUs, two a node) at 8
  // samples/s: 32 per node, 4 s per step.
  JobSpec s = quiet_spec();
  s.checkpoint.interval_steps = 1000;
  s.data_loader.workers = 4;
  s.data_loader.decode_s_per_sample = 0.5;
  JobInputs in = small_inputs();
  in.dp = 4;
  in.nodes_per_replica = 0;
  const JobResult r = run_job(s, in, [](const JobConfiguration&) { return 2.0; });
  CHECK(r.time_to_train_s == rel_approx(100 * 4.0, 1e-12));
  CHECK(r.lost.data_stall_s == rel_approx(100 * 2.0, 1e-12));
  check_accounting(r);
}

TEST_CASE("stragglers slow every step; lemon eviction replaces the slow node at the next checkpoint") {
  JobSpec s = quiet_spec();
  JobInputs in = small_inputs();
  in.gpus = 32;  // 4 nodes: a quarter of them is 1 slow node
  in.dp = 4;
  in.checkpoint_bytes_per_gpu = 0;
  s.elasticity.policy = ElasticPolicy::wait;
  s.restart = {.reschedule_with_spare_s = 0,
               .reschedule_without_spare_s = 100,
               .repair_s = 1e9,
               .container_start_s = 0,
               .nccl_init_base_s = 0,
               .nccl_init_per_rank_s = 0};
  s.stragglers.slow_node_fraction = 0.25;
  s.stragglers.slowdown = 1.5;
  int calls = 0;
  const StepTimeFn step = straggler_step_fn(
      [&](const JobConfiguration&) {
        ++calls;
        return 2.0;
      },
      1.5);
  SUBCASE("without eviction: every step at 3 s") {
    const JobResult r = run_job(s, in, step);
    CHECK(r.time_to_train_s == rel_approx(300, 1e-12));
    CHECK(r.lost.straggler_s == rel_approx(100, 1e-12));
    check_accounting(r);
  }
  SUBCASE("evicted after 5 slow steps, at the checkpoint after step 10") {
    s.stragglers.evict_after_slow_steps = 5;
    // A software failure later (no node lost, free restart) must not bring the lemon back.
    s.causes[static_cast<int>(FailureCause::software)].detected_by = DetectedBy::immediate;
    s.failures.push_back({.at_s = 151, .cause = FailureCause::software});
    const JobResult r = run_job(s, in, step);
    // 10 steps x 3 s, the eviction's replacement 100 s, 90 steps x 2 s; the failure at 151 s
    // loses the 1 s since the checkpoint after step 20 (150 s).
    CHECK(r.time_to_train_s == rel_approx(30 + 100 + 180 + 1, 1e-12));
    CHECK(r.lost.straggler_s == rel_approx(10, 1e-12));
    CHECK(r.lost.reschedule_s == rel_approx(100, 1e-12));
    CHECK(r.evictions == 1);
    CHECK(r.interruptions == 1);
    check_accounting(r);
  }
}

TEST_CASE("step_fn is called once per distinct configuration over all replications") {
  JobSpec s = quiet_spec();
  JobInputs in = small_inputs();
  in.gpus = 64;
  in.dp = 8;
  s.train_steps = 20000;
  s.checkpoint.mode = CheckpointMode::async;
  s.elasticity.policy = ElasticPolicy::shrink;
  s.restart.repair_s = 3600;
  s.stragglers.slow_node_fraction = 0.25;
  s.causes[static_cast<int>(FailureCause::gpu)].rate = 0.05;  // per GPU-day: ~3 failures a day
  s.monte_carlo.replications = 8;
  int calls = 0;
  std::set<std::tuple<int, int, bool>> seen;
  const JobMonteCarloResult mc = run_job_monte_carlo(s, in, [&](const JobConfiguration& c) {
    ++calls;
    seen.insert({c.dp, c.slow_gpus, c.background_write});
    return 2.0 * 8 / c.dp * (c.slow_gpus > 0 ? 1.3 : 1) * (c.background_write ? 1.1 : 1);
  });
  CHECK(static_cast<std::size_t>(calls) == seen.size());
  CHECK(mc.mean.distinct_configurations == seen.size());
  CHECK(seen.size() > 3);  // shrunk sizes, slow GPUs and background writes all occurred
}

TEST_CASE("the per-step baseline gives the segment engine's answer") {
  JobSpec s = quiet_spec();
  s.checkpoint.mode = CheckpointMode::async;
  s.causes[static_cast<int>(FailureCause::gpu)].rate = 0.5;
  s.train_steps = 2000;
  int per_step_calls = 0;
  const JobResult a = run_job_replication(s, small_inputs(), constant_step, 3);
  const JobResult b = run_job_replication_per_step(
      s, small_inputs(),
      [&](const JobConfiguration& c) {
        ++per_step_calls;
        return constant_step(c);
      },
      3);
  CHECK(b.time_to_train_s == rel_approx(a.time_to_train_s, 1e-9));
  CHECK(b.interruptions == a.interruptions);
  CHECK(per_step_calls >= 2000);
}

TEST_CASE("Young's interval is sqrt(2 C M); Daly's adds his higher-order terms") {
  // C = 60 s, M = 3 h: Young sqrt(2 x 60 x 10800) = 1138.42 s.
  CHECK(young_interval_s(60, 10800) == rel_approx(std::sqrt(2.0 * 60 * 10800), 1e-12));
  // Daly: x = C / 2M = 1/360; sqrt(2CM) (1 + sqrt(x) / 3 + x / 9) - C.
  const double x = 60.0 / 21600;
  CHECK(daly_interval_s(60, 10800) ==
        rel_approx(std::sqrt(2.0 * 60 * 10800) * (1 + std::sqrt(x) / 3 + x / 9) - 60, 1e-12));
  CHECK(daly_interval_s(30000, 10800) == 10800);  // C >= 2M: M
}

TEST_CASE("the default rates give Llama 3's 419 unexpected interruptions in 54 days on 16,384 GPUs") {
  // The Llama 3 Herd of Models (2024), Table 5: MTBF = 54 days / 419 at the full job.
  JobSpec s;
  JobInputs in;
  in.gpus = 16384;
  in.gpus_per_node = 8;
  in.dp = 128;
  in.nodes_per_replica = 16;
  in.tokens_per_step = 16e6;
  s.train_steps = 10;
  const JobResult r = run_job(s, in, [](const JobConfiguration&) { return 1.0; });
  CHECK(r.mtbf_s == rel_approx(54.0 * 86400 / 419, 1e-12));
}

TEST_CASE("runs are deterministic for a seed and differ across seeds") {
  JobSpec s = quiet_spec();
  s.causes = default_failure_causes();
  s.train_steps = 200000;
  JobInputs in = small_inputs();
  const JobResult a = run_job(s, in, constant_step);
  const JobResult b = run_job(s, in, constant_step);
  CHECK(a.time_to_train_s == b.time_to_train_s);
  CHECK(a.timeline.size() == b.timeline.size());
  s.monte_carlo.seed = 2;
  CHECK(run_job(s, in, constant_step).time_to_train_s != a.time_to_train_s);
}

TEST_CASE("bad inputs are rejected") {
  JobInputs in = small_inputs();
  in.dp = 3;
  CHECK_THROWS_AS(run_job(quiet_spec(), in, constant_step), std::invalid_argument);
  in = small_inputs();
  in.nodes_per_replica = 2;
  CHECK_THROWS_AS(run_job(quiet_spec(), in, constant_step), std::invalid_argument);
  CHECK_THROWS_AS(run_job(quiet_spec(), small_inputs(), [](const JobConfiguration&) { return 0.0; }),
                  std::invalid_argument);
}

TEST_CASE("Daly's interval reproduces his three worked examples (delta 5 min; M 24 h, 6 h, 15 min)") {
  // Daly (FGCS 2006), Figs. 3 to 5: 117, 57 and 9.1 min, printed to the minute (the last to a
  // tenth): compared within half the printed last digit.
  CHECK(daly_interval_s(300, 24 * 3600) / 60 == abs_approx(117, 0.5));  // minutes
  CHECK(daly_interval_s(300, 6 * 3600) / 60 == abs_approx(57, 0.5));
  CHECK(daly_interval_s(300, 15 * 60) / 60 == abs_approx(9.1, 0.05));
}

TEST_CASE("the timeline tiles the job: training, stalls and recovery stages end to end, the failure an instant") {
  JobSpec s = quiet_spec();
  s.checkpoint.mode = CheckpointMode::async;
  s.failures.push_back({.at_s = 50.5, .cause = FailureCause::gpu, .first_node = 1});
  s.failures.push_back({.at_s = 100, .cause = FailureCause::host});  // during the first one's reschedule
  const JobResult r = run_job(s, small_inputs(), constant_step);
  double end = 0;
  std::vector<JobEventKind> recovery;
  for (const JobEvent& e : r.timeline) {
    if (e.kind == JobEventKind::failure || e.kind == JobEventKind::resize || e.kind == JobEventKind::eviction) {
      CHECK(e.start_s == e.end_s);
      continue;
    }
    if (e.kind == JobEventKind::checkpoint_write) continue;  // in the background, beside training
    CHECK(e.start_s == rel_approx(end, 1e-12));
    end = e.end_s;
    if (e.kind != JobEventKind::train && e.kind != JobEventKind::checkpoint) recovery.push_back(e.kind);
  }
  CHECK(end == rel_approx(r.time_to_train_s, 1e-12));
  // The first recovery cut in its reschedule by the second failure, which recovers in full.
  const std::vector<JobEventKind> expected = {JobEventKind::detection, JobEventKind::reschedule,
                                              JobEventKind::detection, JobEventKind::reschedule,
                                              JobEventKind::restart,   JobEventKind::load};
  CHECK(recovery == expected);
  CHECK(r.interruptions == 2);
  // Train segments name the step they start at: after the load, the job resumes at step 20.
  std::int64_t resumed_at = -1;
  bool loaded = false;
  for (const JobEvent& e : r.timeline) {
    if (e.kind == JobEventKind::load) loaded = true;
    if (loaded && e.kind == JobEventKind::train) {
      resumed_at = e.step;
      break;
    }
  }
  CHECK(resumed_at == 20);
}

TEST_CASE("a job whose failures outpace its recovery is an error, not an endless loop") {
  // A restart of 11.6 days against a failure every 12 h (1 per node-day on 2 nodes): a restart
  // ends with probability exp(-23).
  JobSpec s = quiet_spec();
  s.causes[static_cast<int>(FailureCause::software)].rate = 1;
  s.restart.container_start_s = 1e6;
  s.failures.push_back({.at_s = 50, .cause = FailureCause::software});  // the first restart
  CHECK_THROWS_WITH_AS(run_job(s, small_inputs(), constant_step), doctest::Contains("no end in sight"),
                       std::invalid_argument);
}
