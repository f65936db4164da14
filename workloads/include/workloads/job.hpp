// A whole training job over days (issue 19): failures by component, detection, the restart path,
// checkpoints (sync, async, in-memory to peer nodes), storage contention, elasticity, stragglers
// and the input pipeline, as a discrete-event run of the job's segments.
//
// Time: job time is double seconds throughout (a job may run past int64 picoseconds' ~106 days;
// a double keeps 1e-9 s resolution past 4,000 days). The engine never steps one training step at
// a time: between two events (a failure, a checkpoint, a background write ending, a repair, an
// eviction, a node turning slow, a clock hour under diurnal variation, the end) the step time is
// constant, so a segment's progress is computed in closed form. The step time comes from the
// caller (StepTimeFn), asked once per distinct JobConfiguration and cached.
//
// Failures: each cause is a renewal process in exposure (GPU-days, node-days or job-days, by the
// cause's rate unit): its n-th failure comes when the job's allocated units have accumulated the
// n-th drawn interarrival, so a shrunk job fails proportionally less. Interarrivals are
// exponential, or Weibull with the same mean (shape 1 is the exponential, draw for draw). Every
// draw is keyed by (seed, replication, cause, index) (sim/random.hpp), so runs are reproducible
// and the checkpoint-interval search uses common random numbers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/names.hpp"

