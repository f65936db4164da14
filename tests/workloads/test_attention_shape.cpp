// Workload-neutral attention: training's full sequences and serving's chunks over a cached
// context, hand-worked, and the training layer's attention kernel as the same forward.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/layer_ops.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

ModelSpec tiny() { return ctwin::test::tiny_llama(); }  // h 64, 4 heads of 16, 2 KV heads

}  // namespace

TEST_CASE("attention shape: full causal sequences score s^2/2 pairs each") {
  const AttentionShape a = sequence_attention(2, 32);
  CHECK(a.query_tokens == 64);
  CHECK(a.attended_pairs == 2 * 32 * 32 / 2);
  CHECK(a.kv_tokens_read == 64);
}

TEST_CASE("attention shape: a chunk after a cached context; one decode token sees the context and itself") {
  // 3 new tokens after 10 cached: they see 11, 12 and 13 keys.
  const AttentionShape c = chunk_attention(2, 3, 10);
  CHECK(c.query_tokens == 6);
  CHECK(c.attended_pairs == 2 * (11 + 12 + 13));
  CHECK(c.kv_tokens_read == 2 * 13);
  const AttentionShape d = chunk_attention(1, 1, 100);
  CHECK(d.attended_pairs == 101);
  CHECK(d.kv_tokens_read == 101);
}

TEST_CASE("attention forward: FLOPs and bytes from the shape; backward 2.5x FLOPs, 2x bytes") {
  const ModelSpec m = tiny();
  // One decode token over 100 cached, tp 2: 101 pairs x 2 local heads x 2 x (16 + 16) FLOPs;
  // reads Q and writes O (64 + 64 wide) for 1 token, reads K and V (32 + 32) for 101, /2 ranks.
  const OpCost f = attention_forward(m, chunk_attention(1, 1, 100), 2, 2);
  CHECK(f.kind == OpKind::attention);
  CHECK(f.flops == 101 * 2 * 2 * 32.0);
  CHECK(f.bytes == 2 * (128 + 101 * 64.0) / 2);
  const OpCost b = attention_backward(f);
  CHECK(b.flops == 2.5 * f.flops);
  CHECK(b.bytes == 2 * f.bytes);
}

TEST_CASE("attention forward: training's attention kernel is the full-sequence shape") {
  const ModelSpec m = tiny();
  TrainingConfig cfg;
  cfg.micro_batch = 2;
  cfg.seq_len = 32;
  cfg.parallel.tp = 2;
  const LayerShape s = layer_shape(m, cfg);
  const OpCost expect = attention_forward(m, sequence_attention(2, 32), 2, 2);
  int found = 0;
  for (const auto& it : transformer_layer(m, s, false, 1)) {
    if (it.name != "attention") continue;
    ++found;
    CHECK(it.fwd.flops == rel_approx(expect.flops, 1e-12));
    CHECK(it.fwd.bytes == rel_approx(expect.bytes, 1e-12));
    CHECK(it.bwd.flops == rel_approx(attention_backward(expect).flops, 1e-12));
  }
  CHECK(found == 1);
}
