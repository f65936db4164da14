// Small made-up models and a node whose numbers can be checked by hand, shared by the tests that
// count a step's ops, collectives, memory and FLOPs.
#pragma once

#include "topology/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin::test {

// A Llama-style model: h = 64, 4 query heads of 16 (h_q = 64), 2 KV heads of 16 (GQA), a SwiGLU
// MLP of 160, RMSNorm, an untied 128-token vocabulary, sequences of up to 32 tokens. Per layer:
// q and o 64 x 64, k and v 64 x 32 (attention 12,288), MLP 3 x 64 x 160 (30,720), two norm
// scales (128); embedding and LM head 128 x 64 = 8,192 each; final norm 64.
inline ModelSpec tiny_llama(int layers = 4) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.ffn_hidden = 160;
  m.activation = Activation::swiglu;
  m.norm = Norm::rmsnorm;
  m.vocab = 128;
  m.max_seq = 32;
  return m;
}

// A GPT-style model: h = 64, 4 heads of 16 (no GQA), a GELU MLP of 256 with biases, LayerNorm,
// a 128-token vocabulary; learned positions (GPT-2) on request.
inline ModelSpec tiny_gpt(bool learned_positions = false) {
  ModelSpec m;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 256;
  m.activation = Activation::gelu;
  m.norm = Norm::layernorm;
  m.vocab = 128;
  m.max_seq = 32;
  m.learned_positions = learned_positions;
  return m;
}

// One node of 8 H100-SXM GPUs at their datasheet figures (989 TFLOP/s dense BF16, 3.35 TB/s HBM,
// NVLink 4 at 450 GB/s per direction), NVSwitch at 0.6 us a hop, the catalog's efficiencies.
inline Cluster h100_node8() {
  ClusterSpec s;
  s.gpu.name = "H100-SXM";
  s.gpu.bf16_tflops = 989;
  s.gpu.hbm_bytes = 80e9;
  s.gpu.hbm_gbyte_per_s = 3350;
  s.gpu.nvlink_gbyte_per_s = 450;
  s.gpus_per_node = 8;
  s.intra_gbyte_per_s = 450;
  s.intra_latency_us = 0.6;
  return build_cluster(s);
}

// tp x pp x dp with `micro_batches` micro-batches of 2 sequences of 32 tokens per replica.
inline TrainingConfig tiny_layout(int tp, int pp, int dp, int micro_batches) {
  TrainingConfig c;
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.micro_batch = 2;
  c.global_batch = 2 * dp * micro_batches;
  c.seq_len = 32;
  return c;
}

// A GPT-style model wide enough that TP and DP collectives take microseconds (h = 1024), for the
// folding tests (test_fold.cpp, test_micro_batch_fold.cpp).
inline ModelSpec fold_gpt(int layers = 4) {
  ModelSpec m = tiny_gpt();
  m.layers = layers;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab = 4096;
  m.max_seq = 1024;
  m.tied_embeddings = true;
  return m;
}

// n of h100_node8's nodes joined by 50 GB/s NICs.
inline Cluster fold_nodes(int n) {
  ClusterSpec s = h100_node8().spec;
  s.nodes = n;
  s.nic_gbyte_per_s = 50;
  return build_cluster(s);
}

// tp x pp x dp with `micro_batches` micro-batches of one 512-token sequence per replica.
inline TrainingConfig fold_layout(int tp, int pp, int dp, int micro_batches) {
  TrainingConfig c = tiny_layout(tp, pp, dp, micro_batches);
  c.micro_batch = 1;
  c.global_batch = dp * micro_batches;
  c.seq_len = 512;
  return c;
}

}  // namespace ctwin::test
