// realrun on a serving replica: the iterations it plans from the scheduler's limits, each
// iteration's op list (the serving cost model's own), the replay issued to the devices (a
// recording device checks every call and its order), the measurements file's serving steps, and
// what it refuses.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "calibrate/measurements.hpp"
#include "realrun/cpu_device.hpp"
#include "realrun/driver.hpp"
#include "sim/error.hpp"
#include "workloads/serving_memory.hpp"

#include "tiny_models.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::realrun;

namespace {

ClusterSpec cpu_cluster() {
  ClusterSpec c;
  c.name = "cpu";
  c.gpu.name = "cpu-rank";
  c.gpu.bf16_tflops = 0.05;
  c.gpu.tf32_tflops = 0.05;
  c.gpu.hbm_bytes = 4e9;
  c.gpu.hbm_gbyte_per_s = 10;
  c.gpu.pcie_gbyte_per_s = 5;
  c.gpus_per_node = 2;
  c.intra = IntraNodeFabric::pcie;
  c.intra_gbyte_per_s = 5;
  return c;
}

// The tiny Llama (h 64, 4 heads, 2 KV heads, MLP 160, vocabulary 128; 2 layers) served at TP 2
// on two CPU ranks: at most 4 sequences and 32 tokens an iteration, blocks of 16, sequences of
// up to 64 tokens, chunked prefill.
RealrunJob serving_job(std::vector<IterationShape> iterations = {}) {
  RealrunJob job;
  job.scenario_file = "serve.json";
  job.scenario = {{"name", "serve"}};
  job.cluster = cpu_cluster();
  ServingReplayJob s;
  s.deployment.model = test::tiny_llama(2);
  s.deployment.model.max_seq = 64;
  s.deployment.cluster = build_cluster(job.cluster);
  s.deployment.tp = 2;
  s.scheduler.max_num_seqs = 4;
  s.scheduler.max_num_batched_tokens = 32;
  s.scheduler.block_size = 16;
  s.scheduler.max_model_len = 64;
  s.scheduler.enable_chunked_prefill = true;
  job.serving = s;
  job.config.warmup = 1;
  job.config.repeats = 2;
  job.config.collective_min_bytes = 1024;
  job.config.collective_max_bytes = 4096;
  job.config.sweep = false;
  job.config.timeout_s = 30;
  job.config.iterations = std::move(iterations);
  return job;
}

IterationShape prefill(std::int64_t tokens, std::int64_t context = 0) { return {1, tokens, context, 0, 0}; }
IterationShape decode(std::int64_t batch, std::int64_t context) { return {0, 0, 0, batch, context}; }
IterationShape mixed(std::int64_t tokens, std::int64_t batch, std::int64_t context) {
  return {1, tokens, 0, batch, context};
}

std::string key(const OpCost& c) {
  return std::string(to_string(c.kind)) + " " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
         std::to_string(c.k) + " " + std::to_string(c.flops) + " " + std::to_string(c.bytes) + " " +
         std::to_string(c.kv_tokens);
}

// A device that runs nothing and records every kernel and collective it is given, in order, with
// its stream; every interval it is asked about lasts 1 ms.
class RecordingDevice final : public Device {
 public:
  explicit RecordingDevice(int rank) : rank_(rank) {}
  std::string name() const override { return "recording"; }
  int rank() const override { return rank_; }
  int streams() const override { return kStepStreams; }
  void create_comm(const CommSpec& spec, double) override { comms.push_back(spec); }
  void launch(int stream, const OpCost& op) override { calls.push_back(std::to_string(stream) + " k " + key(op)); }
  void collective(int stream, const CollectiveRequest& r) override {
    calls.push_back(std::to_string(stream) + " c " + to_string(r.op) + " " + std::to_string(r.comm) + " " +
                    std::to_string(r.bytes));
  }
  EventHandle record(int) override { return next_++; }
  void wait(int, EventHandle) override {}
  double elapsed_s(EventHandle, EventHandle) override { return 1e-3; }
  void synchronize() override {}
  std::vector<std::string> calls;
  std::vector<CommSpec> comms;

