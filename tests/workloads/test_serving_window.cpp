// Sliding-window attention in serving: the windowed sums a batch carries (against brute-force
// loops and hand-worked cases), the cost model pricing each windowed layer over them, the KV
// cache's pool in full-attention pages with the windowed layers' share (hand-worked), and the
// KV a disaggregated transfer carries.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_iteration.hpp"
#include "workloads/serving_memory.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// sum of min(q, w) for q = first..last, one term at a time.
double brute_keys(std::int64_t first, std::int64_t last, std::int64_t w) {
  double s = 0;
  for (std::int64_t q = first; q <= last; ++q) s += static_cast<double>(std::min(q, w));
  return s;
}

Cluster preset(const std::string& name) {
  ClusterSpec s;
  REQUIRE(preset_cluster(name, 1, builtin_gpus(), s));
  apply_profile(builtin_profile(s.gpu.name), s);
  return build_cluster(s);
}

ServingDeployment gpt_oss(int tp, int pp = 1) {
  ServingDeployment d;
  d.model = builtin_models().models.at("gpt-oss-120b");
  d.cluster = preset("dgx-h100");
  d.overhead = builtin_profile("H100-SXM").serving;
  d.tp = tp;
  d.pp = pp;
  d.expert_parallel = tp > 1;
  return d;
}

}  // namespace

