// Uneven pipeline splits (workloads/pipeline_split.hpp) against hand-worked splits: pipeline_layers
// per (virtual) stage, Megatron-LM's decoder_first/last_pipeline_num_layers with the rest even over
// the middle stages, and account_for_embedding/loss_in_pipeline_split counting the embedding and
// the loss as one layer each. Then everything downstream: the layers each stage's GPU runs in the
// step program, each stage's parameters (closed form on the tiny Llama), and the layout errors.
#include <doctest/doctest.h>

#include "tiny_models.hpp"
#include "tolerance.hpp"

#include <set>
#include <string>
#include <vector>

#include "workloads/layout_check.hpp"
#include "workloads/memory.hpp"
#include "workloads/pipeline_split.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

Parallelism pipe(int pp, int v = 1) {
  Parallelism p;
  p.pp = pp;
  if (v > 1) {
    p.schedule = PipelineSchedule::interleaved;
    p.virtual_stages = v;
  }
  return p;
}

// The decoder layers GPU (tp 0, dp 0, stage) runs forward, from the step program.
std::set<int> forward_layers(const StepProgram& p, int stage) {
  std::set<int> out;
  for (const auto& op : p.ops) {
    const auto& g = p.gpus[op.gpu];
    if (g.pp == stage && g.tp == 0 && g.dp == 0 && op.phase == StepPhase::forward && op.layer >= 0)
      out.insert(op.layer);
  }
  return out;
}

std::set<int> range(int first, int count) {
  std::set<int> s;
  for (int l = first; l < first + count; ++l) s.insert(l);
  return s;
}

// One problem's field, or "" when the layout is fine.
std::string first_problem(const ModelSpec& m, const TrainingConfig& c) {
  ClusterSpec spec = ctwin::test::h100_node8().spec;
  spec.gpus_per_node = c.parallel.tp * c.parallel.pp * c.parallel.dp;  // exactly the layout's GPUs
  const auto probs = check_training_layout(m, c, build_cluster(spec));
  return probs.empty() ? "" : probs.front().field;
}

}  // namespace

TEST_CASE("pipeline split: even, per-stage list, Megatron first/last, embedding and loss as layers") {
  CHECK(pipeline_split(16, pipe(4)).layers == std::vector<int>{4, 4, 4, 4});
  Parallelism p = pipe(4);
  p.pipeline_layers = {2, 5, 5, 4};
  auto s = pipeline_split(16, p);
  CHECK(s.layers == std::vector<int>{2, 5, 5, 4});
  CHECK(s.first == std::vector<int>{0, 2, 7, 12});
  // 30 layers, first 6 and last 4: 20 left over 2 middle stages = 10 each.
  p = pipe(4);
  p.first_stage_layers = 6;
  p.last_stage_layers = 4;
  CHECK(pipeline_split(30, p).layers == std::vector<int>{6, 10, 10, 4});
  // Only the last given: 30 - 3 = 27 over the other 3 stages.
  p = pipe(4);
  p.last_stage_layers = 3;
  CHECK(pipeline_split(30, p).layers == std::vector<int>{9, 9, 9, 3});
  // 14 layers + embedding + loss = 16 "layers", 4 a stage; the first and last give one up.
  p = pipe(4);
  p.account_for_embedding = p.account_for_loss = true;
  CHECK(pipeline_split(14, p).layers == std::vector<int>{3, 4, 4, 3});
  // Interleaved: one entry per virtual stage (chunk * pp + stage); stage 0 holds entries 0 and 2.
  p = pipe(2, 2);
  p.pipeline_layers = {1, 3, 3, 1};
  s = pipeline_split(8, p);
  CHECK(s.stage_layers(0) == 4);
  CHECK(s.stage_layers(1) == 4);
  CHECK(s.first == std::vector<int>{0, 1, 4, 7});
}

TEST_CASE("pipeline split: each stage's GPU runs exactly its layers, also interleaved") {
  const ModelSpec m = ctwin::test::tiny_llama(8);
  TrainingConfig c = ctwin::test::tiny_layout(1, 4, 1, 4);
  c.parallel.pipeline_layers = {1, 3, 3, 1};
  auto p = build_training_step(m, c, ctwin::test::h100_node8(), TrainingOptions{});
  CHECK(forward_layers(p, 0) == range(0, 1));
  CHECK(forward_layers(p, 1) == range(1, 3));
  CHECK(forward_layers(p, 2) == range(4, 3));
  CHECK(forward_layers(p, 3) == range(7, 1));

  c = ctwin::test::tiny_layout(1, 2, 1, 4);
  c.parallel.schedule = PipelineSchedule::interleaved;
  c.parallel.virtual_stages = 2;
  c.parallel.pipeline_layers = {1, 3, 3, 1};  // chunks: stage 0 {0}, stage 1 {1,2,3}, stage 0 {4,5,6}, stage 1 {7}
  p = build_training_step(m, c, ctwin::test::h100_node8(), TrainingOptions{});
  CHECK(forward_layers(p, 0) == std::set<int>{0, 4, 5, 6});
  CHECK(forward_layers(p, 1) == std::set<int>{1, 2, 3, 7});

  // A stage may hold no decoder layer: it still passes activations on.
  c = ctwin::test::tiny_layout(1, 4, 1, 4);
  c.parallel.pipeline_layers = {0, 4, 4, 0};
  p = build_training_step(m, c, ctwin::test::h100_node8(), TrainingOptions{});
  CHECK(forward_layers(p, 0).empty());
  CHECK(forward_layers(p, 2) == range(4, 4));
  const auto r = simulate_training(m, c, ctwin::test::h100_node8(), {});
  CHECK(r.step_time_s > 0);
}

