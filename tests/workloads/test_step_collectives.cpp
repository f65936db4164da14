// The collectives of one training step, per group, counted and sized against closed forms.
//
// References: Megatron-LM's tensor parallelism (Shoeybi et al. 2019, Sec. 3: per layer an
// all-reduce after attention and after the MLP in forward, and their conjugates in backward,
// each of the s*b*h activations); sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2:
// each all-reduce becomes an all-gather and a reduce-scatter of the same s*b*h tensor);
// data-parallel gradient reduction (PyTorch DDP / Megatron: the gradients of every parameter
// the GPU holds, once per step after the last micro-batch); ZeRO (Rajbhandari et al. 2020:
// stage 1 reduce-scatters gradients and all-gathers the updated parameters; stages 2 and 3
// keep only a gradient shard, so they reduce-scatter every micro-batch (DeepSpeed); stage 3
// all-gathers each layer's parameters before its forward and its backward); pipeline
// transfers of one micro-batch's s*b*h activations (Narayanan et al. 2021).
//
// The model deliberately leaves out: the vocabulary-parallel cross-entropy's small all-reduces
// (s*b floats each) and ZeRO-3's gathers of the embedding and LM head.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "topology/cluster.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;
using Phase = StepCollective::Phase;

namespace {

// Tiny Llama-style model, counted by hand: per layer q, o 64 x 64, k, v 64 x 32 (attention
// 12,288), SwiGLU MLP 3 x 64 x 160 (30,720), two RMSNorm scales (128). Embedding and LM head
// 128 x 64 = 8,192 each, final norm 64.
constexpr double kAttn = 12288, kMlp = 30720, kNorms = 128, kVocab = 8192, kFinal = 64;
constexpr double kLayer = kAttn + kMlp + kNorms;
constexpr int kLayers = 4;
constexpr double kParams = kLayers * kLayer + 2 * kVocab + kFinal;  // 188,992
// One micro-batch's activations: s = 32 tokens x b = 2 sequences x h = 64 x 2 bytes.
constexpr double kSbh2 = 32 * 2 * 64 * 2;

ModelSpec tiny(bool tied = false) {
  ModelSpec m = ctwin::test::tiny_llama(kLayers);
  m.tied_embeddings = tied;
  return m;
}

Cluster node8() { return ctwin::test::h100_node8(); }

TrainingConfig layout(int tp, int pp, int dp, int micro_batches, int zero = 0, bool sp = false) {
  TrainingConfig c = ctwin::test::tiny_layout(tp, pp, dp, micro_batches);
  c.parallel.zero_stage = zero;
  c.parallel.sequence_parallel = sp;
  return c;
}

std::vector<StepCollective> step(const ModelSpec& m, const TrainingConfig& c) {
  TrainingOptions opt;
  opt.trace = true;
  return simulate_training(m, c, node8(), opt).collectives;
}

struct Filter {
  int rank = 0;
  CommGroup group = CommGroup::tp;
  int op = -1;  // -1: any
  int phase = -1;
  bool layers_only = false;
};

std::vector<StepCollective> select(const std::vector<StepCollective>& all, const Filter& f) {
  std::vector<StepCollective> out;
  for (const auto& c : all) {
    if (c.rank != f.rank || c.group != f.group) continue;
    if (f.op >= 0 && static_cast<int>(c.op) != f.op) continue;
    if (f.phase >= 0 && static_cast<int>(c.phase) != f.phase) continue;
    if (f.layers_only && c.layer < 0) continue;
    out.push_back(c);
  }
  return out;
}

double total_bytes(const std::vector<StepCollective>& v) {
  double b = 0;
  for (const auto& c : v) b += c.bytes;
  return b;
}

int op(CollectiveOp o) { return static_cast<int>(o); }
int ph(Phase p) { return static_cast<int>(p); }

}  // namespace

