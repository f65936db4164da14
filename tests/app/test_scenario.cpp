#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scenario.hpp"
#include "sim/error.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using nlohmann::json;

namespace {

json base() {
  return json::parse(R"({
    "name": "t", "kind": "training",
    "cluster": {"preset": "dgx-h100", "nodes": 1},
    "model": "llama3-8b",
    "training": {"micro_batch": 1, "global_batch": 16, "seq_len": 4096,
                 "parallelism": {"tp": 2, "pp": 1, "dp": 4}}
  })");
}

// Parses and returns the InputError, failing the test if none is thrown.
InputError error_of(const json& j, const std::vector<Override>& ov = {}) {
  try {
    parse_scenario(j.dump(), "bad.json", ov);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError for " << j.dump());
  return InputError("", "", "");
}

InputError error_of_text(const std::string& text) {
  try {
    parse_scenario(text, "bad.json");
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError");
  return InputError("", "", "");
}

}  // namespace

TEST_CASE("a good scenario loads the catalog's values into typed structs") {
  const Scenario s = parse_scenario(base().dump(), "good.json");
  // topology/catalog/gpus.json, H100-SXM; workloads/catalog/models.json, llama3-8b.
  CHECK(s.cluster.gpu.name == "H100-SXM");
  CHECK(s.cluster.gpu.bf16_tflops == 989);
  CHECK(s.cluster.gpus_per_node == 8);
  CHECK(s.cluster.nic_gbyte_per_s == 50);
  CHECK(training_job(s).model.layers == 32);
  CHECK(training_job(s).model.kv_heads == 8);
  CHECK(training_job(s).model.ffn_hidden == 14336);
  CHECK(training_job(s).model.vocab == 128256);
  CHECK(training_job(s).training.parallel.tp == 2);
  CHECK(training_job(s).training.parallel.dp == 4);
  CHECK(training_job(s).training.grad_accum() == 4);
  CHECK(training_job(s).training.recompute == Recompute::none);  // documented default
}

TEST_CASE("/network/algo and /network/protocol set NCCL's choices, per operation or for all") {
  json j = base();
  j["network"] = json::parse(R"({"algo": {"all_reduce": "tree", "all_gather": "ring"}, "protocol": "simple"})");
  const Scenario s = parse_scenario(j.dump(), "good.json");
  CHECK(s.collectives.where_applicable);
  CHECK(s.collectives.algo == CollectiveAlgo::automatic);
  CHECK(s.collectives.algo_by_op[static_cast<int>(CollectiveOp::all_reduce)] == CollectiveAlgo::tree);
  CHECK(s.collectives.algo_by_op[static_cast<int>(CollectiveOp::all_gather)] == CollectiveAlgo::ring);
  CHECK(s.collectives.algo_by_op[static_cast<int>(CollectiveOp::reduce_scatter)] == CollectiveAlgo::automatic);
  CHECK(s.collectives.protocol == Protocol::simple);
  j["network"] = json::parse(R"({"algo": "nvls"})");
  CHECK(parse_scenario(j.dump(), "good.json").collectives.algo == CollectiveAlgo::nvls);
}

TEST_CASE("--set overrides any key and is validated like the file") {
  const Scenario s = parse_scenario(base().dump(), "good.json",
                                    {parse_override("/training/parallelism/tp=4"),
                                     parse_override("/training/parallelism/dp=2"), parse_override("/model/layers=2")});
  CHECK(training_job(s).training.parallel.tp == 4);
  CHECK(training_job(s).model.layers == 2);
  CHECK(training_job(s).model.hidden == 4096);  // the rest of the preset stays
  auto e = error_of(base(), {parse_override("/training/parallelism/tp=3")});
  CHECK(e.path == "/training/parallelism/dp");
}

TEST_CASE("--set creates missing objects along the pointer and never overwrites a non-object") {
  REQUIRE_FALSE(base().contains("network"));
  const Scenario s = parse_scenario(base().dump(), "good.json", {parse_override("/network/fidelity=flow")});
  CHECK(s.fidelity == NetworkFidelity::flow);
  json root = base();
  apply_override(root, parse_override("/a/b/c=2"), "x.json");
  CHECK(root["a"] == json::parse(R"({"b": {"c": 2}})"));
  CHECK(root["training"]["micro_batch"] == 1);  // siblings stay
  auto e2 = error_of(base(), {parse_override("/name/here=1")});
  CHECK(e2.path == "/name/here");
  CHECK(std::string(e2.what()).find("/name is \"t\", not an object") != std::string::npos);
  auto e3 = error_of(base(), {parse_override("/training/micro_batch/x/y=1")});
  CHECK(e3.path == "/training/micro_batch/x/y");
  CHECK(std::string(e3.what()).find("/training/micro_batch is 1, not an object") != std::string::npos);
  CHECK(std::string(e3.what()).find("created") != std::string::npos);
  CHECK_THROWS_AS(parse_override("training.tp=2"), InputError);
}

TEST_CASE("bad scenarios each give one error naming the path, what was found and what is expected") {
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* path;
    const char* message;
  };
  const Case cases[] = {
      {"unknown top-level key", [](json& j) { j["clustr"] = j["cluster"]; }, "/clustr",
       "bad.json: /clustr: unknown key; did you mean \"cluster\"?"},
      {"unknown collective algorithm", [](json& j) { j["network"]["algo"]["all_reduce"] = "tre"; },
       "/network/algo/all_reduce", "found \"tre\"; did you mean \"tree\"?"},
      {"unknown operation for a protocol", [](json& j) { j["network"]["protocol"]["allreduce"] = "ll"; },
       "/network/protocol/allreduce", "unknown key; did you mean \"all_reduce\"?"},
      {"degraded link at the analytical fidelity",
       [](json& j) {
         j["cluster"]["degraded_links"] =
             json::array({{{"link", "node0.gpu1 -> node0.nvswitch"}, {"bandwidth_fraction", 0.5}}});
       },
       "/cluster/degraded_links", "degraded links at the analytical network fidelity"},
      {"degraded link the cluster lacks",
       [](json& j) {
         j["network"]["fidelity"] = "flow";
         j["cluster"]["degraded_links"] =
             json::array({{{"link", "node0.gpu9 -> node0.nvswitch"}, {"bandwidth_fraction", 0.5}}});
       },
       "/cluster/degraded_links/0/link",
       "no link \"node0.gpu9 -> node0.nvswitch\" in this cluster; did you mean \"node0.gpu0 -> node0.nvswitch\"?"},
      {"degraded link fraction out of range",
       [](json& j) {
         j["network"]["fidelity"] = "flow";
         j["cluster"]["degraded_links"] =
             json::array({{{"link", "node0.gpu1 -> node0.nvswitch"}, {"bandwidth_fraction", 0}}});
       },
       "/cluster/degraded_links/0/bandwidth_fraction", "found 0, out of range"},
      {"unknown nested key", [](json& j) { j["training"]["micro_bach"] = 1; }, "/training/micro_bach",
       "unknown key; did you mean \"micro_batch\"?"},
      {"wrong type", [](json& j) { j["training"]["micro_batch"] = "two"; }, "/training/micro_batch",
       "found \"two\"; expected an integer"},
      {"fractional integer", [](json& j) { j["training"]["seq_len"] = 4096.5; }, "/training/seq_len",
       "found 4096.5; expected an integer"},
      {"out of range", [](json& j) { j["cluster"]["nodes"] = 0; }, "/cluster/nodes",
       "found 0, out of range; expected an integer >= 1"},
      {"missing required key", [](json& j) { j["training"].erase("global_batch"); }, "/training/global_batch",
       "missing required key; expected an integer"},
      {"missing section", [](json& j) { j.erase("cluster"); }, "/cluster",
       "missing required key; expected a JSON object"},
      {"gpu count mismatch", [](json& j) { j["training"]["parallelism"]["dp"] = 8; }, "/training/parallelism/dp",
       "tp*pp*dp*cp = 2*1*8*1 = 16, but the cluster has 8 GPUs; expected tp*pp*dp*cp equal to nodes*gpus_per_node = 8"},
      {"tp not dividing heads",
       [](json& j) {
         j["training"]["parallelism"]["tp"] = 3;
         j["training"]["parallelism"].erase("dp");
         j["cluster"]["preset"] = "dgx-h100";
         j["cluster"]["gpus_per_node"] = 3;
       },
       "/training/parallelism/tp", "found 3, which does not divide the model's 32 attention heads"},
      {"batch not divisible", [](json& j) { j["training"]["global_batch"] = 10; }, "/training/global_batch",
       "found 10, not a multiple of micro_batch*dp = 1*4 = 4"},
      {"unknown preset with suggestion", [](json& j) { j["cluster"]["preset"] = "dgx-h10"; }, "/cluster/preset",
       "unknown cluster preset \"dgx-h10\"; did you mean \"dgx-h100\"?"},
      {"unknown model", [](json& j) { j["model"] = "lama3-8b"; }, "/model/preset",
       "unknown model \"lama3-8b\"; did you mean \"llama3-8b\"?"},
      {"unknown GPU", [](json& j) { j["cluster"]["gpu"] = "H300"; }, "/cluster/gpu", "unknown GPU \"H300\""},
      {"bad enum with suggestion", [](json& j) { j["training"]["recompute"] = "ful"; }, "/training/recompute",
       "found \"ful\"; did you mean \"full\"?"},
      {"seq longer than the model", [](json& j) { j["training"]["seq_len"] = 16384; }, "/training/seq_len",
       "found 16384, longer than the model's max_seq 8192"},
      {"layers not splitting into stages",
       [](json& j) {
         j["training"]["parallelism"] = {{"tp", 1}, {"pp", 3}, {"dp", 1}};
         j["cluster"]["gpus_per_node"] = 3;
         j["training"]["global_batch"] = 3;
       },
       "/training/parallelism/pp", "the model's 32 layers do not split evenly into pp*virtual_stages = 3 chunks"},
      {"virtual stages without interleaving",
       [](json& j) {
         j["training"]["parallelism"] = {{"tp", 1}, {"pp", 2}, {"dp", 4}, {"virtual_stages", 2}};
       },
       "/training/parallelism/virtual_stages", "found 2 with schedule \"1f1b\""},
      {"expert parallel on a dense model", [](json& j) { j["training"]["parallelism"]["ep"] = 2; },
       "/training/parallelism/ep", "found 2 but the model has no experts"},
      {"zero stage out of range", [](json& j) { j["training"]["parallelism"]["zero_stage"] = 4; },
       "/training/parallelism/zero_stage", "found 4, out of range; expected an integer >= 0 and <= 3"},
      {"a recompute layer count without full recomputation", [](json& j) { j["training"]["recompute_num_layers"] = 5; },
       "/training/recompute_num_layers", "found it with recompute \"none\"; expected recompute \"full\""},
      {"an unknown recompute method",
       [](json& j) {
         j["training"]["recompute"] = "full";
         j["training"]["recompute_method"] = "blocks";
       },
       "/training/recompute_method", "found \"blocks\""},
      {"FP8 parameters without FP8 compute",
       [](json& j) {
         j["training"]["precision"] = {{"fp8_param_gather", true}};
       },
       "/training/precision/fp8_param_gather", "found true with compute \"bf16\"; expected compute \"fp8\""},
      {"FP8 parameters under ZeRO-3",
       [](json& j) {
         j["training"]["precision"] = {{"compute", "fp8"}, {"fp8_param_gather", true}};
         j["training"]["parallelism"]["zero_stage"] = 3;
       },
       "/training/precision/fp8_param_gather", "found true with zero_stage 3"},
      {"unknown sharding framework",
       [](json& j) {
         j["training"]["parallelism"]["sharding"] = {{"framework", "megatron"}};
       },
       "/training/parallelism/sharding/framework", "found \"megatron\""},
      {"a DeepSpeed knob with FSDP",
       [](json& j) {
         j["training"]["parallelism"]["sharding"] = {{"framework", "fsdp1"}, {"stage3_prefetch_bucket_size", 1e6}};
       },
       "/training/parallelism/sharding/stage3_prefetch_bucket_size",
       "found a deepspeed key with framework \"fsdp1\"; expected framework \"deepspeed\", or no "
       "stage3_prefetch_bucket_size"},
      {"an FSDP2 knob with DeepSpeed",
       [](json& j) {
         j["training"]["parallelism"]["sharding"] = {{"framework", "deepspeed"}, {"reshard_after_forward", false}};
       },
       "/training/parallelism/sharding/reshard_after_forward", "found a fsdp2 key with framework \"deepspeed\""},
      {"a zero prefetch bucket",
       [](json& j) {
         j["training"]["parallelism"]["sharding"] = {{"framework", "deepspeed"}, {"stage3_prefetch_bucket_size", 0}};
       },
       "/training/parallelism/sharding/stage3_prefetch_bucket_size", "found 0, out of range"},
      {"sequence parallel without tp",
       [](json& j) {
         j["training"]["parallelism"] = {{"tp", 1}, {"dp", 8}, {"sequence_parallel", true}};
       },
       "/training/parallelism/sequence_parallel", "true with tp 1"},
      {"bad order string", [](json& j) { j["training"]["parallelism"]["order"] = "tp-dp-pp"; },
       "/training/parallelism/order", "found \"tp-dp-pp\"; expected the five of tp, cp, ep, dp, pp"},
      {"fp8 on a GPU without FP8",
       [](json& j) {
         j["cluster"]["preset"] = "dgx-a100";
         j["training"]["precision"] = {{"compute", "fp8"}};
       },
       "/training/precision/compute", "has no FP8 tensor cores"},
      {"unknown kind", [](json& j) { j["kind"] = "inference"; }, "/kind",
       "found \"inference\"; expected one of \"training\", \"serving\""},
      {"a serving scenario needs /serving", [](json& j) { j["kind"] = "serving"; }, "/serving",
       "missing required key; expected an object: a serving scenario needs it"},
      {"a training scenario takes no /traffic", [](json& j) { j["traffic"] = json::object(); }, "/traffic",
       "found in a training scenario"},
      {"catalog entry of the wrong type",
       [](json& j) {
         j["catalog"] = {{"gpus", {{"X", 3}}}};
       },
       "/catalog/gpus/X", "found 3; expected a JSON object"},
      {"catalog override out of range",
       [](json& j) {
         j["catalog"] = {{"gpus", {{"H100-SXM", {{"gemm_efficiency", 1.5}}}}}};
       },
       "/catalog/gpus/H100-SXM/gemm_efficiency", "found 1.5, out of range"},
      {"model object missing a field",
       [](json& j) {
         j["model"] = {{"layers", 2}, {"hidden", 256}, {"heads", 4}, {"ffn_hidden", 512}, {"vocab", 1000}};
       },
       "/model/max_seq", "missing required key"},
      {"kv heads not dividing heads",
       [](json& j) {
         j["model"] = {{"preset", "llama3-8b"}, {"kv_heads", 5}};
       },
       "/model/kv_heads", "found 5, which does not divide heads 32"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    json j = base();
    c.mutate(j);
    const InputError e = error_of(j);
    CHECK(e.path == c.path);
    CHECK(e.file == "bad.json");
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find(c.message) != std::string::npos, msg);
    CHECK(msg.find('\n') == std::string::npos);  // one line
  }
}

