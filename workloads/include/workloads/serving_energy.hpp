// What a serving run costs: GPU-hours and dollars, energy from a per-GPU power model, and both
// per token. Pure arithmetic on a run's GPU time (ServingResult::gpu_time), so it prices any
// fleet shape: one replica, identical replicas, or the two pools of a disaggregated run.
// docs/serving.md, "Cost and energy", holds the conventions and the sources.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/params.hpp"
#include "topology/catalog.hpp"
#include "workloads/serving_sim.hpp"

namespace ctwin {

// A GPU's draw while doing one kind of work: idle_w + (tdp_w - idle_w) x utilization, the
// utilization by what the GPU time was spent on. Prefill's GEMMs are compute-bound and run at
// the power limit; decode streams weights and KV from HBM and draws well below it (Splitwise,
// ISCA'24, section III: the prompt phase draws near TDP, the token phase far less and can be
// power-capped with little slowdown; measured vLLM decode on H200 at batch 128: 517 W of 700 W,
// 0.70 of the idle-to-TDP range, and less at small batches). Transfers (NCCL, KV swap) keep
// some SMs and the links busy; host overhead between kernels leaves the GPU waiting.
struct PowerModel {
  double tdp_w = 0;
  double idle_w = 0;
  double prefill_utilization = 1.0;
  double decode_utilization = 0.6;    // also the draft model's decode
  double transfer_utilization = 0.3;  // communication, KV swap
  double overhead_utilization = 0;    // scheduling, sampling, launch: the GPU waits on the host
  double power_w(double utilization) const { return idle_w + (tdp_w - idle_w) * utilization; }
};
// The model above with the GPU's catalog powers (GpuSpec::tdp_w, idle_w).
PowerModel power_model(const GpuSpec& gpu);

// One pool of identical replicas: its GPUs, its GPU time summed over its replicas (seconds of a
// replica; each is gpus_per_replica GPU-seconds), its power model and price.
struct ServingPool {
  int replicas = 1;
  int gpus_per_replica = 1;
  GpuTimeSplit gpu_time;
  PowerModel power;
  double gpu_hour_usd = 0;
  // The replica-seconds the pool held and is paid for (a fleet whose replicas come and go:
  // FleetPoolResult::replica_s.billed_s()); < 0: replicas x the span. Idle time is what is left
  // of them after the busy time.
  double replica_s = -1;
};

// Joules by GPU-time part, over all the pool's GPUs.
struct EnergyParts {
  double prefill_j = 0, decode_j = 0, draft_j = 0, comm_j = 0, swap_j = 0, overhead_j = 0, idle_j = 0;
  double total_j() const { return prefill_j + decode_j + draft_j + comm_j + swap_j + overhead_j + idle_j; }
};

struct PoolEconomics {
  int gpus = 0;
  double gpu_hours = 0;   // gpus x the run's span (or replica_s x GPUs per replica) / 3600
  double gpu_usd = 0;     // gpu_hours x gpu_hour_usd
  double idle_gpu_s = 0;  // GPU-seconds with nothing running, the tail after the pool's own end included
  EnergyParts energy;
  double average_power_w = 0;  // per GPU, over the span
  double replica_s = 0;        // paid for
};

struct ServingEconomics {
  std::vector<PoolEconomics> pools;  // in the order given
  double gpu_hours = 0;
  double gpu_usd = 0;
  double energy_j = 0;
  double energy_kwh = 0;
  double electricity_usd = 0;  // energy_kwh x electricity_usd_per_kwh (0 when not counted)
  double total_usd = 0;        // gpu_usd + electricity_usd
  // The cost split between the input (prefill) and output (decode) tokens by GPU time: prefill's
  // GPU-seconds against decode's and the draft model's; communication, overhead, swap and idle
  // time follow the same shares.
  double prefill_share = 0;
  double input_usd = 0, output_usd = 0;  // add up to total_usd
  double usd_per_million_input_tokens = 0, usd_per_million_output_tokens = 0, usd_per_million_tokens = 0;
  double joules_per_output_token = 0, joules_per_token = 0;  // tokens: input + output
  double average_power_w = 0;                                // per GPU, all pools
};

// Prices a run whose pools are all paid for over `span_s` (the run's makespan), or for the
// replica-seconds each pool gives (ServingPool::replica_s). Tokens are the
// completed requests' (ServingResult::input_tokens, output_tokens); per-token figures are 0
// where there are none. std::invalid_argument for a negative span, a pool without GPUs, or GPU
// time beyond replicas x span (its replica_s). A pool with replica_s may have 0 replicas (a
// fleet that scaled to zero): then gpus is 0 and its GPU-hours come from replica_s alone.
ServingEconomics serving_economics(std::span<const ServingPool> pools, double span_s, std::int64_t input_tokens,
                                   std::int64_t output_tokens, double electricity_usd_per_kwh = 0);

// What the report prices a run at (/serving/cost).
struct ServingCostConfig {
  double gpu_hour_usd = 0;  // 0: the catalog's price for the GPU
  double electricity_usd_per_kwh = 0;
};

// /serving/cost: the price of a GPU-hour and of electricity.
inline constexpr ParamDecl serving_cost_params[] = {
    {.key = "gpu_hour_usd",
     .type = ParamType::number,
     .min = 0,
     .max = 1e5,
     .unit = "USD",
     .doc = "price of one GPU for an hour, paid for every GPU of the fleet over the whole makespan",
     .source = "the catalog's gpu_hour_usd (price_source: on-demand list prices, docs/serving.md)",
     .computed = "the GPU's catalog gpu_hour_usd",
     .min_nonzero = 1e-6},
    {.key = "electricity_usd_per_kwh",
     .type = ParamType::number,
     .def = 0,
     .min = 0,
     .max = 1e3,
     .unit = "USD/kWh",
     .doc = "price of the GPUs' energy, added to the GPU-hours' cost; 0: not counted (a rented GPU-hour "
            "includes its power)"},
};

}  // namespace ctwin
