#include "job_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "job_step_model.hpp"
#include "report_format.hpp"
#include "sim/error.hpp"

namespace ctwin {
namespace {

constexpr double kDay = 86400;

const char* cause_name(int c) { return failure_cause_names.name(static_cast<FailureCause>(c)); }

// The lost-time buckets in report order: JSON key, table label, value.
struct LostRow {
  const char* key;
  const char* label;
  double s;
};
std::vector<LostRow> lost_rows(const JobLostTime& l) {
  return {{"lost_work", "lost work (since the last checkpoint)", l.lost_work_s},
          {"detection", "detection", l.detection_s},
          {"reschedule", "waiting for nodes", l.reschedule_s},
          {"restart", "restart (containers, NCCL init)", l.restart_s},
          {"checkpoint_load", "checkpoint load", l.load_s},
          {"checkpoint", "checkpoint stalls and writes", l.checkpoint_s},
          {"stragglers", "slow GPUs and diurnal heat", l.straggler_s},
          {"link_retry", "link flaps (NCCL retries)", l.link_retry_s},
          {"data_stall", "input pipeline stalls", l.data_stall_s},
          {"elastic", "fewer replicas (elastic)", l.elastic_s}};
}

// The interval the report recommends: the simulated best when the search ran, else Daly's.
double optimal_interval_s(const JobMonteCarloResult& mc) {
  return mc.best_interval_s > 0 ? mc.best_interval_s : mc.mean.daly_interval_s;
}

// A JSON number, or null where the value is not finite (no failures: an infinite MTBF).
nlohmann::ordered_json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nullptr; }

std::string duration(double s) {
  char buf[64];
  if (!std::isfinite(s)) return "none (no random failures)";
  if (s >= 2 * kDay) {
    std::snprintf(buf, sizeof buf, "%.2f days", s / kDay);
  } else if (s >= 7200) {
    std::snprintf(buf, sizeof buf, "%.2f h", s / 3600);
  } else if (s >= 120) {
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  }
  return buf;
}

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * f);
  return buf;
}

}  // namespace

JobInputs job_inputs(const Scenario& sc, const TrainingResult& r) {
  const TrainingJob& job = training_job(sc);
  const TrainingConfig& cfg = job.training;
  const ClusterSpec& c = sc.cluster;
  JobInputs in;
  in.gpus = c.nodes * c.gpus_per_node;
  in.gpus_per_node = c.gpus_per_node;
  in.dp = cfg.parallel.dp;
  const int slice = in.gpus / std::max(1, in.dp);  // one replica's GPUs: TP x PP x CP
  in.nodes_per_replica = slice % c.gpus_per_node == 0 ? slice / c.gpus_per_node : 0;
  in.tokens_per_step = r.tokens_per_step;
  in.samples_per_step = cfg.global_batch;
  in.checkpoint_bytes_per_gpu = checkpoint_bytes_per_gpu(job.model, cfg);
  // The node's NICs (nic_gbyte_per_s is per GPU; GPUs sharing a NIC share its bandwidth) and a
  // GPU's PCIe link (the x16 rate; 32 GB/s where the catalog has none, as topology/network.cpp).
  in.nic_bytes_per_s_per_node = c.nic_gbyte_per_s * 1e9 * std::min(c.gpus_per_node, c.nics());
  in.pcie_bytes_per_s_per_gpu = (c.gpu.pcie_gbyte_per_s > 0 ? c.gpu.pcie_gbyte_per_s : 32) * 1e9;
  return in;
}

double background_nic_fraction(const JobSpec& spec, const JobInputs& in) {
  if (!(in.nic_bytes_per_s_per_node > 0) || !(in.checkpoint_bytes_per_gpu > 0)) return 1;
  double demand = 0;  // the writer's bytes per second per node, over the node's NIC bandwidth
  switch (spec.checkpoint.mode) {
    case CheckpointMode::sync:
      return 1;  // no background write
    case CheckpointMode::async: {
      const double nic_share = in.nic_bytes_per_s_per_node / in.gpus_per_node;
      const double write_s = storage_transfer_s(in.checkpoint_bytes_per_gpu, in.gpus, spec.storage.write_bytes_per_s,
                                                spec.storage.per_client_bytes_per_s, nic_share);
      demand = write_s > 0 ? in.checkpoint_bytes_per_gpu * in.gpus_per_node / write_s / in.nic_bytes_per_s_per_node : 0;
      break;
    }
    case CheckpointMode::in_memory:
      demand = 1;  // the peer copy runs at the NICs' rate (as the engine times it)
      break;
  }
  return 1 - std::min(0.5, demand);
}

