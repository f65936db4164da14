// One serving iteration's composition, as `ctwin realrun` replays it and `ctwin validate` predicts
// it (docs/realrun.md, docs/measurements.md): a few prompts each computing a chunk after some
// cached tokens, and a decode batch at one context length. batch_shape turns it into the sums the
// iteration cost model reads, through the same add_prefill_chunk / add_decode_sequence the
// serving simulator forms its batches with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "workloads/serving_types.hpp"

namespace ctwin {

class JsonObject;

struct IterationShape {
  std::int64_t prefill_seqs = 0;     // prompts computing a chunk this iteration
  std::int64_t prefill_tokens = 0;   // each one's chunk of new tokens
  std::int64_t prefill_context = 0;  // tokens each has cached (earlier chunks) before its chunk
  std::int64_t decode_seqs = 0;      // sequences decoding one token each (the decode batch)
  std::int64_t decode_context = 0;   // each one's K/V tokens read: its length with this step's token

  // "prefill", "decode" or "mixed" (both); "" for an empty shape.
  std::string_view kind() const;
  // Tokens computed: the chunks and one per decode sequence.
  std::int64_t tokens() const { return prefill_seqs * prefill_tokens + decode_seqs; }
  bool operator==(const IterationShape&) const = default;
};

// The shape's batch; `window` the model's sliding window (BatchShape::window), 0 for none.
BatchShape batch_shape(const IterationShape& s, std::int64_t window = 0);

// KV blocks of `block_size` tokens the iteration's sequences hold (each its own blocks, rounded up).
std::int64_t kv_blocks_needed(const IterationShape& s, int block_size);

// Throws InputError (file, pointer) when the scheduler could never run this iteration: empty, more
// sequences than max_num_seqs, more tokens than max_num_batched_tokens, a sequence beyond
// max_model_len, prefill and decode mixed (or a chunk after cached tokens) without chunked
// prefill, or more KV blocks than the cache's num_gpu_blocks.
void check_iteration_shape(const IterationShape& s, const SchedulerConfig& sched, std::int64_t num_gpu_blocks,
                           const std::string& file, const std::string& pointer);

// {"prefill": {"seqs", "tokens", "context"}, "decode": {"batch", "context"}}, either or both, from
// `o` (the caller checks o's other keys); seqs defaults to 1, context to 0 (prefill) and is
// required for decode. InputError naming the pointer.
IterationShape read_iteration_shape(const JsonObject& o);
// The same keys written into `j`.
void write_iteration_shape(nlohmann::ordered_json& j, const IterationShape& s);
// "prefill 1 x 256 after 0", "decode 8 at 512", joined with " + " when mixed.
std::string iteration_label(const IterationShape& s);

}  // namespace ctwin
