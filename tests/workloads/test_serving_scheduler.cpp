// The scheduler's rules on their own: service order, rejection, speculative acceptance draws,
// and the /serving scheduler keys read through their ParamDecl table.
#include <doctest/doctest.h>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "tolerance.hpp"
#include "workloads/serving_scheduler.hpp"
#include "workloads/serving_scheduler_params.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

SchedulerConfig read(const std::string& text) {
  const Json j = parse_json(text, "s.json");
  return read_scheduler_config(JsonObject(j, "/serving", "s.json"));
}

}  // namespace

TEST_CASE("serving scheduler: service keys order by priority only under the priority policy") {
  Request a, b;
  a.id = 1;
  b.id = 2;
  const RequestClass low{.priority = 5}, high{.priority = 0};
  CHECK(service_key(a, low, SchedulingPolicy::fcfs) < service_key(b, high, SchedulingPolicy::fcfs));
  CHECK(service_key(b, high, SchedulingPolicy::priority) < service_key(a, low, SchedulingPolicy::priority));
}

TEST_CASE("serving scheduler: rejection reasons") {
  SchedulerConfig c;
  Request r;
  r.prompt_tokens = 100;
  r.output_tokens = 29;  // holds 128 KV tokens at most: 8 blocks of 16
  CHECK_FALSE(rejection_reason(r, c, 8));
  CHECK(rejection_reason(r, c, 7));
  c.num_speculative_tokens = 1;  // the lookahead needs one more token: a ninth block
  CHECK(rejection_reason(r, c, 8));
  c.num_speculative_tokens = 0;
  c.max_model_len = 129;
  CHECK_FALSE(rejection_reason(r, c, 8));
  c.max_model_len = 128;
  CHECK(rejection_reason(r, c, 100));
}

TEST_CASE("serving scheduler: accepted draft tokens follow the per-position rates") {
  SchedulerConfig c;
  c.num_speculative_tokens = 3;
  c.acceptance_per_position = {0.9, 0.6};
  c.acceptance_rate = 0.5;  // the third position
  std::int64_t counts[4] = {0, 0, 0, 0};
  constexpr int n = 200000;
  for (int i = 0; i < n; ++i) ++counts[accepted_draft_tokens(c, 42, i % 1000, i / 1000)];
  // P(0) = 0.1, P(1) = 0.9 x 0.4, P(2) = 0.9 x 0.6 x 0.5, P(3) = the same.
  CHECK(static_cast<double>(counts[0]) / n == abs_approx(0.1, 0.005));
  CHECK(static_cast<double>(counts[1]) / n == abs_approx(0.36, 0.005));
  CHECK(static_cast<double>(counts[2]) / n == abs_approx(0.27, 0.005));
  CHECK(static_cast<double>(counts[3]) / n == abs_approx(0.27, 0.005));
  CHECK(accepted_draft_tokens(c, 42, 3, 9) == accepted_draft_tokens(c, 42, 3, 9));
}

TEST_CASE("serving scheduler params: vLLM names, defaults and errors with the JSON path") {
  const SchedulerConfig d = read("{}");
  CHECK(d.max_num_seqs == 256);
  CHECK(d.max_num_batched_tokens == 8192);
  CHECK(d.block_size == 16);
  CHECK(d.prefix_caching == PrefixCaching::none);
  CHECK(d.swap_space_gib == rel_approx(4, 1e-12));
  const SchedulerConfig c = read(
      R"({"max_num_seqs": 8, "max_num_batched_tokens": 64, "enable_prefix_caching": true, "prefix_cache": "radix",
          "scheduling_policy": "priority", "preemption_mode": "swap", "batching": "static", "enable_chunked_prefill": false,
          "num_speculative_tokens": 3, "acceptance_per_position": [0.9, 0.7], "model": "ignored: the deployment's key"})");
  CHECK(c.max_num_seqs == 8);
  CHECK(c.prefix_caching == PrefixCaching::radix);
  CHECK(c.policy == SchedulingPolicy::priority);
  CHECK(c.preemption == PreemptionMode::swap);
  CHECK(c.batching == BatchingMode::static_batching);
  CHECK_FALSE(c.enable_chunked_prefill);
  CHECK(c.acceptance_per_position.size() == 2);
  CHECK(read(R"({"enable_prefix_caching": true})").prefix_caching == PrefixCaching::hash_lru);
  CHECK_THROWS_AS(read(R"({"max_num_seqs": 0})"), InputError);
  CHECK_THROWS_AS(read(R"({"scheduling_policy": "lifo"})"), InputError);
  CHECK_THROWS_AS(read(R"({"acceptance_per_position": [0.5, 1.5]})"), InputError);
  CHECK_THROWS_AS(read(R"({"max_num_seqs": 64, "max_num_batched_tokens": 32})"), InputError);
  try {
    read(R"({"acceptance_per_position": [0.5, "x"]})");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/serving/acceptance_per_position/1") != std::string::npos);
  }
}
