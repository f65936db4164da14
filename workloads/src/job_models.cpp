// The job engine's closed forms: Llama 3's failure rates, detection, storage contention, the
// input pipeline's stall, Young's and Daly's intervals, quantiles.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "workloads/job.hpp"

namespace ctwin {

namespace {

// Llama 3 405B's 54-day snapshot: 16,384 H100 GPUs in 2,048 nodes of 8 (The Llama 3 Herd of
// Models, 2024, Section 3.3.4 and Table 5: 466 interruptions, 47 planned and 419 unexpected;
// the grouping is docs/validation-job-sources.md's L3b, Table 5's counts used, not its percentages, whose
// first row disagrees with its count).
constexpr double kLlamaDays = 54;
constexpr double kLlamaGpuDays = 16384 * kLlamaDays;
constexpr double kLlamaNodeDays = 2048 * kLlamaDays;

}  // namespace

std::array<FailureCauseSpec, kFailureCauses> default_failure_causes() {
  std::array<FailureCauseSpec, kFailureCauses> c{};
  auto set = [&](FailureCause cause, double count, RateUnit unit, FailureScope scope, DetectedBy by) {
    FailureCauseSpec& s = c[static_cast<std::size_t>(cause)];
    const double exposure = unit == RateUnit::per_gpu_day    ? kLlamaGpuDays
                            : unit == RateUnit::per_node_day ? kLlamaNodeDays
                                                             : kLlamaDays;
    s.rate = count / exposure;
    s.unit = unit;
    s.scope = scope;
    s.detected_by = by;
  };
  // Table 5's rows, grouped: faulty GPU 148 + GPU SRAM 19 + GPU system processor 17 + silent
  // data corruption 6 + GPU thermal interface and sensor 6 = 196.
  set(FailureCause::gpu, 196, RateUnit::per_gpu_day, FailureScope::gpu, DetectedBy::watchdog);
  set(FailureCause::hbm, 72, RateUnit::per_gpu_day, FailureScope::gpu, DetectedBy::watchdog);
  // Table 5 has no NVLink row (NVLink faults count as faulty GPUs there): 0 by default.
  set(FailureCause::nvlink, 0, RateUnit::per_gpu_day, FailureScope::node, DetectedBy::nccl_timeout);
  set(FailureCause::nic, 7, RateUnit::per_node_day, FailureScope::node, DetectedBy::nccl_timeout);
  // Host maintenance 32 + SSD 3 + power supply 3 + server chassis 2 + IO expansion board 2 +
  // CPU 2 + system memory 2 = 46.
  set(FailureCause::host, 46, RateUnit::per_node_day, FailureScope::node, DetectedBy::heartbeat);
  set(FailureCause::network_switch, 35, RateUnit::per_node_day, FailureScope::network_switch, DetectedBy::nccl_timeout);
  // Flaps that NCCL's retries absorb are not interruptions, so Table 5 cannot count them: 0.
  set(FailureCause::link_flap, 0, RateUnit::per_node_day, FailureScope::node, DetectedBy::nccl_timeout);
  c[static_cast<std::size_t>(FailureCause::link_flap)].absorbed = true;
  c[static_cast<std::size_t>(FailureCause::link_flap)].retry_s = 30;
  // Table 5 has no shared-storage row: 0 by default.
  set(FailureCause::storage, 0, RateUnit::per_job_day, FailureScope::none, DetectedBy::immediate);
  // Software bug 54 + dependency 2 + NCCL watchdog timeouts 7 (cause unknown; a timeout
  // symptom) = 63.
  set(FailureCause::software, 63, RateUnit::per_node_day, FailureScope::none, DetectedBy::immediate);
  set(FailureCause::user, 0, RateUnit::per_node_day, FailureScope::none, DetectedBy::immediate);
  // 47 planned: automated maintenance such as firmware upgrades, operator-initiated
  // configuration or dataset updates ("at least one interruption a day"): per day of the job,
  // not per node (ours: a maintenance stops the whole job whatever its size).
  set(FailureCause::planned, 47, RateUnit::per_job_day, FailureScope::none, DetectedBy::immediate);
  return c;
}

double JobDetection::seconds(DetectedBy by) const {
  switch (by) {
    case DetectedBy::nccl_timeout:
      return nccl_timeout_s;
    case DetectedBy::heartbeat:
      return heartbeat_interval_s * heartbeat_misses;
    case DetectedBy::watchdog:
      return watchdog_s;
    case DetectedBy::immediate:
      return 0;
  }
  return 0;
}

double storage_transfer_s(double bytes_per_rank, int ranks, double aggregate_bytes_per_s, double per_client_bytes_per_s,
                          double nic_share_bytes_per_s) {
  if (bytes_per_rank <= 0 || ranks <= 0) return 0;
  const double per_rank = std::min(per_client_bytes_per_s, nic_share_bytes_per_s);
  return std::max(bytes_per_rank / per_rank, ranks * bytes_per_rank / aggregate_bytes_per_s);
}

double JobDataLoader::stall_s(double samples, double step_s) const {
  if (workers <= 0 || samples <= 0) return 0;
  double rate = std::numeric_limits<double>::infinity();  // samples per second on the node
  if (decode_s_per_sample > 0) rate = workers / decode_s_per_sample;
  if (read_bytes_per_s > 0 && bytes_per_sample > 0) rate = std::min(rate, read_bytes_per_s / bytes_per_sample);
  const double load_s = samples / rate;
  if (prefetch_batches <= 0) return load_s;
  return std::max(0.0, load_s - step_s);
}

StepTimeFn straggler_step_fn(StepTimeFn base, double slowdown) {
  return [base = std::move(base), slowdown](const JobConfiguration& c) {
    JobConfiguration healthy = c;
    healthy.slow_gpus = 0;
    const double s = base(healthy);
    return c.slow_gpus > 0 ? s * slowdown : s;
  };
}

double diurnal_factor(const JobStragglers& s, double t_s) {
  if (!(s.diurnal_amplitude > 0)) return 1;
  constexpr double kPi = 3.14159265358979323846;
  // The clock hour holding t (t = 0 is midnight), its midpoint in hours of the day.
  const double hour = std::fmod(std::floor(t_s / 3600), 24.0) + 0.5;
  return 1 + s.diurnal_amplitude * (1 + std::cos(2 * kPi * (hour - s.diurnal_peak_hour) / 24)) / 2;
}

double JobLostTime::total() const {
  return lost_work_s + detection_s + reschedule_s + restart_s + load_s + checkpoint_s + straggler_s + link_retry_s +
         data_stall_s + elastic_s;
}

double young_interval_s(double checkpoint_s, double mtbf_s) { return std::sqrt(2 * checkpoint_s * mtbf_s); }

double daly_interval_s(double checkpoint_s, double mtbf_s) {
  // Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
  // FGCS 22 (2006), eq. 37: for delta < 2M,
  // sqrt(2 delta M) [1 + (1/3) (delta / 2M)^(1/2) + (1/9) (delta / 2M)] - delta; else M.
  if (checkpoint_s >= 2 * mtbf_s) return mtbf_s;
  const double x = checkpoint_s / (2 * mtbf_s);
  return std::sqrt(2 * checkpoint_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - checkpoint_s;
}

double job_quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  auto k = static_cast<std::size_t>(std::ceil(q * n));
  k = std::clamp<std::size_t>(k, 1, values.size());
  return values[k - 1];
}

}  // namespace ctwin
