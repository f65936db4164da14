// A serving iteration op by op (ServingCostModel::iteration_ops, what `ctwin realrun` replays)
// against hand-counted lists of a tiny model, and against the iteration's own price; an
// iteration's shape (IterationShape) against the sums the simulator forms and the scheduler's
// limits.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/error.hpp"
#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_iteration.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// The tiny Llama (h 64, 4 heads of 16, 2 KV heads, SwiGLU MLP of 160, vocabulary 128), 2 layers.
ServingDeployment tiny(int tp, int pp = 1) {
  ServingDeployment d;
  d.model = test::tiny_llama(2);
  d.cluster = test::h100_node8();
  d.tp = tp;
  d.pp = pp;
  return d;
}

// One prompt computing a chunk of 6 tokens after 4 cached, and 2 sequences decoding at context 10.
IterationShape mixed() {
  IterationShape s;
  s.prefill_seqs = 1;
  s.prefill_tokens = 6;
  s.prefill_context = 4;
  s.decode_seqs = 2;
  s.decode_context = 10;
  return s;
}

std::vector<std::string> names(const std::vector<IterationOp>& ops) {
  std::vector<std::string> out;
  for (const auto& o : ops) out.emplace_back(o.name);
  return out;
}

}  // namespace

TEST_CASE("an iteration's shape: the chunk's and the decodes' sums as the simulator forms them, and its KV blocks") {
  const IterationShape s = mixed();
  CHECK(s.kind() == "mixed");
  CHECK(s.tokens() == 8);
  const BatchShape b = batch_shape(s);
  CHECK(b.prefill_seqs == 1);
  CHECK(b.prefill_tokens == 6);
  // Chunk token i (1..6) sees 4 + i keys: 5 + 6 + ... + 10 = 45; K/V read 4 + 6.
  CHECK(b.prefill_attended_pairs == 45);
  CHECK(b.prefill_kv_tokens == 10);
  CHECK(b.decode_seqs == 2);
  CHECK(b.decode_tokens == 2);
  CHECK(b.decode_attended_pairs == 20);
  CHECK(b.decode_kv_tokens == 20);
  // Blocks of 4 tokens: the prompt holds 10 (3 blocks), each decode 10 (3 blocks).
  CHECK(kv_blocks_needed(s, 4) == 9);
  CHECK(kv_blocks_needed(s, 16) == 3);
  IterationShape p;
  p.prefill_seqs = 2;
  p.prefill_tokens = 3;
  CHECK(p.kind() == "prefill");
  CHECK(p.tokens() == 6);
  CHECK(batch_shape(p).prefill_attended_pairs == 12);  // 2 x (1 + 2 + 3)
  IterationShape d;
  d.decode_seqs = 3;
  d.decode_context = 7;
  CHECK(d.kind() == "decode");
  CHECK(IterationShape{}.kind().empty());
  CHECK(iteration_label(s) == "prefill 1 x 6 after 4 + decode 2 at 10");
}