namespace ctwin {

// Llama 3's Table 5 root-cause categories (The Llama 3 Herd of Models, 2024), grouped.
enum class FailureCause : std::uint8_t {
  gpu,             // faulty GPU, SRAM, GPU system processor, thermal, silent data corruption
  hbm,             // GPU HBM3 memory
  nvlink,          // NVLink / NVSwitch
  nic,             // network interface card
  host,            // host maintenance, CPU, DRAM, SSD, power supply, chassis, IO board
  network_switch,  // a network switch or cable (scope switch: takes nodes_per_switch nodes)
  link_flap,       // a link flapping; absorbed by NCCL's retries (a slowdown) unless absorbed = false
  storage,         // the shared storage service
  software,        // software bugs, dependencies, NCCL watchdog timeouts
  user,            // user errors (bad config, code pushed to the run)
  planned,         // planned: firmware upgrades, config or dataset updates (a checkpoint first, no lost work)
};
inline constexpr int kFailureCauses = 11;
inline constexpr auto failure_cause_names = make_names<FailureCause>({{FailureCause::gpu, "gpu"},
                                                                      {FailureCause::hbm, "hbm"},
                                                                      {FailureCause::nvlink, "nvlink"},
                                                                      {FailureCause::nic, "nic"},
                                                                      {FailureCause::host, "host"},
                                                                      {FailureCause::network_switch, "switch"},
                                                                      {FailureCause::link_flap, "link_flap"},
                                                                      {FailureCause::storage, "storage"},
                                                                      {FailureCause::software, "software"},
                                                                      {FailureCause::user, "user"},
                                                                      {FailureCause::planned, "planned"}});

// What a cause's rate is counted per: a GPU-day, a node-day (of the job's allocated GPUs or
// nodes), or a day of the job whatever its size.
enum class RateUnit : std::uint8_t { per_gpu_day, per_node_day, per_job_day };
inline constexpr auto rate_unit_names = make_names<RateUnit>({{RateUnit::per_gpu_day, "per_gpu_day"},
                                                              {RateUnit::per_node_day, "per_node_day"},
                                                              {RateUnit::per_job_day, "per_job_day"}});

enum class FailureDistribution : std::uint8_t { exponential, weibull };
inline constexpr auto failure_distribution_names = make_names<FailureDistribution>(
    {{FailureDistribution::exponential, "exponential"}, {FailureDistribution::weibull, "weibull"}});

// What a failure takes away: gpu and node take the node (a GPU is replaced with its node),
// switch takes the nodes_per_switch nodes under one leaf switch, none takes no node (the job's
// processes restart in place: software, user, planned).
enum class FailureScope : std::uint8_t { gpu, node, network_switch, none };
inline constexpr auto failure_scope_names = make_names<FailureScope>({{FailureScope::gpu, "gpu"},
                                                                      {FailureScope::node, "node"},
                                                                      {FailureScope::network_switch, "switch"},
                                                                      {FailureScope::none, "none"}});

// How the job learns of a fault: its collectives hang until the NCCL timeout; the node stops
// answering heartbeats (interval x misses); a watchdog sees the error (Xid, ECC) after watchdog_s;
// or at once (the process exits with an error; a planned stop).
enum class DetectedBy : std::uint8_t { nccl_timeout, heartbeat, watchdog, immediate };
inline constexpr auto detected_by_names = make_names<DetectedBy>({{DetectedBy::nccl_timeout, "nccl_timeout"},
                                                                  {DetectedBy::heartbeat, "heartbeat"},
                                                                  {DetectedBy::watchdog, "watchdog"},
                                                                  {DetectedBy::immediate, "immediate"}});

struct FailureCauseSpec {
  double rate = 0;  // failures per unit per day (0: the cause never fires at random)
  RateUnit unit = RateUnit::per_node_day;
  FailureDistribution distribution = FailureDistribution::exponential;
  double weibull_shape = 1;  // with weibull: < 1 infant mortality, > 1 wear-out
  FailureScope scope = FailureScope::node;
  DetectedBy detected_by = DetectedBy::watchdog;
  // link_flap only: NCCL's retries absorb it (training stalls retry_s, no interruption); false:
  // an interruption like any other.
  bool absorbed = false;
  double retry_s = 0;
};

// The defaults: Llama 3 405B's 54-day snapshot (419 unexpected + 47 planned interruptions on
// 16,384 H100 in 2,048 nodes; Table 5) as rates per GPU-day (GPU causes) or node-day, with each
// cause's scope and detection. Indexed by FailureCause.
std::array<FailureCauseSpec, kFailureCauses> default_failure_causes();

// A failure at a given wall time. nodes < 0: the cause's scope decides (1 node, nodes_per_switch,
// or none); nodes >= 0: that many nodes from first_node on (node ids 0 .. nodes - 1, a DP replica
// being nodes_per_replica consecutive ids).
struct ScheduledFailure {
  double at_s = 0;
  FailureCause cause = FailureCause::gpu;
  int nodes = -1;
  int first_node = 0;
};

struct JobDetection {
  double nccl_timeout_s = 600;  // PyTorch ProcessGroupNCCL's default timeout (10 min)
  double heartbeat_interval_s = 10;
  int heartbeat_misses = 3;
  double watchdog_s = 30;
  // The time from a fault detected by `by` to the job knowing.
  double seconds(DetectedBy by) const;
};

struct JobRestart {
  double reschedule_with_spare_s = 120;      // swap in a hot spare node
  double reschedule_without_spare_s = 3600;  // get a replacement node from the cluster scheduler
  double repair_s = 86400;                   // a failed node back in service (spare pool, shrink rejoin)
  double container_start_s = 60;             // container and processes up, imports
  double nccl_init_base_s = 5;               // NCCL communicator init: base + per_rank x ranks
  double nccl_init_per_rank_s = 1.5e-3;      // ~30 s at 16,384 ranks (MegaScale: < 30 s at > 10,000 GPUs)
  double nccl_init_s(int ranks) const { return nccl_init_base_s + nccl_init_per_rank_s * ranks; }
};

enum class CheckpointMode : std::uint8_t { sync, async, in_memory };
inline constexpr auto checkpoint_mode_names = make_names<CheckpointMode>(
    {{CheckpointMode::sync, "sync"}, {CheckpointMode::async, "async"}, {CheckpointMode::in_memory, "in_memory"}});

// sync: training stops while every rank writes its shard to storage.
// async: training stops for the device-to-host copy over PCIe; the storage write runs in the
//   background (steps at step_fn(background_write = true)); a checkpoint due before the write
//   ends waits for it. The checkpoint is restorable once written.
// in_memory (Gemini, SOSP'23): the device-to-host copy, then each node sends its shards to a
//   peer node's CPU memory over the NICs in the background; every storage_every-th checkpoint
//   is also written to storage in the background. A failure restores from the peer copy (a
//   peer on another leaf switch: one failure event never takes both), loaded over the NICs.
struct JobCheckpoint {
  std::int64_t interval_steps = 0;  // > 0: every this many steps
  double interval_s = 3600;         // with interval_steps 0: every ceil(interval_s / step time) steps
  CheckpointMode mode = CheckpointMode::sync;
  int storage_every = 10;  // in_memory: every k-th checkpoint also goes to storage
};

// The checkpoint store, shared by all ranks: a write (or read) of `bytes_per_rank` from `ranks`
// ranks takes max(bytes_per_rank / min(per_client, nic_share), ranks x bytes_per_rank / aggregate),
// nic_share being the node's NIC bandwidth over its GPUs.
struct JobStorage {
  double write_bytes_per_s = 2e12;  // aggregate
  double read_bytes_per_s = 2e12;
  double per_client_bytes_per_s = 5e9;  // one rank's stream
};
double storage_transfer_s(double bytes_per_rank, int ranks, double aggregate_bytes_per_s, double per_client_bytes_per_s,
                          double nic_share_bytes_per_s);

// wait: a lost node waits reschedule_without_spare_s for a replacement.
// hot_spare: a lost node is swapped for one of spare_nodes in reschedule_with_spare_s (without
//   one free: as wait); the failed node rejoins the spare pool repair_s later.
// shrink: the job restarts at once with the DP replicas that hold no lost node (dp' >= min_dp,
//   else it waits for repairs), global batch kept (more accumulation: same tokens per step) or
//   shrunk (tokens per step x dp'/dp); repaired replicas rejoin at the next checkpoint (a restart
//   without lost work).
enum class ElasticPolicy : std::uint8_t { wait, hot_spare, shrink };
inline constexpr auto elastic_policy_names = make_names<ElasticPolicy>(
    {{ElasticPolicy::wait, "wait"}, {ElasticPolicy::hot_spare, "hot_spare"}, {ElasticPolicy::shrink, "shrink"}});

struct JobElasticity {
  ElasticPolicy policy = ElasticPolicy::hot_spare;
  int spare_nodes = 0;
  bool keep_global_batch = true;
  int min_dp = 1;
};

// slow_node_fraction of the nodes (rounded) each hold one slow GPU from the start; while any is
// in the job, steps run at step_fn(slow_gpus = their count). A node lost to a failure is slow
// with probability slow / nodes; replacements are healthy. evict_after_slow_steps > 0: after
// that many steps with a slow GPU, the job evicts the slow nodes at its next checkpoint (a
// restart onto replacements without lost work: lemon-node eviction).
//
// slow_onset_per_node_day > 0: healthy nodes in the job turn slow during the run (one slow GPU
// each), a Poisson process of that rate per healthy node-day over the wall clock (every phase,
// as failures), the node picked uniformly among the healthy ones in the job; from then on they
// count in slow_gpus, are replaced healthy when lost, and are evicted as the initial ones.
//
// diurnal_amplitude A > 0: every step takes f(t) x its step time (the data stall unchanged), with
// f = 1 + A (1 + cos(2 pi (h - diurnal_peak_hour) / 24)) / 2 at h = the clock hour's midpoint
// (piecewise constant per hour; t = 0 is midnight): 1 + A at the peak, 1 twelve hours later, a
// mean of 1 + A / 2 over a day. Llama 3 (2024, sec. 3.3.4) saw 1-2% from mid-day temperatures
// acting on the GPUs' DVFS. The extra (f - 1) x step time goes to lost.straggler_s.
struct JobStragglers {
  double slow_node_fraction = 0;
  double slowdown = 1;  // for the caller's StepTimeFn (straggler_step_fn); the engine does not read it
  std::int64_t evict_after_slow_steps = 0;
  double slow_onset_per_node_day = 0;
  double diurnal_amplitude = 0;   // a fraction of the step time
  double diurnal_peak_hour = 15;  // hours after midnight
};

// The diurnal step-time factor of the clock hour holding t (seconds since the job's start, a
// midnight): 1 + A (1 + cos(2 pi (hour + 1/2 - peak_hour) / 24)) / 2; exactly 1 when A = 0.
double diurnal_factor(const JobStragglers& s, double t_s);

// Per node: `workers` CPU processes decoding samples at decode_s_per_sample each, reading
// bytes_per_sample from storage at read_bytes_per_s, produce min(workers / decode, read / bytes)
// samples per second. A step needs samples_per_step / nodes per node. With prefetch_batches >= 1
// the loader runs ahead and a step stalls max(0, need / rate - step_s); with 0 it loads each
// batch after the step (stall need / rate). workers 0: no input pipeline modelled.
struct JobDataLoader {
  int workers = 0;
  double decode_s_per_sample = 0;
  double read_bytes_per_s = 0;  // 0: not a limit
  double bytes_per_sample = 0;
  int prefetch_batches = 2;
  // Stall per step for a node needing `samples` per step with step time step_s.
  double stall_s(double samples, double step_s) const;
};

struct JobMonteCarlo {
  int replications = 1;
  std::uint64_t seed = 1;
  // The checkpoint-interval search: this many intervals, geometric over [Young / 4, 4 x Young],
  // rounded to whole steps of the full configuration (a step count met twice runs once), each
  // run over search_replications replications with the same draws (0 points: no search).
  int search_points = 9;
  int search_replications = 16;
};

struct JobSpec {
  // What to train: train_tokens > 0, or train_steps > 0 (tokens = steps x tokens per step).
  double train_tokens = 0;
  std::int64_t train_steps = 0;
  std::array<FailureCauseSpec, kFailureCauses> causes = default_failure_causes();
  int nodes_per_switch = 16;  // nodes under one leaf switch (a switch failure takes them)
  std::vector<ScheduledFailure> failures;
  JobDetection detection;
  JobRestart restart;
  JobCheckpoint checkpoint;
  JobStorage storage;
  JobElasticity elasticity;
  JobStragglers stragglers;
  JobDataLoader data_loader;
  JobMonteCarlo monte_carlo;
  // Keep a timeline of events (run_job only; at most max_timeline_events, then it stops adding).
  bool timeline = true;
  std::size_t max_timeline_events = 1'000'000;
};

// From the caller's training setup (the app: layout, memory model, cluster).
struct JobInputs {
  int gpus = 0;
  int gpus_per_node = 8;
  int dp = 1;  // data-parallel replicas; a replica is gpus / dp consecutive GPUs
  // Nodes in one DP replica (TP x PP x CP x EP / gpus_per_node), checked against gpus / dp /
  // gpus_per_node when > 0; 0 for replicas smaller than a node (several replicas per node: a node
  // failure takes each replica with a GPU on it).
  int nodes_per_replica = 0;
  double tokens_per_step = 0;
  double checkpoint_bytes_per_gpu = 0;  // what each rank writes: its shard of weights + optimizer
  double nic_bytes_per_s_per_node = 0;
  double pcie_bytes_per_s_per_gpu = 0;
  double samples_per_step = 0;  // the global batch in samples (data loader)
  int nodes() const { return gpus / gpus_per_node; }
};

// What a step time depends on. dp: the replicas running (inputs.dp unless shrunk); slow_gpus:
// slow GPUs in the job; background_write: an async or in-memory checkpoint's write runs beside
// the step (sharing NICs, PCIe and host memory bandwidth).
struct JobConfiguration {
  int dp = 1;
  int slow_gpus = 0;
  bool background_write = false;
  friend bool operator==(const JobConfiguration&, const JobConfiguration&) = default;
};
// Seconds per step in a configuration. With elasticity.keep_global_batch the caller keeps the
// global batch at a shrunk dp (more accumulation per replica); without it, the batch per
// replica stays and the global batch shrinks.
using StepTimeFn = std::function<double(const JobConfiguration&)>;

// base with slow_gpus treated as a synchronous straggler: base(config with slow_gpus 0) x
// slowdown when slow_gpus > 0 (the slowest GPU gates every step).
StepTimeFn straggler_step_fn(StepTimeFn base, double slowdown);

enum class JobEventKind : std::uint8_t {
  train,             // a training segment (one configuration)
  checkpoint,        // training stalled for a checkpoint (sync write, host copy, waiting for a write)
  checkpoint_write,  // a background write (async, in-memory, its storage copy); training runs
  failure,           // the fault (an instant: start_s = end_s)
  detection,         // fault to the job knowing
  reschedule,        // waiting for replacement nodes (or repairs)
  restart,           // container start and NCCL init
  load,              // loading the checkpoint
  resize,            // an elastic shrink or rejoin (an instant; dp is the new size)
  link_retry,        // an absorbed link flap: NCCL retries
  eviction,          // lemon nodes evicted (an instant)
  data_stall,        // (not emitted per step; the lost_s bucket holds it)
  slow_node,         // a healthy node turned slow (an instant; nodes = 1)
};
inline constexpr auto job_event_kind_names =
    make_names<JobEventKind>({{JobEventKind::train, "train"},
                              {JobEventKind::checkpoint, "checkpoint"},
                              {JobEventKind::checkpoint_write, "checkpoint_write"},
                              {JobEventKind::failure, "failure"},
                              {JobEventKind::detection, "detection"},
                              {JobEventKind::reschedule, "reschedule"},
                              {JobEventKind::restart, "restart"},
                              {JobEventKind::load, "load"},
                              {JobEventKind::resize, "resize"},
                              {JobEventKind::link_retry, "link_retry"},
                              {JobEventKind::eviction, "eviction"},
                              {JobEventKind::data_stall, "data_stall"},
                              {JobEventKind::slow_node, "slow_node"}});

struct JobEvent {
  JobEventKind kind = JobEventKind::train;
  FailureCause cause = FailureCause::gpu;  // failure, detection, reschedule, restart, load: why
  double start_s = 0;
  double end_s = 0;
  int nodes = 0;          // failure: nodes taken; otherwise the nodes in the job
  int dp = 0;             // the job's DP replicas during the event
  std::int64_t step = 0;  // train: the first step's index (0-based, counting re-done steps once more)
};

// Wall time that is not productive, by what it went to. productive + the sum = time to train.
struct JobLostTime {
  double lost_work_s = 0;   // steps run since the last restorable checkpoint, re-done after a failure
  double detection_s = 0;   // fault to the job knowing
  double reschedule_s = 0;  // waiting for nodes (spares, replacements, repairs)
  double restart_s = 0;     // container start, NCCL init
  double load_s = 0;        // checkpoint load
  double checkpoint_s = 0;  // checkpoint stalls + steps slowed by background writes
  double straggler_s = 0;   // steps slowed by slow GPUs and by the diurnal factor
  double link_retry_s = 0;  // absorbed link flaps
  double data_stall_s = 0;  // steps waiting for the input pipeline
  double elastic_s = 0;     // steps slower per token at a shrunk dp than at the full one
  double total() const;
};

struct JobResult {
  double time_to_train_s = 0;
  double productive_s = 0;         // the tokens at the full configuration's step time, nothing else
  double ettr = 0;                 // effective training time ratio: productive / time to train
  std::int64_t steps = 0;          // steps that count (not re-done ones)
  std::int64_t interruptions = 0;  // job restarts from failures (absorbed link flaps not counted)
  std::array<std::int64_t, kFailureCauses> interruptions_by_cause{};
  std::int64_t link_flaps_absorbed = 0;
  std::int64_t evictions = 0;    // lemon evictions (restarts without a failure)
  std::int64_t slow_onsets = 0;  // healthy nodes that turned slow during the run
  std::int64_t checkpoints = 0;  // started
  std::int64_t resizes = 0;      // elastic shrinks and rejoins
  JobLostTime lost;
  // Lost time by failure cause: lost work + detection + reschedule + restart + load of the
  // restarts each cause set off.
  std::array<double, kFailureCauses> lost_by_cause_s{};
  double checkpoint_overhead_fraction = 0;  // lost.checkpoint_s / time to train
  // The checkpoint interval's references for the full configuration: C = one checkpoint's stall
  // (the sync write; async and in_memory: the host copy), M = the job's mean time between the
  // random interruptions that roll back work (planned stops and absorbed flaps left out;
  // infinity when there are none, and then Young and Daly are infinity too).
  double checkpoint_cost_s = 0;
  double mtbf_s = 0;
  double young_interval_s = 0;  // Young 1974: sqrt(2 C M)
  double daly_interval_s = 0;   // Daly 2006, eq. 37 (higher order): see young_daly.cpp
  double step_s = 0;            // the full configuration's step time (no stall, no straggler)
  std::vector<JobEvent> timeline;
  std::size_t distinct_configurations = 0;  // step_fn calls
};

struct JobQuantiles {
  double p10 = 0, p50 = 0, p90 = 0, mean = 0;
};

// Nearest-rank quantile q in (0, 1] of the values (sorted inside).
double job_quantile(std::vector<double> values, double q);

struct JobMonteCarloResult {
  int replications = 0;
  JobQuantiles time_to_train_s;
  JobQuantiles ettr;
  JobQuantiles interruptions;
  // Means over replications of the counts and times (the timeline is replication 0's).
  JobResult mean;
  // The checkpoint-interval search (monte_carlo.search_points > 0): the intervals tried (whole
  // steps x the full configuration's step time), the mean time to train at each, and the best.
  // best_interval_s 0 when no search ran.
  std::vector<double> search_intervals_s;
  std::vector<double> search_time_to_train_s;
  double best_interval_s = 0;
};

// Young's and Daly's intervals (seconds) for a checkpoint cost C and a mean time between
// failures M (seconds). Daly: sqrt(2CM)(1 + sqrt(C/(2M))/3 + C/(18M)) - C for C < 2M, else M.
double young_interval_s(double checkpoint_s, double mtbf_s);
double daly_interval_s(double checkpoint_s, double mtbf_s);

// Throws std::invalid_argument on inputs that cannot run (gpus not a multiple of gpus_per_node,
// dp x nodes_per_replica != nodes, nothing to train, a step time <= 0 or not finite), and on a
// job that never ends (still running after 1e9 s, 31.7 years, or 2e8 events: failures faster
// than it recovers), the message saying how far it got.
// One replication (replication index 0 of the seed), with the timeline.
JobResult run_job(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn);
// Replication r of the seed (0-based), as run_job; the Monte Carlo runs these.
JobResult run_job_replication(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn, int replication);
// The benchmark's baseline: as run_job_replication, but asking step_fn again for every step it
// runs (no cache), as an engine that simulates each step would.
JobResult run_job_replication_per_step(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn,
                                       int replication);
// monte_carlo.replications replications (step_fn called once per distinct configuration over
// all of them), their quantiles, and the interval search. progress (optional) is called with
// (done, total) replications.
JobMonteCarloResult run_job_monte_carlo(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn,
                                        const std::function<void(int, int)>& progress = {});

}  // namespace ctwin
