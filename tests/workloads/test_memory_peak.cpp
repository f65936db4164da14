// What coexists at the memory peak, against hand-worked small cases: the three levels PyTorch
// reports (allocated, reserved, and the GPU total with what lives outside the allocator), the
// layer a full recomputation reruns, ZeRO-3's gathered units, Megatron's FP32 main gradients.
//
// References:
// - PyTorch, "CUDA semantics: memory management": the caching allocator's memory_allocated vs
//   memory_reserved (it frees unused cached blocks and retries before raising out of memory);
//   the CUDA context and NCCL's buffers are outside both.
// - Megatron-LM issue #654 (deepakn94): with BF16, 2 bytes of weights + 4 of FP32 main
//   gradients + 4 of FP32 main weights + 8 of Adam = 18 bytes per parameter; the distributed
//   optimizer shards only the 12 optimizer bytes.
// - PyTorch FSDP (backward_prefetch, limit_all_gathers: two all-gathers in flight), FSDP2
//   fully_shard (one unit prefetched; reshard_after_forward=False keeps units gathered),
//   DeepSpeed ZeRO-3 (stage3_prefetch_bucket_size, reduce_bucket_size).
// - Korthikanti et al. 2022, Sec. 5: full recomputation reruns one layer's forward inside its
//   backward, so that layer's activations are held once more.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/memory.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using ctwin::test::tiny_llama;

namespace {

// The tiny Llama (4 layers) by hand: per layer q, o 64 x 64, k, v 64 x 32, MLP 3 x 64 x 160, two
// norm scales: 43,136; embedding and LM head 128 x 64 each; final norm 64: 188,992 in all.
constexpr double kLayer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
constexpr double kParams = 4 * kLayer + 2 * 128 * 64 + 64;
// One layer keeps 118,784 bytes per micro-batch of 2 x 32 tokens (flash, no dropout; see
// test_memory_formulas.cpp); the loss keeps 64 tokens x 128 logits x (2 + 4) bytes.
constexpr double kAct = 8 * 64 * 64 + 2 * 64 * (64 + 32 + 32 + 64) + 2 * 64 * 3 * 160;
constexpr double kLogits = 64 * 128 * 6;
constexpr double kGiB = 1024.0 * 1024 * 1024;

TrainingConfig one_gpu() {
  TrainingConfig c;
  c.micro_batch = 2;
  c.global_batch = 2;
  c.seq_len = 32;
  c.attention = AttentionKernel::flash;
  c.dropout = false;
  return c;
}

}  // namespace

TEST_CASE("allocated = states + activations; reserved = allocated x 1.03; the peak that must fit adds 1.5 GiB") {
  static_assert(kParams == 188992 && kAct == 118784 && kLogits == 49152);
  const TrainingConfig c = one_gpu();
  const MemoryBreakdown mb = estimate_memory(tiny_llama(), c, 80e9);
  const double allocated = 16 * kParams + 4 * kAct + kLogits;  // 3,548,864 bytes
  CHECK(persistent_bytes(mb) == rel_approx(16 * kParams, 1e-12));
  CHECK(mb.allocated == rel_approx(allocated, 1e-12));
  CHECK(mb.reserved == rel_approx(1.03 * allocated, 1e-12));
  // The allocator gives its cached segments back before failing: the OOM test is on allocated.
  CHECK(mb.peak == rel_approx(allocated + 1.5 * kGiB, 1e-12));
  TrainingConfig none = c;
  none.allocator_reserve_fraction = 0;
  CHECK(estimate_memory(tiny_llama(), none, 80e9).reserved == rel_approx(allocated, 1e-12));
}

TEST_CASE("Megatron's BF16 states: 18 bytes per parameter, 2 + 4 + 12/d with the distributed optimizer") {
  TrainingConfig c = one_gpu();
  c.precision.grad_bytes = 4;  // FP32 main gradients
  c.parallel.dp = 4;
  c.global_batch = 8;
  CHECK(persistent_bytes(estimate_memory(tiny_llama(), c, 80e9)) == rel_approx(18 * kParams, 1e-12));
  c.parallel.zero_stage = 1;  // --use-distributed-optimizer
  CHECK(persistent_bytes(estimate_memory(tiny_llama(), c, 80e9)) == rel_approx((2 + 4 + 12.0 / 4) * kParams, 1e-12));
}

TEST_CASE("full recompute reruns one layer: its 118,784 bytes on a middle stage, less the freed logits on the last") {
  TrainingConfig c = one_gpu();
  c.recompute = Recompute::full;
  c.parallel.pp = 2;
  c.global_batch = 4;  // 2 micro-batches
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).recompute == rel_approx(kAct, 1e-12));
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 1).recompute == rel_approx(kAct - kLogits, 1e-12));
  // A larger vocabulary's logits (64 x 1024 x 6 = 393,216 bytes) outweigh the layer: no excess.
  ModelSpec wide = tiny_llama();
  wide.vocab = 1024;
  CHECK(estimate_stage_memory(wide, c, 80e9, 1).recompute == 0);
  // Without recomputation nothing is rerun.
  c.recompute = Recompute::none;
  CHECK(estimate_stage_memory(tiny_llama(), c, 80e9, 0).recompute == 0);
}

TEST_CASE("ZeRO-3 holds two gathered units and one unit's unsharded gradients; FSDP2 without resharding all units") {
  TrainingConfig c = one_gpu();
  c.parallel.dp = 4;
  c.global_batch = 8;
  c.parallel.zero_stage = 3;
  // A unit: one layer and its share of the final norm (43,152), larger than the 8,192-parameter
  // embedding or LM head.
  const double unit = kLayer + 64.0 / 4;
  for (auto fw : {Sharding::Framework::fsdp1, Sharding::Framework::fsdp2}) {
    c.parallel.sharding.framework = fw;
    CHECK(estimate_memory(tiny_llama(), c, 80e9).gathered == rel_approx(2 * unit * 2 + unit * 2, 1e-12));
  }
  c.parallel.sharding.reshard_after_forward = false;
  CHECK(estimate_memory(tiny_llama(), c, 80e9).gathered == rel_approx(kParams * 2 + unit * 2, 1e-12));
  // DeepSpeed: the current module plus a 10,000-parameter prefetch bucket, a 20,000-element
  // reduce bucket, both in 2-byte dtypes.
  c.parallel.sharding = Sharding{};
  c.parallel.sharding.framework = Sharding::Framework::deepspeed;
  c.parallel.sharding.prefetch_bucket_elements = 10000;
  c.parallel.sharding.reduce_bucket_elements = 20000;
  CHECK(estimate_memory(tiny_llama(), c, 80e9).gathered == rel_approx((unit + 10000) * 2 + 20000 * 2, 1e-12));
  // ZeRO-1 gathers nothing.
  c.parallel.zero_stage = 1;
  CHECK(estimate_memory(tiny_llama(), c, 80e9).gathered == 0);
}

TEST_CASE("FSDP2 at dp = 4 by hand: 16/4 bytes per parameter + 4 layers' activations + logits + 3 units x 2 bytes") {
  TrainingConfig c = one_gpu();
  c.parallel.dp = 4;
  c.global_batch = 8;
  c.parallel.zero_stage = 3;
  c.parallel.sharding.framework = Sharding::Framework::fsdp2;
  const double unit = kLayer + 64.0 / 4;
  const MemoryBreakdown mb = estimate_memory(tiny_llama(), c, 80e9);
  CHECK(mb.allocated == rel_approx(16 * kParams / 4 + 4 * kAct + kLogits + 6 * unit, 1e-12));
}