TEST_CASE("TP = 2 without SP: each layer all-reduces s*b*h*2 bytes twice in forward and twice in backward") {
  const int m = 2;
  const auto all = step(tiny(), layout(2, 1, 1, m));
  const auto fwd = select(all, {0, CommGroup::tp, op(CollectiveOp::all_reduce), ph(Phase::forward), true});
  const auto bwd = select(all, {0, CommGroup::tp, op(CollectiveOp::all_reduce), ph(Phase::backward), true});
  CHECK(fwd.size() == 2 * kLayers * m);
  CHECK(bwd.size() == 2 * kLayers * m);
  for (const auto& c : fwd) CHECK(c.name == "tp_g");  // after the row-parallel attention output and MLP down
  for (const auto& c : bwd) CHECK(c.name == "tp_f");  // before the column-parallel QKV and MLP up
  for (const auto* v : {&fwd, &bwd}) {
    for (const auto& c : *v) {
      CHECK(c.bytes == kSbh2);
      CHECK(c.group_size == 2);
    }
  }
  // No sequence-parallel collectives without SP.
  CHECK(select(all, {0, CommGroup::tp, op(CollectiveOp::all_gather)}).empty());
  CHECK(select(all, {0, CommGroup::tp, op(CollectiveOp::reduce_scatter)}).empty());
  // The column-parallel LM head's input gradient: one more all-reduce per micro-batch in backward.
  const auto head = select(all, {0, CommGroup::tp, op(CollectiveOp::all_reduce), ph(Phase::backward)});
  CHECK(head.size() - bwd.size() == m);
}

TEST_CASE("TP = 2 with SP: each layer all-gathers twice and reduce-scatters twice per pass, each of s*b*h*2 bytes") {
  const int m = 2;
  const auto all = step(tiny(), layout(2, 1, 1, m, 0, true));
  for (Phase p : {Phase::forward, Phase::backward}) {
    CAPTURE(ph(p));
    const auto ag = select(all, {0, CommGroup::tp, op(CollectiveOp::all_gather), ph(p), true});
    const auto rs = select(all, {0, CommGroup::tp, op(CollectiveOp::reduce_scatter), ph(p), true});
    CHECK(ag.size() == 2 * kLayers * m);
    CHECK(rs.size() == 2 * kLayers * m);
    for (const auto* v : {&ag, &rs}) {
      for (const auto& c : *v) CHECK(c.bytes == kSbh2);  // nccl-tests size: the gathered tensor
    }
  }
  CHECK(select(all, {0, CommGroup::tp, op(CollectiveOp::all_reduce), -1, true}).empty());
  // Conjugates: g (after a row-parallel GEMM) reduce-scatters in forward and all-gathers in
  // backward; f (before a column-parallel GEMM) the reverse.
  for (const auto& c : select(all, {0, CommGroup::tp, -1, -1, true})) {
    CAPTURE(c.name);
    const bool fwd = c.phase == Phase::forward;
    if (c.name == "tp_reduce_scatter") {
      CHECK(c.op == (fwd ? CollectiveOp::reduce_scatter : CollectiveOp::all_gather));
    } else {
      CHECK(c.name == "tp_all_gather");
      CHECK(c.op == (fwd ? CollectiveOp::all_gather : CollectiveOp::reduce_scatter));
    }
  }
}

TEST_CASE("TP = 1 issues no tensor-parallel collectives") {
  CHECK(select(step(tiny(), layout(1, 1, 2, 2)), {0, CommGroup::tp}).empty());
}

TEST_CASE("DP = 1 reduces no gradients, at every ZeRO stage") {
  for (int zero : {0, 1, 2, 3}) {
    CAPTURE(zero);
    CHECK(select(step(tiny(), layout(1, 1, 1, 2, zero)), {0, CommGroup::dp}).empty());
  }
}

TEST_CASE("DP = 2: gradients of every parameter, 2 bytes each, all-reduced once per step after the last micro-batch") {
  const int m = 3;
  const auto all = step(tiny(), layout(1, 1, 2, m));
  const auto dp = select(all, {0, CommGroup::dp});
  REQUIRE(!dp.empty());
  CHECK(total_bytes(dp) == rel_approx(2 * kParams, 1e-12));
  for (const auto& c : dp) {
    CHECK(c.op == CollectiveOp::all_reduce);
    CHECK(c.group_size == 2);
    CHECK(c.micro_batch == m - 1);
  }
}

TEST_CASE("DP gradient bytes per GPU are 2 x its stage's parameters / tp (TP = 2, PP = 2, DP = 2)") {
  const auto all = step(tiny(), layout(2, 2, 2, 4));
  // Stage 0 (rank 0): 2 layers with attention and MLP split over TP, norms replicated, and half
  // the embedding. Stage 1 (rank 4 in tp-dp-pp order): 2 layers, half the LM head, final norm.
  const double stage0 = 2 * ((kAttn + kMlp) / 2 + kNorms) + kVocab / 2;
  const double stage1 = 2 * ((kAttn + kMlp) / 2 + kNorms) + kVocab / 2 + kFinal;
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) == rel_approx(2 * stage0, 1e-12));
  CHECK(total_bytes(select(all, {4, CommGroup::dp})) == rel_approx(2 * stage1, 1e-12));
  // Closed form: 2 bytes x params / (tp pp), up to the replicated norms.
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) + total_bytes(select(all, {4, CommGroup::dp})) ==
        rel_approx(2 * kParams / 2 + 2 * (kLayers * kNorms + kFinal) / 2, 1e-12));
}

