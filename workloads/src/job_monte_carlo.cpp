// Monte Carlo over a job's replications (one step-time cache for all of them) and the
// checkpoint-interval search with common random numbers.
#include <algorithm>
#include <cmath>
#include <limits>

#include "job_engine.hpp"

namespace ctwin {

namespace {

JobQuantiles quantiles(const std::vector<double>& v) {
  JobQuantiles q;
  if (v.empty()) return q;
  q.p10 = job_quantile(v, 0.1);
  q.p50 = job_quantile(v, 0.5);
  q.p90 = job_quantile(v, 0.9);
  double sum = 0;
  for (const double x : v) sum += x;
  q.mean = sum / static_cast<double>(v.size());
  return q;
}

void add_scaled(JobLostTime& a, const JobLostTime& b, double w) {
  a.lost_work_s += w * b.lost_work_s;
  a.detection_s += w * b.detection_s;
  a.reschedule_s += w * b.reschedule_s;
  a.restart_s += w * b.restart_s;
  a.load_s += w * b.load_s;
  a.checkpoint_s += w * b.checkpoint_s;
  a.straggler_s += w * b.straggler_s;
  a.link_retry_s += w * b.link_retry_s;
  a.data_stall_s += w * b.data_stall_s;
  a.elastic_s += w * b.elastic_s;
}

}  // namespace

JobMonteCarloResult run_job_monte_carlo(const JobSpec& spec, const JobInputs& in, const StepTimeFn& step_fn,
                                        const std::function<void(int, int)>& progress) {
  check_job_inputs(spec, in);
  JobStepCache cache{step_fn};
  const int n = std::max(1, spec.monte_carlo.replications);
  JobMonteCarloResult out;
  out.replications = n;
  std::vector<double> ttt, ettr, interruptions;
  ttt.reserve(static_cast<std::size_t>(n));
  ettr.reserve(static_cast<std::size_t>(n));
  interruptions.reserve(static_cast<std::size_t>(n));
  JobSpec quiet = spec;
  quiet.timeline = false;
  // Means: counts are summed as doubles and rounded at the end.
  std::array<double, kFailureCauses> by_cause{};
  double total_int = 0, flaps = 0, evictions = 0, checkpoints = 0, resizes = 0, steps = 0, onsets = 0;
  const double w = 1.0 / n;
  for (int rep = 0; rep < n; ++rep) {
    JobResult r = run_replication(rep == 0 ? spec : quiet, in, cache, rep);
    ttt.push_back(r.time_to_train_s);
    ettr.push_back(r.ettr);
    interruptions.push_back(static_cast<double>(r.interruptions));
    JobResult& m = out.mean;
    if (rep == 0) {
      m = r;
      m.time_to_train_s = m.productive_s = m.ettr = 0;
      m.lost = {};
      m.lost_by_cause_s = {};
      m.checkpoint_overhead_fraction = 0;
    }
    m.time_to_train_s += w * r.time_to_train_s;
    m.productive_s += w * r.productive_s;
    m.ettr += w * r.ettr;
    m.checkpoint_overhead_fraction += w * r.checkpoint_overhead_fraction;
    add_scaled(m.lost, r.lost, w);
    for (std::size_t c = 0; c < by_cause.size(); ++c) {
      m.lost_by_cause_s[c] += w * r.lost_by_cause_s[c];
      by_cause[c] += w * static_cast<double>(r.interruptions_by_cause[c]);
    }
    total_int += w * static_cast<double>(r.interruptions);
    flaps += w * static_cast<double>(r.link_flaps_absorbed);
    evictions += w * static_cast<double>(r.evictions);
    onsets += w * static_cast<double>(r.slow_onsets);
    checkpoints += w * static_cast<double>(r.checkpoints);
    resizes += w * static_cast<double>(r.resizes);
    steps += w * static_cast<double>(r.steps);
    if (progress) progress(rep + 1, n);
  }
  JobResult& m = out.mean;
  for (std::size_t c = 0; c < by_cause.size(); ++c) m.interruptions_by_cause[c] = std::llround(by_cause[c]);
  m.interruptions = std::llround(total_int);
  m.link_flaps_absorbed = std::llround(flaps);
  m.evictions = std::llround(evictions);
  m.slow_onsets = std::llround(onsets);
  m.checkpoints = std::llround(checkpoints);
  m.resizes = std::llround(resizes);
  m.steps = std::llround(steps);
  m.distinct_configurations = cache.calls();
  out.time_to_train_s = quantiles(ttt);
  out.ettr = quantiles(ettr);
  out.interruptions = quantiles(interruptions);

  // The interval search in whole steps (intervals of the same step count run alike, so each
  // count runs once): the same replications (the same draws) at each interval.
  const int points = spec.monte_carlo.search_points;
  if (points > 0 && std::isfinite(m.young_interval_s) && m.young_interval_s > 0) {
    const int reps = std::max(1, spec.monte_carlo.search_replications);
    const double step_s = m.step_s;
    double best = std::numeric_limits<double>::infinity();
    std::int64_t last_steps = 0;
    for (int i = 0; i < points; ++i) {
      const double f = points == 1 ? 0.0 : -2.0 + 4.0 * i / (points - 1);  // log2 of the factor: -2 .. 2
      const auto steps = std::max<std::int64_t>(1, std::llround(m.young_interval_s * std::exp2(f) / step_s));
      if (steps == last_steps) continue;
      last_steps = steps;
      JobSpec s = quiet;
      s.checkpoint.interval_steps = steps;
      double mean = 0;
      for (int rep = 0; rep < reps; ++rep) mean += run_replication(s, in, cache, rep).time_to_train_s / reps;
      const double interval = static_cast<double>(steps) * step_s;
      out.search_intervals_s.push_back(interval);
      out.search_time_to_train_s.push_back(mean);
      if (mean < best) {
        best = mean;
        out.best_interval_s = interval;
      }
    }
    m.distinct_configurations = cache.calls();
  }
  return out;
}

}  // namespace ctwin
