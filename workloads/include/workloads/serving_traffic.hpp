// Serving traffic: the requests a replica sees (issue 14, "Traffic"), as plain data
// (TrafficSpec) and the generator behind TrafficSource (make_traffic). Every draw is keyed by
// (seed, request or session id, purpose) through sim/random.hpp, so a run is reproducible and
// a request's lengths do not depend on the order anything else asked; open-loop sources keep
// O(1) state, closed-loop ones O(users), sessions O(active sessions), a replayed trace its rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/names.hpp"
#include "workloads/serving_lora.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin {

// The largest prompt or output length accepted anywhere (2^24 tokens).
inline constexpr std::int32_t kMaxTrafficTokens = 1 << 24;

// How requests arrive. poisson, gamma and constant are renewal processes at rate_per_s; steps,
// diurnal and burst are Poisson processes with a rate curve, drawn by time-rescaling (unit-rate
// exponential gaps mapped through the inverse of the integrated rate); offline puts every request
// at t = 0 (vLLM's benchmark_throughput); closed_loop has `users` users who each send their next
// request think_time_s after their previous one completes; trace replays CSV rows.
enum class ArrivalProcess : std::uint8_t {
  poisson,
  gamma,
  constant,
  steps,
  diurnal,
  burst,
  offline,
  closed_loop,
  trace
};
inline constexpr auto arrival_process_names = make_names<ArrivalProcess>({{ArrivalProcess::poisson, "poisson"},
                                                                          {ArrivalProcess::gamma, "gamma"},
                                                                          {ArrivalProcess::constant, "constant"},
                                                                          {ArrivalProcess::steps, "steps"},
                                                                          {ArrivalProcess::diurnal, "diurnal"},
                                                                          {ArrivalProcess::burst, "burst"},
                                                                          {ArrivalProcess::offline, "offline"},
                                                                          {ArrivalProcess::closed_loop, "closed_loop"},
                                                                          {ArrivalProcess::trace, "trace"}});

// From t_s on (until the next step) requests arrive at rate_per_s (0: none).
struct RateStep {
  double t_s = 0;
  double rate_per_s = 0;
};

// One row of a request trace in the Azure LLM inference layout.
struct TraceRow {
  Time arrival{};  // after the first row
  std::int32_t context_tokens = 0;
  std::int32_t generated_tokens = 0;  // as written (may be 0; the request then generates 1)
};

// The per-block prefix identity of a replayed trace's rows (the Mooncake traces' hash_ids), flat
// so memory stays two vectors whatever the row count: row i's ids are
// ids[offsets[i] .. offsets[i+1]), block i of a prompt covering block_tokens tokens.
struct PrefixBlockPool {
  std::vector<std::uint64_t> ids;
  std::vector<std::int64_t> offsets = {0};
  std::int32_t block_tokens = 512;
};

// A trace file's layout: the Azure LLM inference CSV, or the Mooncake release's JSON lines.
enum class TraceFormat : std::uint8_t { azure_csv, mooncake_jsonl };
inline constexpr auto trace_format_names =
    make_names<TraceFormat>({{TraceFormat::azure_csv, "azure_csv"}, {TraceFormat::mooncake_jsonl, "mooncake_jsonl"}});

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::poisson;
  double rate_per_s = 1;        // poisson, gamma, constant; burst: the base rate
  double cv = 1;                // gamma: coefficient of variation of the gaps (shape 1/cv^2)
  std::vector<RateStep> steps;  // steps: by t_s ascending, the first at 0
  // diurnal: rate(t) = min + (max - min) (1 - cos(2 pi t / period)) / 2 (starts at its minimum)
  double period_s = 86400;
  double min_rate_per_s = 0;
  double max_rate_per_s = 1;
  // burst: burst_rate_per_s in [burst_start_s, burst_start_s + burst_duration_s), else rate_per_s
  double burst_start_s = 0;
  double burst_duration_s = 0;
  double burst_rate_per_s = 0;
  // closed_loop
  std::int32_t users = 1;
  double think_time_s = 0;
  // trace: the rows (arrivals after the first, non-decreasing) and a factor on their times
  std::shared_ptr<const std::vector<TraceRow>> trace;
  double time_scale = 1;
  // trace: each row's prefix block hashes (Request::prefix_blocks point into it), or null
  std::shared_ptr<const PrefixBlockPool> trace_blocks;
};