TEST_CASE("ZeRO-1: one gradient reduce-scatter per step, then one all-gather of the updated parameters") {
  const int m = 3;
  const auto all = step(tiny(), layout(1, 1, 2, m, 1));
  const auto rs = select(all, {0, CommGroup::dp, op(CollectiveOp::reduce_scatter)});
  const auto ag = select(all, {0, CommGroup::dp, op(CollectiveOp::all_gather)});
  CHECK(total_bytes(rs) == rel_approx(2 * kParams, 1e-12));
  for (const auto& c : rs) CHECK(c.micro_batch == m - 1);
  REQUIRE(ag.size() == 1);
  CHECK(ag[0].bytes == rel_approx(2 * kParams, 1e-12));
  CHECK(ag[0].phase == Phase::step);
  CHECK(select(all, {0, CommGroup::dp, op(CollectiveOp::all_reduce)}).empty());
}

TEST_CASE(
    "ZeRO-2: gradients reduce-scattered after every micro-batch (m x 2 bytes per parameter), parameters gathered "
    "once") {
  const int m = 3;
  const auto all = step(tiny(), layout(1, 1, 2, m, 2));
  const auto rs = select(all, {0, CommGroup::dp, op(CollectiveOp::reduce_scatter)});
  CHECK(total_bytes(rs) == rel_approx(m * 2 * kParams, 1e-12));
  std::set<int> mbs;
  for (const auto& c : rs) mbs.insert(c.micro_batch);
  CHECK(mbs == std::set<int>{0, 1, 2});
  const auto ag = select(all, {0, CommGroup::dp, op(CollectiveOp::all_gather)});
  REQUIRE(ag.size() == 1);
  CHECK(ag[0].bytes == rel_approx(2 * kParams, 1e-12));
}

TEST_CASE(
    "ZeRO-3: each layer's parameters gathered before its forward and its backward, gradients scattered per "
    "micro-batch") {
  const int m = 2;
  const auto all = step(tiny(), layout(1, 1, 2, m, 3));
  const auto ag = select(all, {0, CommGroup::dp, op(CollectiveOp::all_gather)});
  CHECK(ag.size() == 2 * kLayers * m);
  for (const auto& c : ag) {
    CHECK(c.name == "fsdp_all_gather");
    CHECK(c.bytes == rel_approx(2 * kLayer, 1e-12));
    CHECK(c.layer >= 0);
  }
  const auto rs = select(all, {0, CommGroup::dp, op(CollectiveOp::reduce_scatter)});
  CHECK(total_bytes(rs) == rel_approx(m * 2 * kParams, 1e-12));
  // ZeRO-3 flushes per layer: at least one reduce-scatter per layer per micro-batch.
  CHECK(rs.size() >= kLayers * m);
}

TEST_CASE("PP = 2: each micro-batch sends s*b*h*2 bytes of activations forward and of gradients back") {
  const int m = 4;
  const auto all = step(tiny(), layout(1, 2, 1, m));
  // Stage 0 is rank 0, stage 1 rank 1 (dp = tp = 1).
  const auto s0 = select(all, {0, CommGroup::pp});
  const auto s1 = select(all, {1, CommGroup::pp});
  auto count = [](const std::vector<StepCollective>& v, const std::string& name) {
    int n = 0;
    for (const auto& c : v) n += c.name == name;
    return n;
  };
  CHECK(count(s0, "send_activations") == m);
  CHECK(count(s0, "recv_grads") == m);
  CHECK(count(s1, "recv_activations") == m);
  CHECK(count(s1, "send_grads") == m);
  CHECK(s0.size() == 2 * m);
  for (const auto* v : {&s0, &s1}) {
    for (const auto& c : *v) {
      CHECK(c.op == CollectiveOp::send_recv);
      CHECK(c.bytes == kSbh2);
      CHECK(c.group_size == 2);
    }
  }
}

TEST_CASE("tied embeddings, PP = 1: the shared embedding/LM head gradient is reduced once") {
  const auto all = step(tiny(true), layout(1, 1, 2, 2));
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) == rel_approx(2 * (kParams - kVocab), 1e-12));
}

