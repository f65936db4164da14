// A scenario's whole training job (/job, docs/jobs.md): its inputs from the simulated step (the
// layout, the memory model's checkpoint bytes, the cluster's NICs and PCIe), a step time per
// configuration from the training simulation (app/job_step_model.hpp), the job engine's run
// (workloads/job.hpp), and the report: a table, the --json "job" object, the --trace timeline.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "sim/trace.hpp"
#include "workloads/job.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// One configuration the engine asked about and its simulated step time, in the order asked.
struct JobStepRecord {
  JobConfiguration config;
  double step_s = 0;
};

struct JobReport {
  JobInputs inputs;
  JobMonteCarloResult mc;  // mc.mean holds replication 0's timeline (and the means of counts and times)
  std::vector<JobStepRecord> steps;
  double background_nic_fraction = 1;  // of each NIC left to training beside a background write
  int shrink_floor_dp = 1;             // shrink_memory_floor_dp: the fewest replicas that fit
  std::string shrink_floor_why;        // what the next fewer would need
};

// With the shrink policy: the fewest data-parallel replicas whose shrunk layout still fits the
// GPUs' memory (ZeRO's shards grow as replicas leave), 1 when every count down to min_dp fits or
// the full layout itself does not; `why` says what one replica fewer would need.
int shrink_memory_floor_dp(const Scenario& sc, const TrainingResult& r, std::string* why);

// The engine's inputs from the scenario and its simulated step `r`: GPUs, nodes, DP replicas and
// nodes per replica from the layout, tokens and samples per step, checkpoint bytes per GPU from
// the memory model, NIC bandwidth per node and PCIe per GPU from the cluster.
JobInputs job_inputs(const Scenario& sc, const TrainingResult& r);

// Of each NIC's bandwidth, what is left to training while a checkpoint's background write runs
// (async: every rank's storage stream; in_memory: the peer copy): the writer takes its demand over
// the node's NIC bandwidth, at most half (two flows sharing a link by max-min fairness).
double background_nic_fraction(const JobSpec& spec, const JobInputs& in);

// Runs the scenario's /job: every configuration's step re-simulated once. progress hears
// (replications done, total). Throws InputError naming /job when the engine refuses the inputs.
JobReport run_scenario_job(const Scenario& sc, const TrainingResult& r,
                           const std::function<void(int, int)>& progress = {});

nlohmann::ordered_json job_report_json(const Scenario& sc, const JobReport& j);
std::string job_report_text(const Scenario& sc, const JobReport& j);

// The longest job a trace can hold: int64 picoseconds (2^63 ps, about 106.75 days).
inline constexpr double kTraceMaxSeconds = 9223372.036854775;

// The job-level timeline (lanes: training, checkpoints, failures, detection, restarts, elastic
// resizes; a counter of data-parallel replicas) of replication 0, and, when step is given, the
// step's trace shifted to the first training segment's start (zoom in there to see one step).
// Throws InputError naming --trace when the job is longer than kTraceMaxSeconds.
Trace job_trace(const Scenario& sc, const JobReport& j, const Trace* step);

}  // namespace ctwin