int shrink_memory_floor_dp(const Scenario& sc, const TrainingResult& r, std::string* why) {
  const TrainingJob& job = training_job(sc);
  const JobSpec& spec = *job.job;
  const int dp = job.training.parallel.dp;
  if (spec.elasticity.policy != ElasticPolicy::shrink || r.memory.oom) return 1;
  const TrainingOptions opt = training_options(sc);
  // ZeRO's shards grow as replicas leave (and with the batch kept, accumulation changes what a
  // schedule holds): the first replica count down from the full one that no longer fits.
  for (int d = dp - 1; d >= std::max(1, spec.elasticity.min_dp); --d) {
    const StepModelRun run = step_model_run(job.training, sc.cluster, opt,
                                            {.dp = d, .keep_global_batch = spec.elasticity.keep_global_batch});
    const MemoryBreakdown mb = estimate_memory(job.model, run.cfg, r.memory.capacity);
    if (mb.oom) {
      if (why)
        *why = "at DP " + std::to_string(d) + " a GPU needs " + format_gib(mb.peak) + " of " + format_gib(mb.capacity);
      return d + 1;
    }
  }
  return 1;
}

JobReport run_scenario_job(const Scenario& sc, const TrainingResult& r, const std::function<void(int, int)>& progress) {
  const TrainingJob& job = training_job(sc);
  if (!job.job) throw std::logic_error("run_scenario_job: the scenario has no /job");
  JobSpec spec = *job.job;
  JobReport out;
  out.inputs = job_inputs(sc, r);
  out.background_nic_fraction = background_nic_fraction(spec, out.inputs);
  out.shrink_floor_dp = shrink_memory_floor_dp(sc, r, &out.shrink_floor_why);
  if (out.shrink_floor_dp > spec.elasticity.min_dp) {
    // Below the floor the job waits for repairs, as below min_dp: the shrunk layout would not fit.
    spec.elasticity.min_dp = out.shrink_floor_dp;
  }
  const TrainingOptions opt = training_options(sc);
  const double nic_fraction = out.background_nic_fraction;
  std::vector<JobStepRecord>* record = &out.steps;
  // The step with a slow GPU on each stage, per (replicas, background write): simulated once.
  std::map<std::pair<int, bool>, std::vector<double>> slow_stages;
  const StepTimeFn step = [&, nic_fraction, record](const JobConfiguration& c) {
    const StepModelConfig m{.dp = c.dp,
                            .keep_global_batch = spec.elasticity.keep_global_batch,
                            .slow_gpus = c.slow_gpus,
                            .slowdown = spec.stragglers.slowdown,
                            .nic_fraction = c.background_write ? nic_fraction : 1.0};
    // The scenario's own configuration is the step already simulated: the same figure (with
    // /training/noise, the mean of its steps, as simulate_step_s takes for the others).
    const bool full = c.dp == job.training.parallel.dp && c.slow_gpus == 0 && !c.background_write;
    double s = 0;
    if (full) {
      s = mean_step_s(r);
    } else if (c.slow_gpus > 0 && spec.stragglers.slowdown != 1) {
      auto [it, fresh] = slow_stages.try_emplace({c.dp, c.background_write});
      if (fresh) it->second = simulate_slow_stage_steps_s(job.model, job.training, sc.cluster, opt, m);
      s = expected_slowest_step_s(it->second, c.slow_gpus);
    } else {
      s = simulate_step_s(job.model, job.training, sc.cluster, opt, m);  // no slow GPU, or slowdown 1
    }
    record->push_back({c, s});
    return s;
  };
  try {
    out.mc = run_job_monte_carlo(spec, out.inputs, step, progress);
  } catch (const std::invalid_argument& e) {
    throw InputError(sc.file, "/job", e.what(), "a job the engine can run on this layout and cluster");
  }
  return out;
}