TEST_CASE("tied embeddings, PP = 2: the last stage reduces its LM head copy's gradient over DP too") {
  const auto all = step(tiny(true), layout(1, 2, 2, 2));
  // tp-dp-pp order: stage 0 rank 0, stage 1 rank 2.
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) == rel_approx(2 * (2 * kLayer + kVocab), 1e-12));
  CHECK(total_bytes(select(all, {2, CommGroup::dp})) == rel_approx(2 * (2 * kLayer + kVocab + kFinal), 1e-12));
}

namespace {

// The optimizer step's kernel on GPU 0, from the trace (kind "optimizer").
TraceEvent optimizer_event(const TrainingResult& r) {
  const Trace& t = r.trace;
  for (const auto& e : t.events) {
    if (t.str(e.kind) == "optimizer" && t.str(t.lanes[e.lane].process) == "gpu 0") return e;
  }
  FAIL("no optimizer kernel on gpu 0");
  return {};
}

}  // namespace

TEST_CASE("the Adam step streams 28 bytes per parameter of its shard at HBM bandwidth x efficiency, plus a launch") {
  // Mixed-precision Adam per parameter: read the bf16 gradient (2), read and write the fp32
  // master weight (4 + 4), read and write both fp32 moments (8 + 8), write the bf16 weight (2).
  // Memory-bound: time = bytes / (3,350 GB/s x 0.85) + 2 us (the test GPU's figures).
  constexpr double kAdamBytes = 2 + 4 + 4 + 8 + 8 + 2;
  TrainingOptions opt;
  opt.trace = true;
  for (int zero : {0, 1}) {
    CAPTURE(zero);
    const auto r = simulate_training(tiny(), layout(1, 1, 2, 2, zero), node8(), opt);
    const TraceEvent e = optimizer_event(r);
    const double shard = zero >= 1 ? kParams / 2 : kParams;  // ZeRO-1 updates 1/dp of the parameters
    CHECK(e.bytes == rel_approx(kAdamBytes * shard, 1e-6));
    CHECK(e.dur_ps * 1e-12 == rel_approx(kAdamBytes * shard / (3350e9 * 0.85) + 2e-6, 1e-6));
  }
}

namespace {

// A GPT-style model (LayerNorm with biases, GELU MLP with biases, learned positions), by hand:
// per layer attention 4 x 64^2 + QKV and output biases 3 x 64 + 64 (16,640); MLP 2 x 64 x 256
// + biases 256 + 64 (33,088); two LayerNorms of scale and bias 2 x 128. Token embedding and
// LM head 128 x 64 each, positions 32 x 64, final LayerNorm 128.
constexpr double kGptLayer = 16640 + 33088 + 256;
constexpr double kGptParams = 4 * kGptLayer + 2 * 8192 + 2048 + 128;  // 218,496

ModelSpec tiny_gpt() { return ctwin::test::tiny_gpt(true); }

}  // namespace

TEST_CASE("DP = 2, GPT-style model: LayerNorm biases, positions and final norm are reduced too (2 x 218,496 bytes)") {
  const auto all = step(tiny_gpt(), layout(1, 1, 2, 2));
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) == rel_approx(2 * kGptParams, 1e-12));
}

TEST_CASE("ZeRO-3, GPT-style model: each layer gathers its 49,984 parameters (LayerNorm biases included)") {
  for (const auto& c :
       select(step(tiny_gpt(), layout(1, 1, 2, 1, 3)), {0, CommGroup::dp, op(CollectiveOp::all_gather)})) {
    CHECK(c.bytes == rel_approx(2 * kGptLayer, 1e-12));
  }
}

TEST_CASE("DP = 2, MoE model: expert and router gradients are reduced (router 64 x 4 per layer)") {
  ModelSpec m = tiny();
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 160;
  // Per layer: attention 12,288, 4 experts of 3 x 64 x 160, router 256, norms 128.
  const double params = kLayers * (kAttn + 4 * kMlp + 256 + kNorms) + 2 * kVocab + kFinal;
  const auto all = step(m, layout(1, 1, 2, 2));
  CHECK(total_bytes(select(all, {0, CommGroup::dp})) == rel_approx(2 * params, 1e-12));
}