 private:
  int rank_;
  EventHandle next_ = 0;
};

}  // namespace

TEST_CASE("realrun plans a serving replica's iterations from max_num_batched_tokens, max_num_seqs and max_model_len") {
  SchedulerConfig s;
  s.max_num_seqs = 4;
  s.max_num_batched_tokens = 32;
  s.block_size = 16;
  s.max_model_len = 64;
  s.enable_chunked_prefill = true;
  // B = 32, S = 4, L = 64: chunks of 8, 16, 32 on an empty cache and 32 after 32; decodes of 1,
  // 2, 4 at 16 and 32; 2 decodes at 16 beside a 30-token chunk, 3 at 32 beside 29.
  const std::vector<IterationShape> all = {prefill(8),    prefill(16),   prefill(32),      prefill(32, 32),
                                           decode(1, 16), decode(1, 32), decode(2, 16),    decode(2, 32),
                                           decode(4, 16), decode(4, 32), mixed(30, 2, 16), mixed(29, 3, 32)};
  CHECK(default_serving_iterations(s, 1000) == all);
  // A cache of 6 blocks: 4 decodes of 32 tokens need 8, the second mixed 3 x 2 + 2 = 8.
  std::vector<IterationShape> fit = all;
  std::erase(fit, decode(4, 32));
  std::erase(fit, mixed(29, 3, 32));
  CHECK(default_serving_iterations(s, 6) == fit);
  // Without chunked prefill: no later chunk, nothing mixed.
  s.enable_chunked_prefill = false;
  const auto plain = default_serving_iterations(s, 1000);
  CHECK(plain.size() == 9);
  CHECK(std::none_of(plain.begin(), plain.end(), [](const IterationShape& x) { return x.prefill_context > 0; }));
  CHECK(std::none_of(plain.begin(), plain.end(), [](const IterationShape& x) { return x.kind() == "mixed"; }));
}

TEST_CASE(
    "a serving plan: each iteration the cost model's op list, its kernels once, the TP all-reduce and gather sizes") {
  const RealrunJob job = serving_job({decode(2, 20), mixed(6, 2, 10)});
  const RealrunPlan plan = plan_realrun(job);
  CHECK(plan.ranks == 2);
  REQUIRE(plan.iterations.size() == 2);
  CHECK(plan.iterations[0].shape == decode(2, 20));
  const ServingCostModel cost(job.serving->deployment);
  std::set<std::string> kernels;
  std::set<double> all_reduce, all_gather;
  for (const PlannedIteration& it : plan.iterations) {
    const auto ops = cost.iteration_ops(batch_shape(it.shape));
    REQUIRE(it.ops.size() == ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      CHECK(std::string(it.ops[i].name) == ops[i].name);
      CHECK(it.ops[i].collective == ops[i].collective);
      if (!ops[i].collective) {
        CHECK(key(it.ops[i].cost) == key(ops[i].cost));
        kernels.insert(key(ops[i].cost));
      } else {
        (ops[i].op == CollectiveOp::all_reduce ? all_reduce : all_gather).insert(ops[i].bytes);
      }
    }
  }
  // Decode 2: 2 tokens, 2 x 64 x 2 = 256 bytes an all-reduce, 2 x 128 x 2 = 512 gathered; mixed:
  // 8 tokens (1024 bytes), 3 rows of logits (768).
  CHECK(all_reduce == std::set<double>{256, 1024});
  CHECK(all_gather == std::set<double>{512, 768});
  CHECK(plan.ops.size() == kernels.size());
  for (const PlannedOp& op : plan.ops) {
    CHECK(op.origin == "step");
    CHECK(op.op.dtype == Dtype::bf16);
    CHECK_FALSE(op.name.empty());
    CHECK((op.phase == "decode" || op.phase == "mixed"));
  }
  REQUIRE(plan.comms.size() == 1);
  CHECK(plan.comms[0].label == "tp");
  CHECK(plan.comms[0].ranks == std::vector<int>{0, 1});
  std::map<int, std::set<double>> sizes;
  for (const PlannedCollective& c : plan.collectives) sizes[static_cast<int>(c.op)].insert(c.bytes);
  CHECK(sizes[static_cast<int>(CollectiveOp::all_reduce)] == std::set<double>{256, 1024, 4096});
  CHECK(sizes[static_cast<int>(CollectiveOp::all_gather)] == std::set<double>{512, 768, 1024, 4096});
}