TEST_CASE("malformed JSON reports its line and column") {
  const auto e = error_of_text("{\n  \"name\": \"x\",\n  \"kind\": training\n}\n");
  // The parser stops inside the bad literal "training" (which starts at column 11).
  CHECK(std::string(e.what()).find("bad.json: malformed JSON at line 3, column 1") == 0);
}

TEST_CASE("a HuggingFace config.json gives the same model as the catalog's llama3-8b") {
  // tests/app/scenarios/llama3-8b-config.json holds the public values of
  // meta-llama/Meta-Llama-3-8B/config.json.
  json j = base();
  j["model"] = {{"hf_config", "llama3-8b-config.json"}};
  const Scenario hf = parse_scenario(j.dump(), ctwin::test::source_dir() + "/tests/app/scenarios/s.json");
  const Scenario cat = parse_scenario(base().dump(), "good.json");
  CHECK(training_job(hf).model.layers == training_job(cat).model.layers);
  CHECK(training_job(hf).model.hidden == training_job(cat).model.hidden);
  CHECK(training_job(hf).model.heads == training_job(cat).model.heads);
  CHECK(training_job(hf).model.kv_heads == training_job(cat).model.kv_heads);
  CHECK(training_job(hf).model.ffn_hidden == training_job(cat).model.ffn_hidden);
  CHECK(training_job(hf).model.vocab == training_job(cat).model.vocab);
  CHECK(training_job(hf).model.max_seq == training_job(cat).model.max_seq);
  CHECK(training_job(hf).model.tied_embeddings == training_job(cat).model.tied_embeddings);
  CHECK(training_job(hf).model.activation == Activation::swiglu);
  CHECK_FALSE(training_job(hf).model.moe.enabled());
}