TEST_SUITE("serving sliding window") {
  TEST_CASE("windowed_keys: the closed form equals the sum term by term, below, across and above the window") {
    CHECK(windowed_keys(1, 10, 4) == 34);  // 1 + 2 + 3 + 4 x 7
    CHECK(windowed_keys(5, 5, 4) == 4);
    CHECK(windowed_keys(6, 5, 4) == 0);  // an empty range
    for (std::int64_t w : {1, 3, 16, 128}) {
      for (std::int64_t first : {1, 2, 7, 100, 127, 128, 129, 500}) {
        for (std::int64_t len : {1, 2, 31, 300}) {
          CAPTURE(w);
          CAPTURE(first);
          CAPTURE(len);
          CHECK(windowed_keys(first, first + len - 1, w) == brute_keys(first, first + len - 1, w));
        }
      }
    }
  }

  TEST_CASE("a batch's windowed sums: prefill chunks and decodes, by hand") {
    BatchShape b;
    b.window = 128;
    // 100 tokens after 50: queries at 51..150 see min(q, 128) keys:
    // (51 + 128) x 78 / 2 = 6,981 below the window, 22 x 128 = 2,816 above: 9,797. Keys read:
    // positions 1..150 (the first query, at 51, reaches back to 1), 150.
    add_prefill_chunk(b, 100, 50);
    CHECK(b.prefill_window_pairs == 9797);
    CHECK(b.prefill_window_kv_tokens == 150);
    CHECK(b.prefill_attended_pairs == 100 * 50 + 100 * 101 / 2);  // the full layers' unchanged
    // 10 tokens after 1,000: 10 x 128 pairs; keys read 1001 - 127 .. 1010: 137.
    add_prefill_chunk(b, 10, 1000);
    CHECK(b.prefill_window_pairs == 9797 + 1280);
    CHECK(b.prefill_window_kv_tokens == 150 + 137);
    // A decode at context 1,000 (k = 0): 128 keys scored and read; at context 60, 60.
    add_decode_sequence(b, 1000, 0);
    add_decode_sequence(b, 60, 0);
    CHECK(b.decode_window_pairs == 128 + 60);
    CHECK(b.decode_window_kv_tokens == 128 + 60);
    CHECK(b.decode_kv_tokens == 1060);
    // Verifying 1 + 2 tokens at context 1,000: queries at 998..1000, 3 x 128; keys 871..1000, 130.
    BatchShape s;
    s.window = 128;
    add_decode_sequence(s, 1000, 2);
    CHECK(s.decode_window_pairs == 384);
    CHECK(s.decode_window_kv_tokens == 130);
    // No window: the windowed sums stay empty.
    BatchShape n;
    add_prefill_chunk(n, 100, 50);
    add_decode_sequence(n, 1000, 0);
    CHECK(n.prefill_window_pairs == 0);
    CHECK(n.decode_window_kv_tokens == 0);
  }

  TEST_CASE("gpt-oss-120b: even layers price their attention over the window, odd ones over the context") {
    const ServingDeployment d = gpt_oss(4);
    const ServingCostModel cm(d);
    IterationShape sh;
    sh.decode_seqs = 8;
    sh.decode_context = 8192;
    sh.prefill_seqs = 1;
    sh.prefill_tokens = 2048;
    sh.prefill_context = 4096;
    const BatchShape b = batch_shape(sh, d.model.attention_window);
    int windowed = 0, full = 0;
    for (const IterationOp& o : cm.iteration_ops(b)) {
      const std::string name = o.name;
      if (name != "attention_decode" && name != "attention_prefill") continue;
      const bool win = o.layer % 2 == 0;  // full_attention_every 2: layers 1, 3, ... are full
      CAPTURE(o.layer);
      CAPTURE(name);
      if (name == "attention_decode") {
        // 8 sequences: 128 keys each windowed, 8,192 full, scored and read.
        CHECK(o.cost.kv_tokens == (win ? 8 * 128.0 : 8 * 8192.0));
        CHECK(o.cost.attended_pairs == (win ? 8 * 128.0 : 8 * 8192.0));
      } else {
        // 2,048 tokens after 4,096: windowed, every query sees 128 keys; reads 2,048 + 127.
        CHECK(o.cost.kv_tokens == (win ? 2048 + 127.0 : 4096 + 2048.0));
        CHECK(o.cost.attended_pairs == (win ? 2048 * 128.0 : 2048 * 4096.0 + 2048.0 * 2049 / 2));
      }
      (win ? windowed : full) += 1;
    }
    CHECK(windowed == 2 * 18);  // 18 windowed layers, a prefill and a decode kernel each
    CHECK(full == 2 * 18);
    // The priced iteration is the list's sum, and a window makes it cheaper than the same model
    // without one (attention_window 0).
    double sum = 0;
    for (const IterationOp& o : cm.iteration_ops(b)) sum += cm.op_seconds(o);
    const IterationTime it = cm.iteration(b);
    CHECK(sum == rel_approx(it.forward_s(), 1e-9));
    ServingDeployment no = d;
    no.model.attention_window = 0;
    const IterationTime full_it = ServingCostModel(no).iteration(batch_shape(sh));
    CHECK(it.decode_s < full_it.decode_s);
    CHECK(it.prefill_s < full_it.prefill_s);
    CHECK(it.comm_s == full_it.comm_s);  // the window changes no collective
    // A batch of a windowed model without the window is a programming error, not a price.
    CHECK_THROWS_AS(cm.iteration(batch_shape(sh)), std::logic_error);
  }

  TEST_CASE("gpt-oss-120b's KV pool: a block is 16 tokens of the 18 full layers, a windowed page one block") {
    const ServingDeployment d = gpt_oss(4);
    // Per token and layer: K and V of 8 KV heads of 64, 2 of the 8 heads on each of 4 ranks,
    // BF16: 2 x 2 x 64 x 2 = 512 B; a block 16 x 18 x 512 = 147,456 B.
    CHECK(kv_block_bytes(d, 16, 0) == 147456);
    const KvWindow w = kv_window(d);
    CHECK(w.tokens == 128);
    CHECK(w.blocks_per_page == 1);  // 18 windowed layers over 18 full
    // Two stages of 18 layers: layers 0..17 and 18..35, 9 windowed and 9 full each.
    const ServingDeployment p = gpt_oss(2, 2);
    CHECK(kv_block_bytes(p, 16, 0) == 16 * 9 * 2 * 4 * 64 * 2.0);
    CHECK(kv_window(p).blocks_per_page == 1);
    // A request's KV over all layers (each KV head once, BF16, 2 x 8 x 64 x 2 = 2,048 B a token and
    // layer): 1,000 tokens in the 18 full layers, the last 128 in the 18 windowed ones.
    CHECK(kv_bytes_of_context(d, 1000) == (18 * 1000.0 + 18 * 128.0) * 2048);
    CHECK(kv_bytes_of_context(d, 100) == 36 * 100.0 * 2048);
  }

  TEST_CASE("a windowed model's capacity: blocks from the full layers, max concurrency with the window's pages") {
    // A made-up model: the tiny Llama with 12 layers, window 8, every 6th layer full (layers 5 and
    // 11): 2 full and 10 windowed, 5 windowed pages a full one.
    ServingDeployment d;
    d.model = test::tiny_llama(12);
    d.model.attention_window = 8;
    d.model.full_attention_every = 6;
    d.model.max_seq = 64;
    d.cluster = test::h100_node8();
    d.overhead = builtin_profile("H100-SXM").serving;
    d.tp = 1;
    const KvWindow w = kv_window(d);
    CHECK(w.tokens == 8);
    CHECK(w.blocks_per_page == 5);
    SchedulerConfig s;
    s.block_size = 16;
    s.max_num_batched_tokens = 32;
    s.max_num_seqs = 8;
    const KvCapacity c = kv_capacity(d, s);
    REQUIRE(c.refusal.empty());
    // A block: 16 tokens x 2 full layers x K and V of 2 heads of 16, BF16 (128 B) = 4,096 B.
    CHECK(c.block_bytes == 4096);
    // A max_model_len request (64 tokens): 4 full pages; the windowed ones vLLM reserves,
    // min(8 - 1 + 32, 64) = 39 tokens -> 3 pages, one more: 4 pages x 5 = 20 blocks. 24 a request.
    CHECK(c.max_concurrency == rel_approx(static_cast<double>(c.num_gpu_blocks) / 24, 1e-12));
    // "GPU KV cache size" over the groups: blocks / (1 + 5), in tokens.
    CHECK(c.tokens == c.num_gpu_blocks / 6 * 16);
  }

  TEST_CASE("serving refuses what it does not model: every layer windowed, and a draft model with a window") {
    const ModelCatalog cat = builtin_models();
    const Cluster h100 = preset("dgx-h100");
    const auto error_path = [&](const ModelSpec& m, const std::string& text) -> std::string {
      const Json j = Json::parse(text);
      const std::string file = "scenario.json";  // JsonObject keeps a reference to its file name
      const JsonObject o(j, "/serving", file);
      try {
        (void)deployment_from_json(o, m, h100, cat, true);
      } catch (const InputError& e) {
        return e.path;
      }
      return "accepted";
    };
    ModelSpec m = cat.models.at("gpt-oss-120b");
    const std::string tp8 = R"({"tensor_parallel_size": 8, "enable_expert_parallel": true})";
    CHECK(error_path(m, tp8) == "accepted");
    m.full_attention_every = 0;
    CHECK(error_path(m, tp8) == "/model/full_attention_every");
    // A draft (the same vocabulary, so only the window refuses it) beside a windowed target.
    CHECK(error_path(cat.models.at("gpt-oss-120b"),
                     R"({"tensor_parallel_size": 8, "enable_expert_parallel": true,
                         "speculative_config": {"method": "draft_model", "model": "gpt-oss-120b"}})") ==
          "/serving/speculative_config/model");
  }
}