TEST_CASE("the replay issues each iteration's ops in order on the compute stream, warm-up and repeats, on every rank") {
  const RealrunJob job = serving_job({prefill(8), decode(3, 40)});
  const RealrunPlan plan = plan_realrun(job);
  RecordingDevice d0(0), d1(1);
  const calibrate::Measurements m = run_realrun(job, plan, {&d0, &d1});
  const int runs = job.config.warmup + job.config.repeats;
  std::vector<std::string> expected;
  for (const PlannedOp& op : plan.ops) {
    for (int i = 0; i < runs; ++i) expected.push_back("0 k " + key(op.op));
  }
  for (const PlannedCollective& c : plan.collectives) {
    for (int i = 0; i < runs; ++i) {
      expected.push_back("0 c " + std::string(to_string(c.op)) + " 0 " + std::to_string(c.bytes));
    }
  }
  const ServingCostModel cost(job.serving->deployment);
  for (const IterationShape& shape : job.config.iterations) {
    const auto ops = cost.iteration_ops(batch_shape(shape));
    for (int i = 0; i < runs; ++i) {
      for (const IterationOp& op : ops) {
        expected.push_back(op.collective ? "0 c " + std::string(to_string(op.op)) + " 0 " + std::to_string(op.bytes)
                                         : "0 k " + key(op.cost));
      }
    }
  }
  CHECK(d0.calls == expected);
  CHECK(d1.calls == expected);
  REQUIRE(d0.comms.size() == 1);
  CHECK(d0.comms[0].ranks == std::vector<int>{0, 1});

  REQUIRE(m.steps.size() == 2);
  CHECK(m.steps[0].kind == "prefill");
  CHECK(m.steps[1].kind == "decode");
  REQUIRE(m.steps[1].shape.has_value());
  CHECK(*m.steps[1].shape == decode(3, 40));
  CHECK(m.steps[1].layout == nlohmann::json{{"tp", 2}, {"pp", 1}});
  CHECK(m.steps[1].stats.repeats == job.config.repeats);
  CHECK(m.steps[1].stats.median_s == test::rel_approx(1e-3, 1e-12));
  CHECK(m.steps[1].per_rank_median_s.size() == 2);
}

TEST_CASE("realrun replays serving iterations on two CPU ranks and the file reads back with their shapes") {
  const RealrunJob job = serving_job({prefill(32), decode(4, 48), mixed(28, 3, 30)});
  const RealrunPlan plan = plan_realrun(job);
  BackendOptions opt;
  opt.ranks = plan.ranks;
  auto devs = make_cpu_devices(opt);
  std::vector<Device*> d;
  for (auto& x : devs) d.push_back(x.get());
  const calibrate::Measurements m = run_realrun(job, plan, d);
  const auto back = calibrate::parse_measurements(calibrate::measurements_to_json(m), "m.json");
  REQUIRE(back.steps.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.steps[i].shape == job.config.iterations[i]);
    CHECK(back.steps[i].kind == job.config.iterations[i].kind());
    CHECK(back.steps[i].stats.median_s > 0);
  }
  CHECK(std::any_of(back.ops.begin(), back.ops.end(), [](const calibrate::OpMeasurement& o) {
    return o.name == "attention_decode" && o.phase == "decode" && o.op.kv_tokens == 4 * 48;
  }));
  for (const auto& c : back.collectives) CHECK(c.group == "tp");
}

