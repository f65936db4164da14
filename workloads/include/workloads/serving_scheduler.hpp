// The iteration-level scheduler's rules (as vLLM v1's vllm/v1/core/sched/scheduler.py): who is
// served first, who is preempted, which requests can never run. serving_sim.cpp applies them
// each iteration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "workloads/serving_types.hpp"

namespace ctwin {

// Order of service: lower first. FCFS: arrival (ids are in arrival order); priority: the
// class's priority, then arrival. The running request with the highest key is preempted first.
struct ServiceKey {
  std::int64_t priority = 0;
  std::int64_t id = 0;
  auto operator<=>(const ServiceKey&) const = default;
};
ServiceKey service_key(const Request& r, const RequestClass& c, SchedulingPolicy policy);

// KV tokens a request holds at most: its last decode step writes prompt + output - 1 tokens,
// plus the speculative lookahead.
std::int64_t max_kv_tokens(const Request& r, int num_speculative_tokens);

// Why a request can never be served (vLLM rejects these rather than queue them forever), or
// nullopt: prompt + output beyond max_model_len; more KV blocks than the whole cache; without
// chunked prefill, a prompt beyond the token budget.
std::optional<std::string> rejection_reason(const Request& r, const SchedulerConfig& c, std::int64_t num_kv_blocks);

// Throws std::invalid_argument for a configuration the scheduler cannot run (the loader's
// bounds catch these first): max_num_batched_tokens below max_num_seqs x (1 + k), ...
void check_scheduler_config(const SchedulerConfig& c);

// Accepted draft tokens of one speculative step (0..k): position j is accepted with its rate
// (acceptance_per_position[j], else acceptance_rate) if all before it were, drawn from
// sim/random.hpp keyed by (seed, request id, step).
int accepted_draft_tokens(const SchedulerConfig& c, std::uint64_t seed, std::int64_t request_id, std::int64_t step);

}  // namespace ctwin