TEST_CASE("a HuggingFace Mixtral config maps its experts") {
  json j = base();
  j["model"] = {{"hf_config", "mixtral-config.json"}};
  const Scenario s = parse_scenario(j.dump(), ctwin::test::source_dir() + "/tests/app/scenarios/s.json");
  CHECK(training_job(s).model.moe.experts == 8);
  CHECK(training_job(s).model.moe.top_k == 2);
  CHECK(training_job(s).model.moe.expert_ffn_hidden == 14336);
}

TEST_CASE("the builtin catalogs parse and carry a source for every entry") {
  const auto gpus = builtin_gpus();
  const auto models = builtin_models();
  CHECK(gpus.gpus.size() == 7);
  CHECK(models.models.size() >= 10);
  // Pairs, not structured bindings: clang 14 cannot capture those (CHECK_MESSAGE is a lambda).
  for (const auto& g : gpus.gpus) CHECK_MESSAGE(!g.second.source.empty(), g.first);
  for (const auto& m : models.models) CHECK_MESSAGE(!m.second.source.empty(), m.first);
}

TEST_CASE(
    "/training/cross_entropy and /training/logit_metric_passes reach the training config; bad values are refused") {
  const Scenario d = parse_scenario(base().dump(), "good.json");
  CHECK(training_job(d).training.cross_entropy == CrossEntropyKernel::fp32);  // Megatron-LM's default
  CHECK(training_job(d).training.logit_metric_passes == 0);
  const Scenario s = parse_scenario(
      base().dump(), "good.json",
      {parse_override("/training/cross_entropy=\"fused\""), parse_override("/training/logit_metric_passes=2")});
  CHECK(training_job(s).training.cross_entropy == CrossEntropyKernel::fused);
  CHECK(training_job(s).training.logit_metric_passes == 2);
  const Scenario n = parse_scenario(base().dump(), "good.json", {parse_override("/training/cross_entropy=\"native\"")});
  CHECK(training_job(n).training.cross_entropy == CrossEntropyKernel::native);
  auto e = error_of(base(), {parse_override("/training/cross_entropy=\"liger\"")});
  CHECK(e.path == "/training/cross_entropy");
  e = error_of(base(), {parse_override("/training/logit_metric_passes=-1")});
  CHECK(e.path == "/training/logit_metric_passes");
}

