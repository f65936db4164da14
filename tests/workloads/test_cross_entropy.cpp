// The loss kernel over the logits (/training/cross_entropy): the HBM bytes per logit each
// implementation moves, counted here kernel by kernel from Megatron-LM's cross_entropy.py and
// fused_cross_entropy.py, and what that does to a step's time and the last stage's memory.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/cluster.hpp"
#include "workloads/layer_ops.hpp"
#include "workloads/memory.hpp"
#include "workloads/model_json.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

const LayerItem& loss_item(const std::vector<LayerItem>& items) {
  for (const auto& it : items) {
    if (it.name == "cross_entropy") return it;
  }
  FAIL("no cross_entropy item");
  return items.front();
}

ModelSpec small_vocab_heavy_model() {
  ModelSpec m = builtin_models().models.at("llama3-8b");
  m.layers = 2;  // a short stack, so the loss is a visible share of the step
  return m;
}

TrainingConfig loss_cfg(CrossEntropyKernel k, int tp) {
  TrainingConfig c;
  c.micro_batch = 2;
  c.seq_len = 1024;
  c.global_batch = 2;
  c.parallel.tp = tp;
  c.cross_entropy = k;
  return c;
}

}  // namespace

TEST_CASE("cross-entropy bytes per BF16 logit: fp32 52 (38 + 14), native 28 (22 + 6), fused 6 (2 + 4)") {
  // fp32, Megatron's VocabParallelCrossEntropy: .float() reads 2 and writes 4; max reads 4;
  // subtract, exp and divide in place read and write 4 each (24); sum reads 4. Backward: mul_
  // reads and writes 4; autograd's cast back reads 4 and writes 2.
  const CrossEntropyBytes fp32 = cross_entropy_bytes(CrossEntropyKernel::fp32, 2);
  CHECK(fp32.fwd == 2 + 4 + 4 + 24 + 4);
  CHECK(fp32.bwd == 8 + 6);
  // native: cast+max (2 + 4), subtract+exp+sum (4 + 4), divide (4 + 4); backward 4 + 2.
  const CrossEntropyBytes native = cross_entropy_bytes(CrossEntropyKernel::native, 2);
  CHECK(native.fwd == 6 + 8 + 8);
  CHECK(native.bwd == 6);
  // fused: one read forward; backward reads the logits again and writes their gradient.
  const CrossEntropyBytes fused = cross_entropy_bytes(CrossEntropyKernel::fused, 2);
  CHECK(fused.fwd == 2);
  CHECK(fused.bwd == 4);
  // Held at once: the logits and their FP32 copy (2 + 4), or the logits and their gradient.
  CHECK(fp32.resident == 6);
  CHECK(native.resident == 6);
  CHECK(fused.resident == 4);
  // FP32 logits (weight_bytes 4) cost the same FP32 steps with e = 4.
  CHECK(cross_entropy_bytes(CrossEntropyKernel::fp32, 4).fwd == 4 + 4 + 4 + 24 + 4);
}

TEST_CASE("the loss item moves tokens x vocab / tp logits at the kernel's bytes each, forward and backward") {
  const ModelSpec m = small_vocab_heavy_model();
  for (const int tp : {1, 4}) {
    // The hand counts of the first test: forward and backward bytes per BF16 logit.
    struct Expected {
      CrossEntropyKernel k;
      double fwd, bwd;
    };
    for (const Expected x : {Expected{CrossEntropyKernel::fp32, 38, 14}, Expected{CrossEntropyKernel::native, 22, 6},
                             Expected{CrossEntropyKernel::fused, 2, 4}}) {
      CAPTURE(tp);
      CAPTURE(to_string(x.k));
      const TrainingConfig c = loss_cfg(x.k, tp);
      const std::vector<LayerItem> items = head_items(m, layer_shape(m, c));
      const LayerItem& loss = loss_item(items);
      const double logits = 2.0 * 1024 * 128256 / tp;
      CHECK(loss.fwd.bytes == rel_approx(logits * x.fwd, 1e-12));
      CHECK(loss.bwd.bytes == rel_approx(logits * x.bwd, 1e-12));
      CHECK(loss.fwd.flops == 0);
    }
  }
}

