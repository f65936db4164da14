// The layouts "parallelism": "auto" considers (counted by hand on small spaces), the memory
// refusal's wording, and the step-time lower bound that pruning relies on: below every simulated
// step, equal to it where a GPU only computes, and within the closed-form 1F1B bubble of it.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/layout_search.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::fold_gpt;
using ctwin::test::fold_layout;
using ctwin::test::fold_nodes;
using ctwin::test::h100_node8;

TEST_CASE("enumerate_training_layouts: selective recomputation only with unfused attention, where it frees memory") {
  // With a fused kernel selective recomputation frees nothing and costs the kernel's forward
  // again, so the default space leaves it out; asked for, or with unfused attention, it is in.
  const ModelSpec m = fold_gpt(4);
  const Cluster node = h100_node8();
  TrainingConfig base = fold_layout(1, 1, 8, 2);
  LayoutSpace space;
  space.tp = {1};
  space.pp = {1};
  space.cp = {1};
  space.virtual_stages = {1};
  space.zero_stage = {0};
  space.micro_batch = {1};
  auto recomputes = [&] {
    std::set<Recompute> out;
    for (const auto& c : enumerate_training_layouts(m, base, node, space)) out.insert(c.recompute);
    return out;
  };
  base.attention = AttentionKernel::flash;
  CHECK(recomputes() == std::set<Recompute>{Recompute::none, Recompute::full});
  base.attention = AttentionKernel::standard;
  CHECK(recomputes() == std::set<Recompute>{Recompute::none, Recompute::selective, Recompute::full});
  base.attention = AttentionKernel::flash;
  space.recompute = {Recompute::selective};
  CHECK(recomputes() == std::set<Recompute>{Recompute::selective});
}

TEST_CASE("enumerate_training_layouts: every combination the layout check accepts, counted by hand") {
  const ModelSpec m = fold_gpt(4);  // 16 heads, 4 layers
  const Cluster node = h100_node8();
  TrainingConfig base = fold_layout(1, 1, 8, 2);  // global batch 16 of 512 tokens
  LayoutSpace space;
  space.tp = {1, 2};
  space.pp = {1, 2};
  space.cp = {1};
  space.virtual_stages = {1};
  space.zero_stage = {0, 1};
  space.micro_batch = {1, 2};
  space.recompute = {Recompute::none};
  // (tp, pp) -> dp: (1,1) 8, (1,2) 4, (2,1) 4, (2,2) 2; global batch 16 takes micro-batch 1 and 2
  // with each; ZeRO 0 and 1 with each dp > 1: 4 x 2 x 2.
  auto layouts = enumerate_training_layouts(m, base, node, space);
  CHECK(layouts.size() == 16);
  std::set<std::tuple<int, int, int, int, int>> seen;
  for (const auto& c : layouts) {
    CHECK(check_training_layout(m, c, node).empty());
    CHECK(c.parallel.tp * c.parallel.pp * c.parallel.dp * c.parallel.cp == 8);
    CHECK(c.parallel.sequence_parallel == (c.parallel.tp > 1));
    seen.insert({c.parallel.tp, c.parallel.pp, c.parallel.zero_stage, c.micro_batch, c.parallel.dp});
  }
  CHECK(seen.size() == layouts.size());  // no duplicates

  // ZeRO 2 and 3 only without pipeline stages: (1,1) and (2,1), two micro-batch sizes, two stages.
  space.zero_stage = {2, 3};
  layouts = enumerate_training_layouts(m, base, node, space);
  CHECK(layouts.size() == 8);
  for (const auto& c : layouts) CHECK(c.parallel.pp == 1);

  // Interleaving: 4 layers over pp 2 give 2 chunks of 1 layer at v = 2; v = 3 does not split.
  space.zero_stage = {0};
  space.micro_batch = {1};
  space.virtual_stages = {1, 2, 3};
  layouts = enumerate_training_layouts(m, base, node, space);
  int interleaved = 0;
  for (const auto& c : layouts) {
    if (c.parallel.virtual_stages > 1) {
      ++interleaved;
      CHECK(c.parallel.virtual_stages == 2);
      CHECK(c.parallel.schedule == PipelineSchedule::interleaved);
    }
  }
  CHECK(interleaved == 2);  // (tp 1, pp 2) and (tp 2, pp 2)

  // Tensor parallelism stays inside a node: 2 nodes of 4 GPUs never get tp 8.
  ClusterSpec s = h100_node8().spec;
  s.gpus_per_node = 4;
  s.nodes = 2;
  s.nic_gbyte_per_s = 50;
  space = {};
  space.tp = {8};
  CHECK(enumerate_training_layouts(m, base, build_cluster(s), space).empty());
}

