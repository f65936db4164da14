#include "workloads/serving_energy.hpp"

#include <algorithm>
#include <stdexcept>

namespace ctwin {

PowerModel power_model(const GpuSpec& gpu) {
  PowerModel p;
  p.tdp_w = gpu.tdp_w;
  p.idle_w = gpu.idle_w;
  return p;
}

namespace {

double busy_s(const GpuTimeSplit& t) {
  return t.prefill_s + t.decode_s + t.draft_s + t.comm_s + t.swap_s + t.overhead_s;
}

double per_million(double usd, std::int64_t tokens) { return tokens > 0 ? usd / static_cast<double>(tokens) * 1e6 : 0; }

}  // namespace

ServingEconomics serving_economics(std::span<const ServingPool> pools, double span_s, std::int64_t input_tokens,
                                   std::int64_t output_tokens, double electricity_usd_per_kwh) {
  if (!(span_s >= 0)) throw std::invalid_argument("serving_economics: the span must be >= 0 s");
  ServingEconomics e;
  double prefill_gpu_s = 0, decode_gpu_s = 0, gpu_s = 0;
  for (const ServingPool& p : pools) {
    if ((p.replicas < 1 && p.replica_s < 0) || p.replicas < 0 || p.gpus_per_replica < 1)
      throw std::invalid_argument("serving_economics: a pool needs at least one replica of one GPU");
    const GpuTimeSplit& t = p.gpu_time;
    const double replica_s = p.replica_s >= 0 ? p.replica_s : p.replicas * span_s;
    // The replicas' own idle time, and the tail from each one's end to the run's end, are both
    // what is left of the span; the picosecond clock's rounding stays within the tolerance.
    const double busy = busy_s(t);
    if (busy > replica_s * (1 + 1e-9) + 1e-12)
      throw std::invalid_argument("serving_economics: a pool's busy GPU time exceeds replicas x span");
    const double g = p.gpus_per_replica;
    PoolEconomics pe;
    pe.gpus = p.replicas * p.gpus_per_replica;
    pe.replica_s = replica_s;
    pe.gpu_hours = g * replica_s / 3600;
    pe.gpu_usd = pe.gpu_hours * p.gpu_hour_usd;
    pe.idle_gpu_s = g * std::max(0.0, replica_s - busy);
    const PowerModel& m = p.power;
    EnergyParts& j = pe.energy;
    j.prefill_j = g * t.prefill_s * m.power_w(m.prefill_utilization);
    j.decode_j = g * t.decode_s * m.power_w(m.decode_utilization);
    j.draft_j = g * t.draft_s * m.power_w(m.decode_utilization);
    j.comm_j = g * t.comm_s * m.power_w(m.transfer_utilization);
    j.swap_j = g * t.swap_s * m.power_w(m.transfer_utilization);
    j.overhead_j = g * t.overhead_s * m.power_w(m.overhead_utilization);
    j.idle_j = pe.idle_gpu_s * m.idle_w;
    pe.average_power_w = replica_s > 0 ? j.total_j() / (g * replica_s) : 0;
    prefill_gpu_s += g * t.prefill_s;
    decode_gpu_s += g * (t.decode_s + t.draft_s);
    gpu_s += g * replica_s;
    e.gpu_hours += pe.gpu_hours;
    e.gpu_usd += pe.gpu_usd;
    e.energy_j += j.total_j();
    e.pools.push_back(pe);
  }
  e.energy_kwh = e.energy_j / 3.6e6;
  e.electricity_usd = e.energy_kwh * electricity_usd_per_kwh;
  e.total_usd = e.gpu_usd + e.electricity_usd;
  const double worked = prefill_gpu_s + decode_gpu_s;
  e.prefill_share = worked > 0 ? prefill_gpu_s / worked : 0;
  e.input_usd = e.total_usd * e.prefill_share;
  e.output_usd = e.total_usd - e.input_usd;
  e.usd_per_million_input_tokens = per_million(e.input_usd, input_tokens);
  e.usd_per_million_output_tokens = per_million(e.output_usd, output_tokens);
  e.usd_per_million_tokens = per_million(e.total_usd, input_tokens + output_tokens);
  if (output_tokens > 0) e.joules_per_output_token = e.energy_j / static_cast<double>(output_tokens);
  if (input_tokens + output_tokens > 0)
    e.joules_per_token = e.energy_j / static_cast<double>(input_tokens + output_tokens);
  if (gpu_s > 0) e.average_power_w = e.energy_j / gpu_s;
  return e;
}

}  // namespace ctwin
