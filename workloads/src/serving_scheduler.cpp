#include "workloads/serving_scheduler.hpp"

#include <stdexcept>

#include "sim/random.hpp"

namespace ctwin {

ServiceKey service_key(const Request& r, const RequestClass& c, SchedulingPolicy policy) {
  return {policy == SchedulingPolicy::priority ? c.priority : 0, r.id};
}

std::int64_t max_kv_tokens(const Request& r, int num_speculative_tokens) {
  return std::int64_t{r.prompt_tokens} + r.output_tokens - 1 + num_speculative_tokens;
}

std::optional<std::string> rejection_reason(const Request& r, const SchedulerConfig& c, std::int64_t num_kv_blocks) {
  const std::int64_t total = std::int64_t{r.prompt_tokens} + r.output_tokens;
  if (c.max_model_len > 0 && total > c.max_model_len)
    return "prompt + output tokens " + std::to_string(total) + " exceed max_model_len " +
           std::to_string(c.max_model_len);
  const std::int64_t blocks = (max_kv_tokens(r, c.num_speculative_tokens) + c.block_size - 1) / c.block_size;
  if (blocks > num_kv_blocks)
    return "needs " + std::to_string(blocks) + " KV blocks, the cache has " + std::to_string(num_kv_blocks);
  if (c.batching == BatchingMode::continuous && !c.enable_chunked_prefill && r.prompt_tokens > c.max_num_batched_tokens)
    return "prompt of " + std::to_string(r.prompt_tokens) +
           " tokens beyond max_num_batched_tokens without chunked prefill";
  return std::nullopt;
}

void check_scheduler_config(const SchedulerConfig& c) {
  if (c.max_num_seqs < 1 || c.block_size < 1) throw std::invalid_argument("max_num_seqs and block_size must be >= 1");
  if (c.max_num_batched_tokens < std::int64_t{c.max_num_seqs} * (1 + c.num_speculative_tokens))
    throw std::invalid_argument("max_num_batched_tokens must be at least max_num_seqs x (1 + num_speculative_tokens)");
}

int accepted_draft_tokens(const SchedulerConfig& c, std::uint64_t seed, std::int64_t request_id, std::int64_t step) {
  const std::uint64_t base = mix64(seed ^ mix64(static_cast<std::uint64_t>(request_id) * 0x9e3779b97f4a7c15ull ^
                                                mix64(static_cast<std::uint64_t>(step))));
  int accepted = 0;
  for (int j = 0; j < c.num_speculative_tokens; ++j) {
    const double rate =
        j < static_cast<int>(c.acceptance_per_position.size()) ? c.acceptance_per_position[j] : c.acceptance_rate;
    if (uniform01(base + static_cast<std::uint64_t>(j) + 1) >= rate) break;
    ++accepted;
  }
  return accepted;
}

}  // namespace ctwin