enum class LengthDist : std::uint8_t { fixed, uniform, lognormal, empirical };
inline constexpr auto length_dist_names = make_names<LengthDist>({{LengthDist::fixed, "fixed"},
                                                                  {LengthDist::uniform, "uniform"},
                                                                  {LengthDist::lognormal, "lognormal"},
                                                                  {LengthDist::empirical, "empirical"}});

// A token-length distribution; draws are integers in [min, max] (>= 1).
// lognormal: exp(mu + sigma Z) rounded to the nearest integer and clamped to [min, max]; mu is
// ln(median), or ln(mean) - sigma^2/2 when the mean is given (the loader computes it).
// empirical: one of `samples`, uniformly.
struct LengthSpec {
  LengthDist dist = LengthDist::fixed;
  std::int32_t value = 1;  // fixed
  std::int32_t min = 1;
  std::int32_t max = kMaxTrafficTokens;
  double mu = 0;
  double sigma = 0;
  std::shared_ptr<const std::vector<std::int32_t>> samples;
};

// A system prompt of shared_tokens tokens before the request's own input, in a share_ratio of
// the requests, each picking one of `groups` distinct prompts (prefix groups 0 .. groups-1).
// Trace replay: the first min(shared_tokens, prompt) tokens of a chosen row's prompt.
struct PrefixSpec {
  std::int32_t shared_tokens = 0;  // 0: none
  double share_ratio = 1;
  std::int32_t groups = 1;
};

// Multi-turn sessions (turns > 1): requests are dealt round-robin to `active` concurrent
// sessions (closed loop: one per user); turn k's prompt is the session's context (the prompts
// and outputs of its turns before) plus its own input, and that context is its shared prefix
// (prefix group = groups + session id, distinct from the system prompts'). A session ends after
// `turns` turns, or earlier when the next prompt would pass kMaxTrafficTokens.
struct SessionSpec {
  std::int32_t turns = 1;
  std::int32_t active = 1;
};

struct TrafficSpec {
  std::uint64_t seed = 0;
  ArrivalSpec arrival;
  std::int64_t requests = -1;  // stop after this many (-1: no limit)
  double duration_s = -1;      // no arrival at or after this time (-1: no limit)
  LengthSpec input;            // the request's own prompt tokens (not trace)
  LengthSpec output;           // tokens generated (not trace)
  PrefixSpec prefix;
  SessionSpec sessions;
  std::vector<RequestClass> classes = {RequestClass{}};  // at least one; shares > 0
  LoraTrafficSpec lora;                                  // adapters the requests carry (none by default)
};

// The generator for `spec` (assumed valid: traffic_from_json checks every field).
std::unique_ptr<TrafficSource> make_traffic(const TrafficSpec& spec);

// One draw from a length distribution for request `id` (`purpose` keeps input and output apart).
std::int32_t draw_length(const LengthSpec& l, std::uint64_t seed, std::uint64_t id, std::uint64_t purpose);

// A request trace in the layout of the public Azure LLM inference traces: the header
// `TIMESTAMP,ContextTokens,GeneratedTokens`, then rows like `2023-11-16 18:15:46.6805900,374,44`
// (UTC date and time, up to 12 fractional digits, to the picosecond). Arrivals are after the first
// row; timestamps must not decrease (the published traces are sorted). Errors are InputErrors at
// `file` with path "row N, column NAME" (rows counted from 1 after the header).
std::vector<TraceRow> parse_request_trace(const std::string& text, const std::string& file);

// A request trace in the layout of the Mooncake FAST'25 release (github.com/kvcache-ai/Mooncake,
// FAST25-release/traces/*.jsonl): one JSON object a line, {"timestamp": ms after the first line
// (non-decreasing), "input_length": prompt tokens (>= 1), "output_length": tokens (>= 0; 0 then
// generates 1), "hash_ids": [at most ceil(input_length / block_tokens) distinct ids, 0 to 2^53-1,
// one per block of block_tokens prompt tokens]}; other fields are ignored. Errors are InputErrors
// at `file` with path "line N, field NAME" (lines counted from 1).
struct MooncakeTrace {
  std::vector<TraceRow> rows;
  PrefixBlockPool blocks;  // blocks.offsets has rows.size() + 1 entries
};
MooncakeTrace parse_mooncake_trace(const std::string& text, const std::string& file, std::int32_t block_tokens = 512);

}  // namespace ctwin
