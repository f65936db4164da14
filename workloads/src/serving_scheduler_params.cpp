#include "workloads/serving_scheduler_params.hpp"

#include <string>

namespace ctwin {

SchedulerConfig read_scheduler_config(const JsonObject& o) {
  const ParamReader r(o, serving_scheduler_params, false);
  SchedulerConfig c;
  c.max_num_seqs = static_cast<int>(r.integer("max_num_seqs"));
  c.max_num_batched_tokens = r.integer("max_num_batched_tokens");
  c.block_size = static_cast<int>(r.integer("block_size"));
  c.gpu_memory_utilization = r.number("gpu_memory_utilization");
  c.enable_chunked_prefill = r.boolean("enable_chunked_prefill");
  const bool prefix = r.boolean("enable_prefix_caching");
  const std::string kind = r.choice("prefix_cache");
  c.prefix_caching = !prefix ? PrefixCaching::none : *prefix_caching_names.parse(kind);
  if (prefix && c.prefix_caching == PrefixCaching::none)
    o.fail("prefix_cache", "\"none\" with enable_prefix_caching", "\"hash_lru\" or \"radix\"");
  c.swap_space_gib = r.number("swap_space");
  c.kv_offloading_size_gib = r.number("kv_offloading_size");
  c.kv_offloading_scope = r.choice("kv_offloading_scope", kv_offload_scope_names);
  if (c.kv_offloading_size_gib > 0 && c.prefix_caching == PrefixCaching::none)
    o.fail("kv_offloading_size", std::to_string(c.kv_offloading_size_gib) + " GiB without enable_prefix_caching",
           "enable_prefix_caching: true (the host tier holds prefix-cache pages), or kv_offloading_size 0");
  c.max_model_len = r.integer("max_model_len");
  c.policy = r.choice("scheduling_policy", scheduling_policy_names);
  c.preemption = r.choice("preemption_mode", preemption_mode_names);
  c.batching = r.choice("batching", batching_mode_names);
  c.capacity = r.choice("capacity_scheduler_policy", capacity_policy_names);
  c.num_speculative_tokens = static_cast<int>(r.integer("num_speculative_tokens"));
  c.acceptance_rate = r.number("acceptance_rate");
  if (o.has("acceptance_per_position")) {
    const Json& a = o.raw("acceptance_per_position");
    if (!a.is_array()) o.fail("acceptance_per_position", "not an array", "an array of numbers in [0, 1]");
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number() || !(a[i].get<double>() >= 0 && a[i].get<double>() <= 1))
        o.fail("acceptance_per_position/" + std::to_string(i), "value " + a[i].dump(), "a number in [0, 1]");
      c.acceptance_per_position.push_back(a[i].get<double>());
    }
  }
  c.max_loras = static_cast<int>(r.integer("max_loras"));
  c.max_cpu_loras = r.has("max_cpu_loras") ? static_cast<int>(r.integer("max_cpu_loras")) : c.max_loras;
  if (c.max_cpu_loras < c.max_loras)
    o.fail("max_cpu_loras", std::to_string(c.max_cpu_loras), "at least max_loras = " + std::to_string(c.max_loras));
  c.max_lora_rank = static_cast<int>(r.integer("max_lora_rank"));
  c.lora_load_bytes_per_s = r.bandwidth("lora_load_gbyte_per_s") * 1e9;
  if (c.max_num_batched_tokens < std::int64_t{c.max_num_seqs} * (1 + c.num_speculative_tokens))
    o.fail("max_num_batched_tokens", std::to_string(c.max_num_batched_tokens),
           "at least max_num_seqs x (1 + num_speculative_tokens) = " +
               std::to_string(std::int64_t{c.max_num_seqs} * (1 + c.num_speculative_tokens)));
  return c;
}

}  // namespace ctwin
