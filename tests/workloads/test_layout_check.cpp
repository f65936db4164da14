// check_training_layout: pure, every problem named by its field, in the order to fix them.
#include <doctest/doctest.h>

#include "workloads/layout_check.hpp"

using namespace ctwin;

namespace {

// Made-up small shapes, so the divisibility rules are easy to read off.
ModelSpec model() {
  ModelSpec m;
  m.name = "tiny";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 8;
  m.kv_heads = 2;
  m.ffn_hidden = 256;
  m.vocab = 1000;
  m.max_seq = 1024;
  return m;
}

Cluster cluster(int gpus) {
  ClusterSpec s;
  s.nodes = 1;
  s.gpus_per_node = gpus;
  return Cluster{s};
}

TrainingConfig training(int tp, int pp, int dp) {
  TrainingConfig t;
  t.parallel.tp = tp;
  t.parallel.pp = pp;
  t.parallel.dp = dp;
  t.micro_batch = 1;
  t.global_batch = 4 * dp;
  t.seq_len = 512;
  return t;
}

}  // namespace

TEST_CASE("a layout that fits has no problems") {
  CHECK(check_training_layout(model(), training(2, 2, 2), cluster(8)).empty());
}

TEST_CASE("the GPU count, heads and layer split are each named by their field") {
  auto p = check_training_layout(model(), training(2, 1, 2), cluster(8));
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "parallelism/dp");
  CHECK(p[0].what.find("= 4, but the cluster has 8 GPUs") != std::string::npos);

  p = check_training_layout(model(), training(3, 1, 1), cluster(3));
  REQUIRE(p.size() == 2);  // 3 divides neither the 8 heads nor, either way, the 2 KV heads
  CHECK(p[0].field == "parallelism/tp");
  CHECK(p[0].expected == "a divisor of 8");
  CHECK(p[1].field == "parallelism/tp");

  p = check_training_layout(model(), training(1, 3, 1), cluster(3));
  REQUIRE_FALSE(p.empty());
  CHECK(p[0].field == "parallelism/pp");
}

TEST_CASE("context parallelism needs 2*cp chunks; batch and sequence problems come last") {
  TrainingConfig t = training(1, 1, 2);
  t.parallel.cp = 3;
  t.seq_len = 768;  // 2*cp = 6 chunks of 128
  CHECK(check_training_layout(model(), t, cluster(6)).empty());
  t.seq_len = 1029;  // 3 * 343: divisible by cp, not by 2*cp, and over max_seq 1024
  t.global_batch = 3;
  auto p = check_training_layout(model(), t, cluster(6));
  REQUIRE(p.size() == 3);
  CHECK(p[0].field == "parallelism/cp");
  CHECK(p[1].field == "global_batch");
  CHECK(p[2].field == "seq_len");
}

TEST_CASE("the simulator runs a layout on the first GPUs of a larger cluster, but not on a smaller one") {
  // 2*2*2 = 8 GPUs: a scenario must give exactly 8; the simulator accepts 16 (GPUs 8..15 idle).
  CHECK_FALSE(check_training_layout(model(), training(2, 2, 2), cluster(16)).empty());
  CHECK_NOTHROW(require_simulable_layout(model(), training(2, 2, 2), cluster(16)));
  try {
    require_simulable_layout(model(), training(2, 2, 2), cluster(4));
    FAIL("a layout of 8 GPUs ran on 4");
  } catch (const LayoutError& e) {
    REQUIRE(!e.problems.empty());
    CHECK(e.problems.front().field == "parallelism/dp");
  }
}

TEST_CASE(
    "the interleaved schedule needs micro-batches per replica divisible by pp, in the scenario and the simulator") {
  TrainingConfig t = training(1, 2, 1);
  t.parallel.schedule = PipelineSchedule::interleaved;
  t.parallel.virtual_stages = 2;
  t.global_batch = 3;  // 3 micro-batches over pp = 2
  const auto p = check_training_layout(model(), t, cluster(2));
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "global_batch");
  CHECK_THROWS_AS(require_simulable_layout(model(), t, cluster(2)), LayoutError);
  t.global_batch = 4;
  CHECK(check_training_layout(model(), t, cluster(2)).empty());
}

TEST_CASE("the interleaved schedule with one virtual stage is refused, not run as 1F1B under its name") {
  TrainingConfig t = training(1, 2, 1);
  t.parallel.schedule = PipelineSchedule::interleaved;
  t.parallel.virtual_stages = 1;
  t.global_batch = 4;
  const auto p = check_training_layout(model(), t, cluster(2));
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "parallelism/virtual_stages");
  CHECK(p[0].what.find("at least 2") != std::string::npos);
  CHECK_THROWS_AS(require_simulable_layout(model(), t, cluster(2)), LayoutError);
  t.parallel.virtual_stages = 2;
  CHECK(check_training_layout(model(), t, cluster(2)).empty());
}

TEST_CASE("schedule parameters: each misuse is refused under its own key") {
  // virtual_stages without the interleaved schedule.
  TrainingConfig t = training(1, 2, 1);
  t.parallel.virtual_stages = 2;
  auto p = check_training_layout(model(), t, cluster(2));
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "parallelism/virtual_stages");
  CHECK(p[0].what.find("schedule \"1f1b\"") != std::string::npos);
  // Interleaved without a pipeline.
  t = training(1, 1, 2);
  t.parallel.schedule = PipelineSchedule::interleaved;
  t.parallel.virtual_stages = 2;
  p = check_training_layout(model(), t, cluster(2));
  REQUIRE_FALSE(p.empty());
  CHECK(p[0].field == "parallelism/schedule");
  // 4 layers do not split into pp*v = 2*4 = 8 chunks: named as virtual_stages, the uneven split offered.
  t = training(1, 2, 1);
  t.parallel.schedule = PipelineSchedule::interleaved;
  t.parallel.virtual_stages = 4;
  t.global_batch = 4;
  p = check_training_layout(model(), t, cluster(2));
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "parallelism/virtual_stages");
  CHECK(p[0].what.find("8 chunks") != std::string::npos);
  CHECK(p[0].expected.find("pipeline_layers") != std::string::npos);
}
