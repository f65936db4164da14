#include <doctest/doctest.h>

#include <memory>

#include "topology/cluster.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/training_sim.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// Every kernel takes 1 ms, whatever it is.
class FlatCostModel final : public CostModel {
 public:
  double op_seconds(const OpCost&) const override { return 1e-3; }
};

// One GPU, no NVLink peers: nothing but compute on the step's critical path.
Cluster one_gpu() {
  ClusterSpec s;
  s.gpu.name = "test-gpu";
  s.gpu.bf16_tflops = 100;
  s.gpu.hbm_bytes = 80e9;
  s.gpu.hbm_gbyte_per_s = 1000;
  s.gpus_per_node = 1;
  s.intra_gbyte_per_s = 100;
  return build_cluster(s);
}

// A three-layer generic model.
ModelSpec three_layers() {
  ModelSpec m;
  m.name = "three";
  m.generic_layers = {{"a", 1e9, 1e6, 1e6}, {"b", 2e9, 1e6, 1e6}, {"c", 3e9, 1e6, 1e6}};
  return m;
}

}  // namespace

TEST_CASE("an injected cost model prices every kernel of the step") {
  TrainingConfig c;
  c.micro_batch = 1;
  c.global_batch = 2;  // two micro-batches on one GPU
  c.seq_len = 1;
  TrainingOptions opt;
  opt.cost_model = std::make_shared<FlatCostModel>();
  const TrainingResult r = simulate_training(three_layers(), c, one_gpu(), opt);
  // Hand count: 2 micro-batches x (3 forward + 3 backward kernels) + 1 optimizer step = 13
  // kernels in series on the one GPU's compute stream, 1 ms each.
  CHECK(r.step_time_s == rel_approx(13e-3, 1e-12));
  CHECK(r.breakdown.optimizer_s == rel_approx(1e-3, 1e-12));
}

TEST_CASE("no cost model given: the roofline from the GPU's coefficients") {
  TrainingConfig c;
  c.micro_batch = 1;
  c.global_batch = 1;
  c.seq_len = 1;
  ModelSpec m;
  m.name = "one";
  // 1e12 FLOPs forward, 1e3 params, 0.5e3 bytes of activations: compute-bound at 100 TFLOP/s.
  m.generic_layers = {{"a", 1e12, 1e3, 0.5e3}};
  const Cluster cl = one_gpu();
  TrainingOptions opt;
  const TrainingResult r = simulate_training(m, c, cl, opt);
  // Forward 1e12 / (100e12 x 0.75) s, backward twice that, each + 2 us launch; the optimizer is
  // memory-bound: 1e3 params x (2 + 2x4 + 8x2 + 2) bytes / (1000e9 x 0.85) + 2 us.
  const double fwd = 1e12 / (100e12 * 0.75) + 2e-6;
  const double bwd = 2e12 / (100e12 * 0.75) + 2e-6;
  const double adam = 1e3 * (2 + 2 * 4 + 8 * 2 + 2) / (1000e9 * 0.85) + 2e-6;
  CHECK(r.step_time_s == rel_approx(fwd + bwd + adam, 1e-9));
}

TEST_CASE("attention ops carry their dtype and geometry: query tokens, causal pairs, K/V tokens read") {
  ModelSpec m;
  m.name = "tiny";
  m.layers = 1;
  m.hidden = 1024;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 1000;
  m.max_seq = 4096;
  TrainingConfig c;
  c.micro_batch = 2;
  c.global_batch = 2;
  c.seq_len = 4096;
  c.precision.compute = Dtype::fp8;
  for (int cp : {1, 2}) {
    CAPTURE(cp);
    c.parallel.cp = cp;
    const LayerShape s = layer_shape(m, c);
    const auto items = transformer_layer(m, s, false, 1);
    int found = 0;
    for (const auto& it : items) {
      if (it.is_comm || it.fwd.kind != OpKind::attention) continue;
      ++found;
      // 2 sequences of 4096 tokens, cp GPUs sharing each: 8192 / cp local queries, each scoring
      // on average half of the 4096 keys of its sequence, reading all 8192 K/V tokens.
      for (const OpCost* op : {&it.fwd, &it.bwd}) {
        REQUIRE(op->dtype.has_value());
        CHECK(*op->dtype == Dtype::bf16);  // FP8 training keeps attention in BF16 (Transformer Engine)
        CHECK(op->query_tokens == rel_approx(8192.0 / cp, 1e-15));
        CHECK(op->attended_pairs == rel_approx(8192.0 / cp * 2048, 1e-15));
        CHECK(op->kv_tokens == rel_approx(8192.0, 1e-15));
      }
    }
    CHECK(found == 1);
  }
}