TEST_CASE("memory_refusal_reason names the overshoot and the largest terms") {
  MemoryBreakdown mb;
  const double gib = 1024.0 * 1024 * 1024;
  mb.weights = 10 * gib;
  mb.grads = 10 * gib;
  mb.optimizer = 20 * gib;
  mb.activations = 50 * gib;
  mb.peak = 100 * gib;
  mb.capacity = 80 * gib;
  mb.oom = true;
  const auto why = memory_refusal_reason(mb);
  REQUIRE(why);
  CHECK(why->find("peak 100.0 GiB over the 80.0 GiB of a GPU by 20.0 GiB") != std::string::npos);
  CHECK(why->find("activations 50.0 GiB, optimizer states 20.0 GiB") != std::string::npos);
  mb.oom = false;
  CHECK_FALSE(memory_refusal_reason(mb));
}

TEST_CASE("step_time_lower_bound_s: exact on one computing GPU, the 1F1B bubble in a pipeline, below every step") {
  const ModelSpec m = fold_gpt(8);
  const Cluster node = h100_node8();
  TrainingOptions opt;

  // One GPU: nothing to wait for, the step is its kernels back to back.
  TrainingConfig one = fold_layout(1, 1, 1, 6);
  ClusterSpec single = node.spec;
  single.gpus_per_node = 1;
  const Cluster gpu = build_cluster(single);
  const auto b1 = step_time_lower_bound_s(m, one, gpu, opt);
  REQUIRE(b1);
  const double s1 = simulate_training(m, one, gpu, opt).step_time_s;
  CHECK(*b1 == ctwin::test::rel_approx(s1, 1e-9));

  // Four stages of eight layers, 1F1B, m = 8: (m + p - 1)(f + b) for even stages, and the bound
  // counts the fill and drain that make up the p - 1; what remains is the stage-to-stage sends
  // (about 1% at eight layers a stage).
  const ModelSpec deep = fold_gpt(32);
  TrainingConfig pipe = fold_layout(1, 4, 1, 8);
  ClusterSpec four = node.spec;
  four.gpus_per_node = 4;
  const Cluster stages = build_cluster(four);
  const auto b4 = step_time_lower_bound_s(deep, pipe, stages, opt);
  REQUIRE(b4);
  const double s4 = simulate_training(deep, pipe, stages, opt).step_time_s;
  CHECK(*b4 <= s4);
  CHECK(s4 / *b4 - 1 < 0.02);
  // Without the fill and drain, the bound would be about m / (m + p - 1) = 8/11 of the step.
  CHECK(*b4 > 0.9 * s4);

  // Every layout of a small auto space on two nodes: the bound is never above the step.
  const Cluster two = fold_nodes(2);
  LayoutSpace space;
  space.micro_batch = {1};
  space.cp = {1, 2};
  space.virtual_stages = {1, 2};
  TrainingConfig base = fold_layout(1, 1, 16, 2);
  base.global_batch = 32;
  int checked = 0;
  for (const auto& c : enumerate_training_layouts(m, base, two, space)) {
    const auto b = step_time_lower_bound_s(m, c, two, opt);
    REQUIRE(b);
    const double s = simulate_training(m, c, two, opt).step_time_s;
    INFO(layout_label(c.parallel, c.micro_batch, c.recompute));
    CHECK(*b <= s * (1 + 1e-12));
    CHECK(*b > 0);
    ++checked;
  }
  CHECK(checked > 50);

  // Kernel noise may run a kernel faster than modelled: no bound.
  TrainingConfig noisy = one;
  noisy.noise.kernel_jitter = 0.1;
  CHECK_FALSE(step_time_lower_bound_s(m, noisy, gpu, opt));
}