TEST_CASE(
    "the tiny Llama at TP 2, a mixed iteration: 9 GEMMs, 4 attention kernels, 5 all-reduces and the logits' gather") {
  const ServingCostModel cm(tiny(2));
  const auto ops = cm.iteration_ops(batch_shape(mixed()));
  const std::vector<std::string> layer = {"input_norm",
                                          "qkv",
                                          "attention_prefill",
                                          "attention_decode",
                                          "o_proj",
                                          "attention_all_reduce",
                                          "residual_add",
                                          "post_attention_norm",
                                          "mlp_up",
                                          "mlp_activation",
                                          "mlp_down",
                                          "mlp_all_reduce",
                                          "residual_add"};
  std::vector<std::string> expected = {"embedding", "embedding_all_reduce"};
  for (int l = 0; l < 2; ++l) expected.insert(expected.end(), layer.begin(), layer.end());
  for (const char* n : {"final_norm", "lm_head", "sampling", "logits_all_gather"}) expected.emplace_back(n);
  CHECK(names(ops) == expected);

  // T = 6 + 2 = 8 tokens; h 64; per TP rank: q 32 + k 16 + v 16 wide, 2 heads, MLP 2 x 80 up, 80 down.
  struct Gemm {
    const char* name;
    double m, n, k;
  };
  const std::vector<Gemm> gemms = {{"qkv", 8, 64, 64},      {"o_proj", 8, 64, 32},   {"mlp_up", 8, 160, 64},
                                   {"mlp_down", 8, 64, 80}, {"qkv", 8, 64, 64},      {"o_proj", 8, 64, 32},
                                   {"mlp_up", 8, 160, 64},  {"mlp_down", 8, 64, 80}, {"lm_head", 3, 64, 64}};
  std::size_t g = 0;
  int attention = 0, all_reduce = 0, all_gather = 0;
  for (const IterationOp& o : ops) {
    if (o.collective) {
      CHECK(o.ranks == std::vector<GpuId>{GpuId(0), GpuId(1)});
      if (o.op == CollectiveOp::all_reduce) {
        ++all_reduce;
        CHECK(o.bytes == 8 * 64 * 2);  // tokens x hidden, BF16
      } else {
        ++all_gather;
        CHECK(o.op == CollectiveOp::all_gather);
        CHECK(o.bytes == 3 * 128 * 2);  // 1 prompt + 2 decodes' logits over the vocabulary, BF16
      }
      continue;
    }
    if (o.cost.kind == OpKind::gemm) {
      REQUIRE(g < gemms.size());
      CAPTURE(o.name);
      CHECK(std::string(o.name) == gemms[g].name);
      CHECK(o.cost.m == gemms[g].m);
      CHECK(o.cost.n == gemms[g].n);
      CHECK(o.cost.k == gemms[g].k);
      CHECK(o.cost.flops == 2 * gemms[g].m * gemms[g].n * gemms[g].k);
      ++g;
    }
    if (o.cost.kind == OpKind::attention) {
      ++attention;
      const bool pre = std::string(o.name) == "attention_prefill";
      CHECK(o.part == (pre ? IterationPart::prefill_attention : IterationPart::decode_attention));
      CHECK(o.cost.query_tokens == (pre ? 6 : 2));
      CHECK(o.cost.attended_pairs == (pre ? 45 : 20));
      CHECK(o.cost.kv_tokens == (pre ? 10 : 20));
      // QK^T and PV: 2 FLOPs per multiply-add, 2 local heads of 16 + 16.
      CHECK(o.cost.flops == 2 * (pre ? 45.0 : 20.0) * 2 * 32);
    }
  }
  CHECK(g == gemms.size());
  CHECK(attention == 4);
  CHECK(all_reduce == 5);
  CHECK(all_gather == 1);
  CHECK(ops[2].layer == 0);
  CHECK(ops[15].layer == 1);
  CHECK(ops.back().layer == -1);
}

TEST_CASE("at TP 1 an iteration has no collectives; a decode-only one no prefill attention") {
  IterationShape d;
  d.decode_seqs = 4;
  d.decode_context = 12;
  const auto ops = ServingCostModel(tiny(1)).iteration_ops(batch_shape(d));
  int kernels = 0;
  for (const IterationOp& o : ops) {
    CHECK_FALSE(o.collective);
    CHECK(std::string(o.name) != "attention_prefill");
    ++kernels;
  }
  CHECK(kernels == 1 + 2 * 10 + 3);
  CHECK(ServingCostModel(tiny(1)).iteration_ops(BatchShape{}).empty());
}

TEST_CASE("two pipeline stages: each stage's layer, then its hand-off to the next, on its own ranks") {
  const ServingCostModel cm(tiny(2, 2));
  const auto ops = cm.iteration_ops(batch_shape(mixed()));
  int handoffs = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const IterationOp& o = ops[i];
    if (o.layer >= 0) CHECK(o.stage == o.layer);  // one layer per stage
    if (std::string(o.name) == "stage_handoff") {
      ++handoffs;
      CHECK(o.op == CollectiveOp::send_recv);
      CHECK(o.ranks == std::vector<GpuId>{GpuId(0), GpuId(2)});
      CHECK(o.bytes == 2 * 8 * 64 * 2);  // hidden states and residual, BF16
      CHECK(ops[i + 1].layer == 1);
    }
    if (o.collective && o.op == CollectiveOp::all_reduce && o.stage == 1) {
      CHECK(o.ranks == std::vector<GpuId>{GpuId(2), GpuId(3)});
    }
  }
  CHECK(handoffs == 1);
}

TEST_CASE("an iteration's ops priced one by one add up to its forward pass (dense, MoE, MLA; prefill, decode, mixed)") {
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-h100", 1, builtin_gpus(), s));
  apply_profile(builtin_profile(s.gpu.name), s);
  const Cluster h100 = build_cluster(s);
  IterationShape pre;
  pre.prefill_seqs = 2;
  pre.prefill_tokens = 512;
  pre.prefill_context = 256;
  IterationShape dec;
  dec.decode_seqs = 32;
  dec.decode_context = 900;
  const IterationShape shapes[] = {pre, dec, mixed()};
  for (const char* model : {"llama3-8b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-120b"}) {
    for (int tp : {1, 4, 8}) {
      ServingDeployment d;
      d.model = builtin_models().models.at(model);
      d.cluster = h100;
      d.overhead = builtin_profile("H100-SXM").serving;
      d.tp = tp;
      const ServingCostModel cm(d);
      for (const IterationShape& sh : shapes) {
        CAPTURE(model);
        CAPTURE(tp);
        CAPTURE(iteration_label(sh));
        const BatchShape b = batch_shape(sh, d.model.attention_window);
        double sum = 0, prefill_attention = 0, comm = 0;
        for (const IterationOp& o : cm.iteration_ops(b)) {
          const double t = cm.op_seconds(o);
          sum += t;
          if (o.part == IterationPart::prefill_attention) prefill_attention += t;
          if (o.part == IterationPart::comm) comm += t;
        }
        const IterationTime it = cm.iteration(b);
        CHECK(sum == rel_approx(it.forward_s(), 1e-9));
        CHECK(comm == rel_approx(it.comm_s, 1e-9));
        CHECK(it.forward_s() == rel_approx(it.total_s - it.overhead_s - it.draft_s, 1e-12));
        if (sh.decode_seqs == 0) CHECK(it.prefill_s == rel_approx(sum - comm, 1e-9));
        if (sh.prefill_seqs == 0) CHECK(prefill_attention == 0);
      }
    }
  }
}