TEST_CASE(
    "/training/precision's byte counts reach the optimizer states: Nemotron-4 340B's BF16 states are half FP32's") {
  // The case's distributed Adam keeps a BF16 parameter copy and two BF16 moments (master_bytes 2,
  // optimizer_state_bytes 4); with FP32 ones (4 and 8) the same shards take twice the bytes, and
  // BF16 gradients (grad_bytes 2) half of FP32 ones (4).
  const auto file = std::filesystem::path(ctwin::test::source_dir()) / "scenarios" / "validation" /
                    "nemo-nemotron4-340b-fp8-128xh100.json";
  const auto memory = [&](std::vector<Override> sets) {
    const Scenario sc = load_scenario(file.string(), sets);
    return simulate_training(training_job(sc).model, training_job(sc).training, build_cluster(sc.cluster), {}).memory;
  };
  const auto bf16 = memory({});
  const auto fp32 = memory({parse_override("/training/precision/master_bytes=4"),
                            parse_override("/training/precision/optimizer_state_bytes=8"),
                            parse_override("/training/precision/grad_bytes=4")});
  CHECK(bf16.optimizer > 0);
  CHECK(fp32.optimizer == rel_approx(2 * bf16.optimizer, 1e-12));
  CHECK(fp32.grads == rel_approx(2 * bf16.grads, 1e-12));
  CHECK_FALSE(bf16.oom);
}