nlohmann::ordered_json job_report_json(const Scenario& sc, const JobReport& j) {
  using J = nlohmann::ordered_json;
  const JobSpec& spec = *training_job(sc).job;
  const JobResult& m = j.mc.mean;
  J o;
  o["time_to_train_s"] = m.time_to_train_s;
  o["time_to_train_days"] = m.time_to_train_s / kDay;
  o["productive_s"] = m.productive_s;
  o["effective_training_time_ratio"] = m.ettr;
  o["tokens"] =
      spec.train_tokens > 0 ? spec.train_tokens : static_cast<double>(spec.train_steps) * j.inputs.tokens_per_step;
  o["steps"] = m.steps;
  o["step_s"] = m.step_s;
  o["tokens_per_step"] = j.inputs.tokens_per_step;
  J by_cause = J::object();
  J lost_by_cause = J::object();
  for (int c = 0; c < kFailureCauses; ++c) {
    by_cause[cause_name(c)] = m.interruptions_by_cause[static_cast<std::size_t>(c)];
    lost_by_cause[cause_name(c)] = m.lost_by_cause_s[static_cast<std::size_t>(c)];
  }
  o["interruptions"] = J{{"total", m.interruptions},
                         {"by_cause", by_cause},
                         {"link_flaps_absorbed", m.link_flaps_absorbed},
                         {"evictions", m.evictions}};
  J lost = J::object();
  for (const auto& row : lost_rows(m.lost)) lost[row.key] = row.s;
  lost["total"] = m.lost.total();
  o["lost_s"] = lost;
  o["lost_by_failure_cause_s"] = lost_by_cause;
  o["checkpoint_overhead_fraction"] = m.checkpoint_overhead_fraction;
  o["optimal_checkpoint_interval_s"] = finite_or_null(optimal_interval_s(j.mc));
  J ck;
  ck["mode"] = std::string(checkpoint_mode_names.name(spec.checkpoint.mode));
  ck["checkpoints"] = m.checkpoints;
  ck["bytes_per_gpu"] = j.inputs.checkpoint_bytes_per_gpu;
  ck["bytes_total"] = j.inputs.checkpoint_bytes_per_gpu * j.inputs.gpus;
  ck["cost_s"] = m.checkpoint_cost_s;
  ck["mtbf_s"] = finite_or_null(m.mtbf_s);
  ck["young_interval_s"] = finite_or_null(m.young_interval_s);
  ck["daly_interval_s"] = finite_or_null(m.daly_interval_s);
  ck["simulated_best_interval_s"] = j.mc.best_interval_s > 0 ? J(j.mc.best_interval_s) : J(nullptr);
  J search = J::array();
  for (std::size_t i = 0; i < j.mc.search_intervals_s.size(); ++i) {
    search.push_back(
        J{{"interval_s", j.mc.search_intervals_s[i]}, {"time_to_train_s", j.mc.search_time_to_train_s[i]}});
  }
  ck["search"] = search;
  o["checkpoint"] = ck;
  o["resizes"] = m.resizes;
  o["slow_onsets"] = m.slow_onsets;
  o["shrink_memory_floor_dp"] = j.shrink_floor_dp;
  if (j.mc.replications > 1) {
    auto q = [](const JobQuantiles& x, double scale) {
      return J{{"p10", x.p10 / scale}, {"p50", x.p50 / scale}, {"p90", x.p90 / scale}, {"mean", x.mean / scale}};
    };
    o["monte_carlo"] = J{{"replications", j.mc.replications},
                         {"time_to_train_days", q(j.mc.time_to_train_s, kDay)},
                         {"effective_training_time_ratio", q(j.mc.ettr, 1)},
                         {"interruptions", q(j.mc.interruptions, 1)}};
  }
  J configs = J::array();
  for (const JobStepRecord& s : j.steps) {
    configs.push_back(J{{"dp", s.config.dp},
                        {"slow_gpus", s.config.slow_gpus},
                        {"background_write", s.config.background_write},
                        {"step_s", s.step_s}});
  }
  o["configurations"] = configs;
  o["inputs"] = J{{"gpus", j.inputs.gpus},
                  {"gpus_per_node", j.inputs.gpus_per_node},
                  {"dp", j.inputs.dp},
                  {"nodes_per_replica", j.inputs.nodes_per_replica},
                  {"samples_per_step", j.inputs.samples_per_step},
                  {"nic_bytes_per_s_per_node", j.inputs.nic_bytes_per_s_per_node},
                  {"pcie_bytes_per_s_per_gpu", j.inputs.pcie_bytes_per_s_per_gpu},
                  {"background_write_nic_fraction", j.background_nic_fraction}};
  return o;
}

