#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "topology/cluster.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;

namespace {

// Llama-3.2-1B (meta-llama/Llama-3.2-1B config.json).
ModelSpec llama32_1b() {
  ModelSpec m;
  m.name = "llama3.2-1b";
  m.layers = 16;
  m.hidden = 2048;
  m.heads = 32;
  m.kv_heads = 8;
  m.ffn_hidden = 8192;
  m.vocab = 128256;
  m.max_seq = 131072;
  m.tied_embeddings = true;
  return m;
}

// One DGX H100 as the datasheet gives it: 8 GPUs on NVSwitch at 450 GB/s per direction.
Cluster dgx_h100() {
  ClusterSpec s;
  s.gpu.name = "H100-SXM";
  s.gpu.bf16_tflops = 989;
  s.gpu.hbm_bytes = 80e9;
  s.gpu.hbm_gbps = 3350;
  s.gpu.nvlink_gbps = 450;
  s.gpu.gemm_efficiency = 0.72;
  s.gpus_per_node = 8;
  s.intra_gbps = 450;
  s.intra_latency_us = 0.6;
  return build_cluster(s);
}

TrainingConfig dp8() {
  TrainingConfig c;
  c.parallel.dp = 8;
  c.micro_batch = 2;
  c.global_batch = 64;
  c.seq_len = 4096;
  return c;
}

}  // namespace

TEST_CASE("model FLOPs per step are 6 N tokens plus 12 L s h tokens") {
  // N: the weights used in GEMMs: per layer q,o 2048^2 each, k,v 2048*512 each, MLP 3*2048*8192;
  // plus the (tied) LM head 128256*2048.
  const double per_layer = 2 * 2048.0 * 2048 + 2 * 2048.0 * 512 + 3 * 2048.0 * 8192;
  const double n = 16 * per_layer + 128256.0 * 2048;
  const double tokens = 64.0 * 4096;
  const double expected = 6 * n * tokens + 12 * 16 * 4096.0 * 2048 * tokens;
  CHECK(model_flops_per_step(llama32_1b(), dp8()) == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("data-parallel gradient all-reduces take 2(n-1)/n * S/B plus 2(n-1) hop latencies") {
  TrainingOptions opt;
  opt.trace = true;
  const auto r = simulate_training(llama32_1b(), dp8(), dgx_h100(), opt);
  const auto& t = r.trace;
  double total_bytes = 0;
  int checked = 0;
  for (const auto& e : t.events) {
    if (t.str(e.kind) != "all_reduce" || t.str(t.lanes[e.lane].process) != "gpu 0") continue;
    const double expected_s = 2.0 * 7 / 8 * e.bytes / 450e9 + 2 * 7 * 0.6e-6;
    CHECK(e.dur_ps * 1e-12 == doctest::Approx(expected_s).epsilon(1e-9));
    total_bytes += e.bytes;
    ++checked;
  }
  // Buckets close at layer boundaries once past 25 MiB; every layer holds 60.8M parameters
  // (121 MB of gradients), so each layer is a bucket, and the tied embedding a last one: 16 + 1.
  CHECK(checked == 17);
  // Every parameter's gradient is reduced once: 1,235,814,400 parameters x 2 bytes.
  CHECK(total_bytes == doctest::Approx(1235814400.0 * 2).epsilon(1e-9));
}

TEST_CASE("the step breakdown adds up to the step time and compute matches the op FLOPs") {
  TrainingOptions opt;
  opt.trace = true;
  const auto r = simulate_training(llama32_1b(), dp8(), dgx_h100(), opt);
  const auto& b = r.breakdown;
  CHECK(b.compute_s + b.optimizer_s + b.exposed_comm_s() + b.bubble_s + b.other_s ==
        doctest::Approx(r.step_time_s).epsilon(1e-9));
  // The compute stream's kernels carry 6N tokens/8 weight FLOPs per GPU plus causal attention
  // (half of the non-causal 12 L s h): forward 2*s*s*h/2 per sequence for QK^T and PV each, backward 2.5x.
  double flops = 0;
  for (const auto& e : r.trace.events) {
    if (r.trace.str(r.trace.lanes[e.lane].process) == "gpu 0") flops += e.flops;
  }
  const double per_layer = 2 * 2048.0 * 2048 + 2 * 2048.0 * 512 + 3 * 2048.0 * 8192;
  const double n = 16 * per_layer + 128256.0 * 2048 + 0;
  const double tokens = 64.0 * 4096 / 8;
  const double seqs = tokens / 4096;
  const double attn_fwd = 16 * seqs * 32 * 4096.0 * 4096 * (64 + 64);
  CHECK(flops == doctest::Approx(6 * n * tokens + 3.5 * attn_fwd).epsilon(1e-9));
  CHECK(r.mfu > 0.2);
  CHECK(r.mfu < 0.72);  // cannot beat the GEMM efficiency ceiling
}

TEST_CASE("the simulation is deterministic: two runs give identical traces") {
  TrainingOptions opt;
  opt.trace = true;
  const auto a = simulate_training(llama32_1b(), dp8(), dgx_h100(), opt);
  const auto b = simulate_training(llama32_1b(), dp8(), dgx_h100(), opt);
  REQUIRE(a.trace.events.size() == b.trace.events.size());
  bool same = true;
  for (std::size_t i = 0; i < a.trace.events.size(); ++i) {
    same = same && a.trace.events[i].start_ps == b.trace.events[i].start_ps &&
           a.trace.events[i].dur_ps == b.trace.events[i].dur_ps && a.trace.events[i].name == b.trace.events[i].name;
  }
  CHECK(same);
  CHECK(a.step_time_s == b.step_time_s);
}

TEST_CASE("folding data-parallel replicas gives exactly the unfolded result") {
  TrainingOptions folded, unfolded;
  unfolded.fold = false;
  auto c = dp8();
  c.parallel.tp = 2;
  c.parallel.dp = 4;
  c.global_batch = 16;
  const auto a = simulate_training(llama32_1b(), c, dgx_h100(), folded);
  const auto b = simulate_training(llama32_1b(), c, dgx_h100(), unfolded);
  CHECK(a.simulated_gpus == 2);
  CHECK(b.simulated_gpus == 8);
  CHECK(a.step_time_s == b.step_time_s);
  CHECK(a.breakdown.exposed_tp_s == b.breakdown.exposed_tp_s);
}

TEST_CASE("a 1F1B pipeline's bubble is (p-1)/m of the ideal time when comm is free") {
  // With m micro-batches of equal forward+backward time T on p stages, 1F1B takes
  // (m + p - 1) T: the bubble fraction of the step is (p-1)/(m+p-1) (Narayanan et al. 2021).
  ModelSpec m = llama32_1b();
  m.tied_embeddings = false;
  m.vocab = 256;  // a tiny LM head keeps the stages balanced, as the closed form assumes
  TrainingConfig c;
  c.parallel.pp = 4;
  c.parallel.dp = 1;
  c.micro_batch = 1;
  c.global_batch = 8;
  c.seq_len = 1024;
  Cluster cl = dgx_h100();
  cl.spec.intra_gbps = 1e9;  // practically free transfers
  cl.spec.intra_latency_us = 0;
  const auto r = simulate_training(m, c, cl, {});
  const double ideal = 8.0 / (8 + 4 - 1);
  for (double u : r.stage_utilization) CHECK(u == doctest::Approx(ideal).epsilon(0.03));
  CHECK(r.breakdown.bubble_s / r.step_time_s == doctest::Approx(3.0 / (8 + 4 - 1)).epsilon(0.05));
}