TEST_CASE("an iteration the scheduler could never run is refused naming what it exceeds") {
  SchedulerConfig sc;
  sc.max_num_seqs = 4;
  sc.max_num_batched_tokens = 64;
  sc.block_size = 16;
  sc.max_model_len = 256;
  sc.enable_chunked_prefill = true;
  auto refusal = [&](const IterationShape& s, std::int64_t blocks) -> std::string {
    try {
      check_iteration_shape(s, sc, blocks, "f.json", "/realrun/iterations/0");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  IterationShape ok;
  ok.decode_seqs = 4;
  ok.decode_context = 32;  // 2 blocks each
  CHECK(refusal(ok, 8).empty());
  CHECK(refusal(ok, 7).find("8 KV blocks of 16 tokens") != std::string::npos);
  CHECK(refusal(ok, 7).find("at most the KV cache's 7 blocks") != std::string::npos);
  IterationShape many = ok;
  many.decode_seqs = 5;
  CHECK(refusal(many, 100).find("max_num_seqs (4)") != std::string::npos);
  IterationShape wide;
  wide.prefill_seqs = 1;
  wide.prefill_tokens = 65;
  CHECK(refusal(wide, 100).find("max_num_batched_tokens (64)") != std::string::npos);
  wide.prefill_tokens = 64;
  CHECK(refusal(wide, 100).empty());
  IterationShape mix = wide;
  mix.prefill_tokens = 63;
  mix.decode_seqs = 1;
  mix.decode_context = 257;
  CHECK(refusal(mix, 100).find("max_model_len (256)") != std::string::npos);
  mix.decode_context = 256;
  CHECK(refusal(mix, 100).empty());
  sc.enable_chunked_prefill = false;
  CHECK(refusal(mix, 100).find("without enable_chunked_prefill") != std::string::npos);
  IterationShape later = wide;
  later.prefill_context = 16;
  CHECK(refusal(later, 100).find("/realrun/iterations/0/prefill/context") != std::string::npos);
  CHECK(refusal(IterationShape{}, 100).find("an empty iteration") != std::string::npos);
}

TEST_CASE(
    "a profile's measured kernel and collective tables price a serving iteration, as they price a training step") {
  ServingDeployment d = tiny(2);
  const IterationShape sh = mixed();
  const BatchShape b = batch_shape(sh);
  Profile p = builtin_profile("H100-SXM");
  const double plain = ServingCostModel(with_profile(d, p)).iteration(b).forward_s();
  // The QKV GEMM measured at 1 s: two layers run it, in place of its roofline time.
  IterationOp qkv;
  // (Listed under the profile: its weight-read share is part of a GEMM's priced bytes.)
  for (const IterationOp& o : ServingCostModel(with_profile(d, p)).iteration_ops(b)) {
    if (std::string(o.name) == "qkv") qkv = o;
  }
  qkv.cost.dtype = Dtype::bf16;
  const double roofline = ServingCostModel(with_profile(d, p)).op_seconds(qkv);
  p.tables.kernels = {MeasuredKernel{qkv.cost, 1.0}};
  const ServingCostModel measured(with_profile(d, p));
  CHECK(measured.op_seconds(qkv) == 1.0);
  CHECK(measured.iteration(b).forward_s() == rel_approx(plain + 2 * (1.0 - roofline), 1e-9));
  // A flat 0.5 s curve for every 2-rank all-reduce: 5 all-reduces (embedding, 2 per layer). The
  // table measures NCCL, so it prices the calls that go to NCCL: here all of them.
  d.custom_all_reduce = false;
  p.tables.kernels.clear();
  p.tables.collectives = {MeasuredCollective{CollectiveOp::all_reduce, 2, false, {{1, 0.5}, {1e13, 0.5}}}};
  const IterationTime c = ServingCostModel(with_profile(d, p)).iteration(b);
  CHECK(c.comm_s > 5 * 0.5);
  CHECK(c.comm_s < 5 * 0.5 + 0.01);
}
