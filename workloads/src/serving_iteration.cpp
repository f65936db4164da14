#include "workloads/serving_iteration.hpp"

#include "sim/error.hpp"
#include "sim/json_reader.hpp"

namespace ctwin {

std::string_view IterationShape::kind() const {
  const bool p = prefill_seqs > 0, d = decode_seqs > 0;
  return p && d ? "mixed" : p ? "prefill" : d ? "decode" : "";
}

BatchShape batch_shape(const IterationShape& s, std::int64_t window) {
  BatchShape b;
  b.window = window;
  for (std::int64_t i = 0; i < s.prefill_seqs; ++i) add_prefill_chunk(b, s.prefill_tokens, s.prefill_context);
  for (std::int64_t i = 0; i < s.decode_seqs; ++i) add_decode_sequence(b, s.decode_context, 0);
  return b;
}

std::int64_t kv_blocks_needed(const IterationShape& s, int block_size) {
  const auto blocks = [&](std::int64_t tokens) { return (tokens + block_size - 1) / block_size; };
  return s.prefill_seqs * blocks(s.prefill_context + s.prefill_tokens) + s.decode_seqs * blocks(s.decode_context);
}

void check_iteration_shape(const IterationShape& s, const SchedulerConfig& sched, std::int64_t num_gpu_blocks,
                           const std::string& file, const std::string& pointer) {
  const auto fail = [&](const std::string& key, const std::string& found, const std::string& expected) {
    throw InputError(file, pointer + key, found, expected);
  };
  const std::string label = iteration_label(s);
  if (s.kind().empty()) fail("", "an empty iteration", "a prefill chunk, decode sequences or both");
  if (s.prefill_seqs + s.decode_seqs > sched.max_num_seqs) {
    fail("", label + ": " + std::to_string(s.prefill_seqs + s.decode_seqs) + " sequences",
         "at most max_num_seqs (" + std::to_string(sched.max_num_seqs) + ")");
  }
  if (s.tokens() > sched.max_num_batched_tokens) {
    fail("", label + ": " + std::to_string(s.tokens()) + " tokens",
         "at most max_num_batched_tokens (" + std::to_string(sched.max_num_batched_tokens) + ")");
  }
  const std::int64_t longest =
      std::max(s.prefill_seqs > 0 ? s.prefill_context + s.prefill_tokens : 0, s.decode_seqs > 0 ? s.decode_context : 0);
  if (sched.max_model_len > 0 && longest > sched.max_model_len) {
    fail("", label + ": a sequence of " + std::to_string(longest) + " tokens",
         "at most max_model_len (" + std::to_string(sched.max_model_len) + ")");
  }
  if (!sched.enable_chunked_prefill && s.kind() == "mixed") {
    fail("", label + ": prefill and decode in one iteration without enable_chunked_prefill",
         "a prefill-only or decode-only iteration (the scheduler mixes them only with chunked prefill)");
  }
  if (!sched.enable_chunked_prefill && sched.prefix_caching == PrefixCaching::none && s.prefill_seqs > 0 &&
      s.prefill_context > 0) {
    fail("/prefill/context", label + ": a chunk after cached tokens without chunked prefill or prefix caching",
         "context 0 (a whole prompt)");
  }
  const std::int64_t blocks = kv_blocks_needed(s, sched.block_size);
  if (blocks > num_gpu_blocks) {
    fail("", label + ": " + std::to_string(blocks) + " KV blocks of " + std::to_string(sched.block_size) + " tokens",
         "at most the KV cache's " + std::to_string(num_gpu_blocks) + " blocks");
  }
}

IterationShape read_iteration_shape(const JsonObject& o) {
  IterationShape s;
  constexpr long long kMax = 1ll << 40;
  if (o.has("prefill")) {
    const JsonObject p = o.object("prefill");
    p.only({"seqs", "tokens", "context"});
    s.prefill_seqs = p.integer("seqs", 1, 1, kMax);
    s.prefill_tokens = p.integer("tokens", std::nullopt, 1, kMax);
    s.prefill_context = p.integer("context", 0, 0, kMax);
  }
  if (o.has("decode")) {
    const JsonObject d = o.object("decode");
    d.only({"batch", "context"});
    s.decode_seqs = d.integer("batch", std::nullopt, 1, kMax);
    s.decode_context = d.integer("context", std::nullopt, 1, kMax);
  }
  return s;
}

void write_iteration_shape(nlohmann::ordered_json& j, const IterationShape& s) {
  if (s.prefill_seqs > 0) {
    j["prefill"] = {{"seqs", s.prefill_seqs}, {"tokens", s.prefill_tokens}, {"context", s.prefill_context}};
  }
  if (s.decode_seqs > 0) j["decode"] = {{"batch", s.decode_seqs}, {"context", s.decode_context}};
}

std::string iteration_label(const IterationShape& s) {
  std::string out;
  if (s.prefill_seqs > 0) {
    out = "prefill " + std::to_string(s.prefill_seqs) + " x " + std::to_string(s.prefill_tokens) + " after " +
          std::to_string(s.prefill_context);
  }
  if (s.decode_seqs > 0) {
    if (!out.empty()) out += " + ";
    out += "decode " + std::to_string(s.decode_seqs) + " at " + std::to_string(s.decode_context);
  }
  return out.empty() ? "empty" : out;
}

}  // namespace ctwin