TEST_CASE("a step's time differs between loss kernels by the bytes they move at the HBM rate") {
  // One GPU, one micro-batch: the loss runs on the critical path, so the step time differs by
  // exactly (fp32 - fused) bytes / (HBM rate x efficiency).
  const ModelSpec m = small_vocab_heavy_model();
  ClusterSpec spec = ctwin::test::h100_node8().spec;
  spec.gpus_per_node = 1;
  const Cluster cl = build_cluster(spec);
  const auto step = [&](CrossEntropyKernel k) { return simulate_training(m, loss_cfg(k, 1), cl, {}).step_time_s; };
  const double logits = 2.0 * 1024 * 128256;
  const double hbm = spec.gpu.hbm_gbyte_per_s * 1e9 * spec.gpu.hbm_efficiency;
  const double delta_fp32 = logits * (52 - 6) / hbm;
  const double delta_native = logits * (28 - 6) / hbm;
  const double fused = step(CrossEntropyKernel::fused);
  CHECK(step(CrossEntropyKernel::fp32) - fused == rel_approx(delta_fp32, 1e-6));
  CHECK(step(CrossEntropyKernel::native) - fused == rel_approx(delta_native, 1e-6));
  // The size of it: 2,048 tokens of Llama 3's 128,256-entry vocabulary, 12 GB more of traffic.
  CHECK(delta_fp32 > 0.003);
}

TEST_CASE("the last stage holds one micro-batch's logits at the kernel's resident bytes") {
  const ModelSpec m = small_vocab_heavy_model();
  const double logits = 2.0 * 1024 * 128256;
  const double fp32 = estimate_stage_memory(m, loss_cfg(CrossEntropyKernel::fp32, 1), 80e9, 0).activations;
  const double fused = estimate_stage_memory(m, loss_cfg(CrossEntropyKernel::fused, 1), 80e9, 0).activations;
  CHECK(fp32 - fused == rel_approx(logits * (6 - 4), 1e-9));
}

TEST_CASE("training metrics: each pass reads e + 20 bytes a logit forward, nothing in backward") {
  // Autocast's cast (2 read, 4 written), log_softmax's max, sum and result passes (12 read, 4
  // written): 22 bytes a BF16 logit.
  CHECK(metric_cross_entropy_bytes(2) == 2 + 4 + 12 + 4);
  const ModelSpec m = small_vocab_heavy_model();
  TrainingConfig c = loss_cfg(CrossEntropyKernel::fused, 2);
  c.logit_metric_passes = 2;
  const auto items = head_items(m, layer_shape(m, c));
  const LayerItem* metrics = nullptr;
  for (const auto& it : items) {
    if (it.name == "train_metrics") metrics = &it;
  }
  REQUIRE(metrics != nullptr);
  const double logits = 2.0 * 1024 * 128256 / 2;
  CHECK(metrics->fwd.bytes == rel_approx(2 * 22 * logits, 1e-12));
  CHECK(metrics->bwd.bytes == 0);
  c.logit_metric_passes = 0;
  for (const auto& it : head_items(m, layer_shape(m, c))) CHECK(it.name != "train_metrics");
}

TEST_CASE("two metric passes lengthen a one-GPU step by their bytes at the HBM rate plus one kernel launch") {
  const ModelSpec m = small_vocab_heavy_model();
  ClusterSpec spec = ctwin::test::h100_node8().spec;
  spec.gpus_per_node = 1;
  const Cluster cl = build_cluster(spec);
  const auto step = [&](int passes) {
    TrainingConfig c = loss_cfg(CrossEntropyKernel::fused, 1);
    c.logit_metric_passes = passes;
    return simulate_training(m, c, cl, {}).step_time_s;
  };
  const double logits = 2.0 * 1024 * 128256;
  const double hbm = spec.gpu.hbm_gbyte_per_s * 1e9 * spec.gpu.hbm_efficiency;
  // One forward kernel; the backward issues none.
  const double launch = spec.gpu.kernel_launch_us * 1e-6;
  CHECK(step(2) - step(0) == rel_approx(2 * 22 * logits / hbm + launch, 1e-6));
}