std::string job_report_text(const Scenario& sc, const JobReport& j) {
  const JobSpec& spec = *training_job(sc).job;
  const JobResult& m = j.mc.mean;
  std::string o;
  char line[512];
  auto row = [&](const char* k, const std::string& v) {
    std::snprintf(line, sizeof line, "  %-30s %s\n", k, v.c_str());
    o += line;
  };
  const double tokens =
      spec.train_tokens > 0 ? spec.train_tokens : static_cast<double>(spec.train_steps) * j.inputs.tokens_per_step;
  o += "\nClusterTwin training job: " + sc.name + "\n";
  std::snprintf(
      line, sizeof line, "  %s tokens in %s steps of %s tokens, %.3f s each on %d GPUs (DP %d)%s\n\n",
      human_number(tokens).c_str(), with_commas(static_cast<std::uint64_t>(std::max<std::int64_t>(0, m.steps))).c_str(),
      human_number(j.inputs.tokens_per_step).c_str(), m.step_s, j.inputs.gpus, j.inputs.dp,
      j.mc.replications > 1 ? (", means over " + std::to_string(j.mc.replications) + " replications").c_str() : "");
  o += line;
  row("time to train", duration(m.time_to_train_s) + " (" + duration(m.productive_s) + " of productive steps)");
  if (j.mc.replications > 1) {
    const JobQuantiles& q = j.mc.time_to_train_s;
    std::snprintf(line, sizeof line, "%.2f / %.2f / %.2f days", q.p10 / kDay, q.p50 / kDay, q.p90 / kDay);
    row("  p10 / p50 / p90", line);
  }
  row("ETTR (productive / wall)", pct(m.ettr));
  if (j.mc.replications > 1) {
    const JobQuantiles& q = j.mc.ettr;
    row("  p10 / p50 / p90", pct(q.p10) + " / " + pct(q.p50) + " / " + pct(q.p90));
  }
  std::string causes;
  for (int c = 0; c < kFailureCauses; ++c) {
    const auto n = m.interruptions_by_cause[static_cast<std::size_t>(c)];
    if (n == 0) continue;
    causes += (causes.empty() ? " (" : ", ") + std::string(cause_name(c)) + " " + std::to_string(n);
  }
  if (!causes.empty()) causes += ")";
  row("interruptions", std::to_string(m.interruptions) + causes);
  if (m.link_flaps_absorbed > 0) row("link flaps absorbed", std::to_string(m.link_flaps_absorbed));
  if (m.slow_onsets > 0) row("nodes turned slow", std::to_string(m.slow_onsets));
  if (m.evictions > 0) row("lemon evictions", std::to_string(m.evictions));
  if (m.resizes > 0) row("elastic resizes", std::to_string(m.resizes));
  if (j.shrink_floor_dp > spec.elasticity.min_dp) {
    row("shrink floor (memory)", "DP " + std::to_string(j.shrink_floor_dp) + ": " + j.shrink_floor_why);
  }

  o += "\n  time lost, by what it went to\n";
  for (const auto& r : lost_rows(m.lost)) {
    if (r.s == 0) continue;
    std::snprintf(line, sizeof line, "    %-36s %14s  %6.2f%%\n", r.label, duration(r.s).c_str(),
                  m.time_to_train_s > 0 ? 100 * r.s / m.time_to_train_s : 0.0);
    o += line;
  }
  std::snprintf(line, sizeof line, "    %-36s %14s  %6.2f%%\n", "total", duration(m.lost.total()).c_str(),
                m.time_to_train_s > 0 ? 100 * m.lost.total() / m.time_to_train_s : 0.0);
  o += line;
  if (m.interruptions > 0) {
    o += "\n  time lost, by failure cause (lost work, detection, waiting, restart, load)\n";
    for (int c = 0; c < kFailureCauses; ++c) {
      const auto n = m.interruptions_by_cause[static_cast<std::size_t>(c)];
      const double s = m.lost_by_cause_s[static_cast<std::size_t>(c)];
      if (n == 0 && s == 0) continue;
      std::snprintf(line, sizeof line, "    %-12s %6lld interruptions %14s\n", cause_name(c), static_cast<long long>(n),
                    duration(s).c_str());
      o += line;
    }
  }

  o += "\n  checkpoints\n";
  std::snprintf(line, sizeof line, "    %-36s %s, %s per GPU (%s in all), %lld taken\n", "mode",
                std::string(checkpoint_mode_names.name(spec.checkpoint.mode)).c_str(),
                format_gib(j.inputs.checkpoint_bytes_per_gpu).c_str(),
                format_gib(j.inputs.checkpoint_bytes_per_gpu * j.inputs.gpus).c_str(),
                static_cast<long long>(m.checkpoints));
  o += line;
  std::snprintf(line, sizeof line, "    %-36s %s of the job's wall time\n", "overhead",
                pct(m.checkpoint_overhead_fraction).c_str());
  o += line;
  std::snprintf(line, sizeof line, "    %-36s %s (stall per checkpoint C), MTBF M %s\n", "cost",
                duration(m.checkpoint_cost_s).c_str(), duration(m.mtbf_s).c_str());
  o += line;
  const std::string interval = spec.checkpoint.interval_steps > 0
                                   ? std::to_string(spec.checkpoint.interval_steps) + " steps"
                                   : duration(spec.checkpoint.interval_s);
  std::snprintf(line, sizeof line, "    %-36s %s\n", "interval (this run)", interval.c_str());
  o += line;
  std::snprintf(line, sizeof line, "    %-36s %s\n", "Young (sqrt(2 C M))", duration(m.young_interval_s).c_str());
  o += line;
  std::snprintf(line, sizeof line, "    %-36s %s\n", "Daly (higher order)", duration(m.daly_interval_s).c_str());
  o += line;
  if (j.mc.best_interval_s > 0) {
    std::snprintf(line, sizeof line, "    %-36s %s\n", "simulated best", duration(j.mc.best_interval_s).c_str());
    o += line;
    // The search: each interval's mean time to train over the same draws (common random numbers).
    std::snprintf(line, sizeof line, "\n    %-14s %18s %12s\n", "interval", "mean time to train", "vs best");
    o += line;
    const auto& iv = j.mc.search_intervals_s;
    const auto& tt = j.mc.search_time_to_train_s;
    const double best = *std::min_element(tt.begin(), tt.end());
    for (std::size_t i = 0; i < iv.size() && i < tt.size(); ++i) {
      std::snprintf(line, sizeof line, "    %-14s %13.3f days %+11.3f%%%s\n", duration(iv[i]).c_str(), tt[i] / kDay,
                    100 * (tt[i] / best - 1), iv[i] == j.mc.best_interval_s ? "  best" : "");
      o += line;
    }
  }
  o += "\n  step times simulated (one training simulation per configuration)\n";
  for (const JobStepRecord& s : j.steps) {
    std::snprintf(line, sizeof line, "    DP %-5d %s%s %12.3f s\n", s.config.dp,
                  s.config.slow_gpus > 0 ? (std::to_string(s.config.slow_gpus) + " slow GPU(s)").c_str() : "",
                  s.config.background_write ? " background write" : "", s.step_s);
    o += line;
  }
  return o;
}