TEST_CASE("pipeline split: stage parameters and memory follow the stage's layers") {
  // Tiny Llama, tp 1: a layer is 12,288 attention + 30,720 MLP + 2 x 64 norm = 43,136 parameters;
  // the embedding (8,192) on stage 0; the final norm (64) and the untied LM head (8,192) on the last.
  constexpr double kLayer = 12288 + 30720 + 128;
  const ModelSpec m = ctwin::test::tiny_llama(8);
  TrainingConfig c = ctwin::test::tiny_layout(1, 4, 1, 4);
  c.parallel.first_stage_layers = 1;
  c.parallel.last_stage_layers = 1;  // 6 left: 3 on each middle stage
  CHECK(stage_params(m, c, 0) == rel_approx(kLayer + 8192, 1e-12));
  CHECK(stage_params(m, c, 1) == rel_approx(3 * kLayer, 1e-12));
  CHECK(stage_params(m, c, 2) == rel_approx(3 * kLayer, 1e-12));
  CHECK(stage_params(m, c, 3) == rel_approx(kLayer + 64 + 8192, 1e-12));
  // Activations per micro-batch: the stage's layers times one layer's.
  const double per_layer = activation_bytes_per_layer(m, c, false);
  const auto mem1 = estimate_stage_memory(m, c, 80e9, 1);
  CHECK(mem1.activations_per_microbatch == rel_approx(3 * per_layer, 1e-12));
  CHECK(estimate_stage_memory(m, c, 80e9, 0).activations_per_microbatch == rel_approx(per_layer, 1e-12));
}

TEST_CASE("pipeline split: layout errors name the key") {
  const ModelSpec m = ctwin::test::tiny_llama(8);
  auto base = [] { return ctwin::test::tiny_layout(1, 4, 1, 4); };
  TrainingConfig c = base();
  c.parallel.pipeline_layers = {2, 2, 2};
  CHECK(first_problem(m, c) == "parallelism/pipeline_layers");  // 3 entries for 4 stages
  c.parallel.pipeline_layers = {2, 2, 2, 3};
  CHECK(first_problem(m, c) == "parallelism/pipeline_layers");  // sums to 9, not 8
  c.parallel.pipeline_layers = {4, 5, -1, 0};
  CHECK(first_problem(m, c) == "parallelism/pipeline_layers/2");
  c.parallel.pipeline_layers = {2, 2, 2, 2};
  c.parallel.last_stage_layers = 2;
  CHECK(first_problem(m, c) == "parallelism/pipeline_layers");  // two ways at once
  c = base();
  c.parallel.first_stage_layers = 3;  // 5 left over 3 stages
  CHECK(first_problem(m, c) == "parallelism/decoder_first_pipeline_num_layers");
  c.parallel.first_stage_layers = 2;  // 6 over 3: fine
  CHECK(first_problem(m, c).empty());
  c.parallel.account_for_loss = true;
  CHECK(first_problem(m, c) == "parallelism/decoder_first_pipeline_num_layers");
  c = ctwin::test::tiny_layout(1, 1, 1, 4);
  c.parallel.last_stage_layers = 8;
  CHECK(first_problem(m, c) == "parallelism/decoder_last_pipeline_num_layers");  // pp 1
  c = ctwin::test::tiny_layout(1, 2, 1, 4);
  c.parallel.schedule = PipelineSchedule::interleaved;
  c.parallel.virtual_stages = 2;
  c.parallel.first_stage_layers = 1;
  CHECK(first_problem(m, c) == "parallelism/decoder_first_pipeline_num_layers");  // not with interleaved
  c = base();
  c.parallel.account_for_embedding = true;  // 9 over 4 stages
  CHECK(first_problem(m, c) == "parallelism/account_for_embedding_in_pipeline_split");
  c.parallel.account_for_loss = true;  // 10 over 4
  CHECK(first_problem(m, c) == "parallelism/account_for_embedding_in_pipeline_split");
  c = ctwin::test::tiny_layout(1, 2, 1, 4);
  c.parallel.account_for_embedding = c.parallel.account_for_loss = true;  // 10 over 2: 4 + 5... 5 - 1, 5 - 1
  CHECK(first_problem(m, c).empty());
  CHECK(pipeline_split(8, c.parallel).layers == std::vector<int>{4, 4});
}