TEST_CASE(
    "EP = 2, top-2 MoE: each layer's dispatch and combine all-to-alls move the tokens' top_k copies, s*b*k*h*2 bytes") {
  // Megatron's alltoall token dispatcher: every token goes to its top_k experts, so a rank sends
  // and receives T*top_k hidden vectors (balanced routing) to dispatch, and the same to combine;
  // backward runs both again. T = s*b = 64 tokens, k = 2: 2 x kSbh2 per call.
  ModelSpec m = tiny();
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 160;
  auto c = layout(1, 1, 2, 1);
  c.parallel.ep = 2;
  const auto all = step(m, c);
  const auto fwd = select(all, {0, CommGroup::ep, op(CollectiveOp::all_to_all), ph(Phase::forward), true});
  const auto bwd = select(all, {0, CommGroup::ep, op(CollectiveOp::all_to_all), ph(Phase::backward), true});
  CHECK(fwd.size() == 2 * kLayers);
  CHECK(bwd.size() == 2 * kLayers);
  for (const auto* v : {&fwd, &bwd}) {
    for (const auto& x : *v) {
      CHECK(x.bytes == rel_approx(2 * kSbh2, 1e-12));
      CHECK(x.group_size == 2);
    }
  }
}

TEST_CASE("tied embeddings, PP = 4: the first and last stages all-reduce the word embedding's gradient once per step") {
  // Megatron's embedding group (megatron/core/distributed/finalize_model_grads.py,
  // _allreduce_word_embedding_grads): the two copies of the tied embedding, on the first stage
  // and as the LM head on the last, sum their gradients after the DP reduction: one all-reduce
  // of v*h/t gradients between 2 ranks. tp = 2: v*h/t = 128 x 64 / 2, 2 bytes each.
  ModelSpec m = tiny(true);
  const auto all = step(m, layout(2, 4, 1, 4));
  // tp-dp-pp order: stage s, TP rank 0 is rank 2s.
  for (int rank : {0, 6}) {
    CAPTURE(rank);
    const auto e = select(all, {rank, CommGroup::embedding});
    REQUIRE(e.size() == 1);
    CHECK(e[0].op == CollectiveOp::all_reduce);
    CHECK(e[0].bytes == 128 * 64 / 2 * 2);
    CHECK(e[0].group_size == 2);
    CHECK(e[0].phase == Phase::step);
  }
  CHECK(select(all, {2, CommGroup::embedding}).empty());
  CHECK(select(all, {4, CommGroup::embedding}).empty());
}

TEST_CASE("no embedding all-reduce without tied embeddings, or with one pipeline stage") {
  CHECK(select(step(tiny(false), layout(1, 2, 1, 2)), {0, CommGroup::embedding}).empty());
  CHECK(select(step(tiny(true), layout(1, 1, 2, 2)), {0, CommGroup::embedding}).empty());
}

TEST_CASE("DDP buckets: a bucket is reduced once it holds grad_bucket_bytes, in backward order (hand-worked)") {
  // Backward adds, in order: the LM head and final norm (8,192 + 64) x 2 = 16,512 bytes; layers
  // 3, 2, 1, 0 at kLayer x 2 = 86,272 each; the embedding 8,192 x 2 = 16,384. With a 200,000
  // byte bucket: 16,512 + 3 x 86,272 = 275,328 reaches it after layer 1; layer 0 and the
  // embedding (102,656) go in the last bucket, flushed at the end of backward.
  auto c = layout(1, 1, 2, 1);
  c.grad_bucket_bytes = 200000;
  const auto dp = select(step(tiny(), c), {0, CommGroup::dp});
  REQUIRE(dp.size() == 2);
  CHECK(dp[0].bytes == rel_approx(16512 + 3 * 86272, 1e-12));
  CHECK(dp[1].bytes == rel_approx(86272 + 16384, 1e-12));
  CHECK(dp[0].bytes + dp[1].bytes == rel_approx(2 * kParams, 1e-12));
}

TEST_CASE("CP = 2, all-gather form: each layer gathers the whole sequence's K and V, b*s*(kv + v)*2 bytes") {
  auto c = layout(1, 1, 1, 1);
  c.parallel.cp = 2;
  c.parallel.cp_comm = Parallelism::CpComm::all_gather;
  const auto all = step(tiny(), c);
  const auto ag = select(all, {0, CommGroup::cp, op(CollectiveOp::all_gather), ph(Phase::forward), true});
  const auto rs = select(all, {0, CommGroup::cp, op(CollectiveOp::reduce_scatter), ph(Phase::backward), true});
  CHECK(ag.size() == kLayers);
  CHECK(rs.size() == kLayers);
  // K and V are 2 KV heads x 16 = 32 wide each; b = 2 sequences of s = 32 tokens; bf16.
  const double kv_bytes = 2 * 32 * (32 + 32) * 2.0;
  for (const auto* v : {&ag, &rs}) {
    for (const auto& x : *v) {
      CHECK(x.bytes == kv_bytes);
      CHECK(x.group_size == 2);
    }
  }
}