Trace job_trace(const Scenario& sc, const JobReport& j, const Trace* step) {
  const JobResult& m = j.mc.mean;
  if (m.time_to_train_s > kTraceMaxSeconds) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "the job runs %.1f days, beyond what a trace holds (int64 picoseconds: 2^63 ps, about %.2f days)",
                  m.time_to_train_s / kDay, kTraceMaxSeconds / kDay);
    throw InputError(sc.file, "--trace", buf,
                     "no --trace, or a shorter job (/job/train_tokens or /job/train_steps) to see its timeline");
  }
  Trace t;
  auto lane = [&t](const char* thread, std::uint32_t tid) { return t.add_lane("job", thread, "job", 0, tid); };
  const std::uint32_t train = lane("training", 0), ckpt = lane("checkpoints", 1), fail = lane("failures", 2),
                      detect = lane("detection", 3), restart = lane("restarts", 4), elastic = lane("elastic", 5);
  const auto ps = [](double s) { return static_cast<std::int64_t>(std::llround(s * 1e12)); };
  TraceCounterTrack dp{t.intern("job"), t.intern("dp_replicas"), 0, {}};
  for (const JobEvent& e : m.timeline) {
    std::uint32_t l = train;
    std::string name(job_event_kind_names.name(e.kind));
    switch (e.kind) {
      case JobEventKind::train:
        name = "train DP " + std::to_string(e.dp);
        if (dp.samples.empty() || dp.samples.back().second != e.dp) dp.samples.emplace_back(ps(e.start_s), e.dp);
        break;
      case JobEventKind::checkpoint:
      case JobEventKind::checkpoint_write:
        l = ckpt;
        break;
      case JobEventKind::failure:
        l = fail;
        name = std::string(cause_name(static_cast<int>(e.cause))) + " failure (" + std::to_string(e.nodes) + " node" +
               (e.nodes == 1 ? "" : "s") + ")";
        break;
      case JobEventKind::link_retry:
        l = fail;
        break;
      case JobEventKind::detection:
        l = detect;
        name = std::string("detect ") + cause_name(static_cast<int>(e.cause));
        break;
      case JobEventKind::reschedule:
      case JobEventKind::restart:
      case JobEventKind::load:
        l = restart;
        break;
      case JobEventKind::resize:
        l = elastic;
        name = "resize to DP " + std::to_string(e.dp);
        break;
      case JobEventKind::eviction:
      case JobEventKind::slow_node:
        l = elastic;
        break;
      case JobEventKind::data_stall:
        l = train;
        break;
    }
    TraceEvent ev;
    ev.start_ps = ps(e.start_s);
    ev.dur_ps = std::max<std::int64_t>(0, ps(e.end_s) - ev.start_ps);
    ev.lane = l;
    ev.name = t.intern(name);
    ev.kind = t.intern(job_event_kind_names.name(e.kind));
    t.events.push_back(ev);
  }
  t.counters.push_back(std::move(dp));
  t.summary = {{"time_to_train_days", m.time_to_train_s / kDay},
               {"effective_training_time_ratio", m.ettr},
               {"interruptions", static_cast<double>(m.interruptions)},
               {"step_time_s", m.step_s}};
  if (step) {
    // The step's lanes beside the job's, shifted to where the job's first training segment starts.
    std::int64_t at = 0;
    for (const JobEvent& e : m.timeline) {
      if (e.kind == JobEventKind::train) {
        at = ps(e.start_s);
        break;
      }
    }
    const auto lane0 = static_cast<std::uint32_t>(t.lanes.size());
    auto str = [&](std::uint32_t i) { return t.intern(step->str(i)); };
    for (const TraceLane& l : step->lanes) {
      t.add_lane(step->str(l.process), step->str(l.thread), "first step / " + step->str(l.group), l.pid + 1, l.tid);
    }
    for (TraceEvent e : step->events) {
      e.start_ps += at;
      e.lane += lane0;
      e.name = str(e.name);
      e.kind = str(e.kind);
      t.events.push_back(e);
    }
    for (TraceCounterTrack c : step->counters) {
      c.process = str(c.process);
      c.name = str(c.name);
      c.pid += 1;
      for (auto& s : c.samples) s.first += at;
      t.counters.push_back(std::move(c));
    }
    for (TraceArrow a : step->arrows) {
      a.from_lane += lane0;
      a.to_lane += lane0;
      a.from_ps += at;
      a.to_ps += at;
      a.name = str(a.name);
      t.arrows.push_back(a);
    }
  }
  canonicalize(t);
  return t;
}

}  // namespace ctwin