TEST_CASE(
    "realrun refuses a serving iteration beyond the KV cache or the token budget, and replicas it cannot replay") {
  auto refusal = [](const RealrunJob& job) -> std::pair<std::string, std::string> {
    try {
      (void)plan_realrun(job);
    } catch (const InputError& e) {
      return {e.path, e.what()};
    }
    return {"", ""};
  };
  // A cache of 6 blocks: gpu_memory_utilization set so that 6.5 blocks' bytes are left over
  // (kv_capacity: hbm x utilization - weights - activations - non-torch, in whole blocks).
  RealrunJob small = serving_job({decode(2, 20), decode(4, 64)});
  ServingReplayJob& sj = *small.serving;
  const KvCapacity big = kv_capacity(sj.deployment, sj.scheduler);
  const double hbm = small.cluster.gpu.hbm_bytes;
  const double other = hbm * sj.scheduler.gpu_memory_utilization - big.available_bytes;
  sj.scheduler.gpu_memory_utilization = (other + 6.5 * big.block_bytes) / hbm;
  REQUIRE(kv_capacity(sj.deployment, sj.scheduler).num_gpu_blocks == 6);
  const auto [path, msg] = refusal(small);
  CHECK(path == "/realrun/iterations/1");
  CHECK(msg.find("16 KV blocks of 16 tokens") != std::string::npos);
  CHECK(msg.find("the KV cache's 6 blocks") != std::string::npos);
  // The planned iterations leave out what does not fit rather than fail.
  small.config.iterations.clear();
  const RealrunPlan fit = plan_realrun(small);
  for (const PlannedIteration& it : fit.iterations) CHECK(kv_blocks_needed(it.shape, 16) <= 6);
  CHECK(fit.iterations.size() == 10);  // less 4 decodes at 32 and 3 at 32 beside a chunk: 8 blocks each
  const auto [p1, m1] = refusal(serving_job({decode(2, 20), prefill(33)}));
  CHECK(p1 == "/realrun/iterations/1");
  CHECK(m1.find("max_num_batched_tokens (32)") != std::string::npos);
  RealrunJob pp = serving_job();
  pp.serving->deployment.pp = 2;
  CHECK(refusal(pp).first == "/serving/pipeline_parallel_size");
  RealrunJob spec = serving_job();
  spec.serving->scheduler.num_speculative_tokens = 2;
  CHECK(refusal(spec).first == "/serving/speculative_config");
  RealrunJob ranks = serving_job();
  ranks.config.ranks = 4;
  CHECK(refusal(ranks).first == "/realrun/ranks");
  // /realrun/iterations in a training scenario.
  RealrunJob train;
  train.scenario_file = "t.json";
  train.config.iterations = {decode(1, 1)};
  CHECK(refusal(train).first == "/realrun/iterations");
}

TEST_CASE("/realrun/iterations reads prefill, decode and mixed shapes, and names the bad one") {
  const Json j = Json::parse(R"({"iterations": [{"prefill": {"tokens": 128}}, {"decode": {"batch": 8, "context": 512}},
      {"prefill": {"seqs": 2, "tokens": 60, "context": 64}, "decode": {"batch": 4, "context": 100}}]})");
  const RealrunConfig c = read_realrun_config(JsonObject(j, "/realrun", "s.json"));
  CHECK(c.iterations == std::vector<IterationShape>{prefill(128), decode(8, 512), {2, 60, 64, 4, 100}});
  for (const char* bad : {R"({"iterations": [{"decode": {"batch": 8}}]})", R"({"iterations": [{}]})",
                          R"({"iterations": [{"prefill": {"tokens": 0}}]})", R"({"iterations": [{"decoder": {}}]})",
                          R"({"iterations": []})", R"({"iterations": {"decode": {"batch": 1, "context": 1}}})"}) {
    CAPTURE(bad);
    const Json b = Json::parse(bad);
    try {
      (void)read_realrun_config(JsonObject(b, "/realrun", "s.json"));
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.file == "s.json");
      CHECK(e.path.rfind("/realrun/iterations", 0) == 0);
    }
  }
}
