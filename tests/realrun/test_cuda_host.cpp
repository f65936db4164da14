// The CUDA backend's host-side decisions (realrun/cuda_plan.hpp, realrun/discovery.hpp): they
// build without CUDA, so these run in every configuration. Expected values are worked by hand
// from the stated conventions (cuBLASLt's column-major TN form, nccl-tests' counts, vLLM's
// block table) and datasheets, never read back from the code.
#include <doctest/doctest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "realrun/cuda_plan.hpp"
#include "realrun/discovery.hpp"
#include "sim/json_reader.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster_json.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::realrun;
using ctwin::test::rel_approx;

TEST_CASE("device names as CUDA reports them map to the builtin catalog's GPUs") {
  const double gib = 1024.0 * 1024 * 1024;
  const std::map<std::string, std::string> expected = {
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"NVIDIA H100 PCIe", "H100-PCIe"},
      {"NVIDIA H100 NVL", "H100-PCIe"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"},
      {"NVIDIA B200", "B200"},
      {"NVIDIA L40S", "L40S"},
  };
  const Json& catalog = builtin_gpus_json();
  for (const auto& entry : expected) {
    // clang 14 cannot CAPTURE a structured binding: named copies instead.
    const std::string device = entry.first, name = entry.second;
    CAPTURE(device);
    CHECK(catalog_gpu_name(device, 80 * gib) == name);
    CHECK(catalog.contains(name));  // every answer is a name the loader knows
  }
  // A100 without the size in its name: told apart by the memory the driver reports.
  CHECK(catalog_gpu_name("NVIDIA A100-SXM4", 39.4 * gib) == "A100-SXM-40GB");
  CHECK(catalog_gpu_name("NVIDIA A100-SXM4", 79.2 * gib) == "A100-SXM-80GB");
  CHECK(catalog_gpu_name("Tesla V100-SXM2-16GB", 16 * gib).empty());
}

TEST_CASE("a BF16 linear layer becomes cuBLASLt's column-major TN problem with its leading dimensions") {
  // Y[4096 x 11008] = X[4096 x 4096] W^T (Llama 7B's gate projection at 4096 tokens).
  OpCost op{OpKind::gemm, 2.0 * 4096 * 11008 * 4096, 0};
  op.m = 4096;
  op.n = 11008;
  op.k = 4096;
  const GemmPlan p = plan_gemm(op, Dtype::bf16, 90);
  CHECK(p.a_type == ElemType::bf16);
  CHECK(p.d_type == ElemType::bf16);
  CHECK(p.trans_a);
  CHECK_FALSE(p.trans_b);
  CHECK(p.m == 11008);  // cuBLAS's m: the output width (Y^T's rows)
  CHECK(p.n == 4096);   // tokens
  CHECK(p.k == 4096);
  CHECK(p.lda == 4096);  // W^T read from [11008 x 4096]: K elements a column
  CHECK(p.ldb == 4096);
  CHECK(p.ldd == 11008);
  CHECK_FALSE(p.scales);
  CHECK(p.a_bytes == 4096u * 11008u * 2u);
  CHECK(p.d_bytes == 4096u * 11008u * 2u);
  CHECK(p.flops == rel_approx(op.flops, 1e-12));
}

TEST_CASE(
    "FP8 GEMMs take E4M3 inputs, BF16 output, both scales, 16-aligned dimensions and the accumulation asked for") {
  OpCost op{OpKind::gemm, 0, 0};
  op.m = 100;  // rounded up to 112
  op.n = 4096;
  op.k = 1000;  // rounded up to 1008
  op.dtype = Dtype::fp8;
  GemmPlan p = plan_gemm(op, Dtype::bf16, 90);
  CHECK(p.a_type == ElemType::fp8_e4m3);
  CHECK(p.b_type == ElemType::fp8_e4m3);
  CHECK(p.d_type == ElemType::bf16);
  CHECK(p.scales);
  CHECK(p.fast_accum);  // forward: Transformer Engine's fast accumulation
  CHECK(p.n == 112);
  CHECK(p.k == 1008);
  CHECK(p.lda == 1008);
  CHECK(p.ldd == 4096);
  CHECK(p.a_bytes == 1008u * 4096u);  // one byte an element
  op.split_accumulator = true;
  CHECK_FALSE(plan_gemm(op, Dtype::bf16, 90).fast_accum);
  // Ada (sm 89) has FP8; Ampere (sm 80) runs it in BF16 and says so.
  CHECK(plan_gemm(op, Dtype::bf16, 89).a_type == ElemType::fp8_e4m3);
  p = plan_gemm(op, Dtype::bf16, 80);
  CHECK(p.fp8_fallback);
  CHECK(p.a_type == ElemType::bf16);
  CHECK_FALSE(p.scales);
  CHECK(p.n == 100);  // no FP8 alignment then
}

TEST_CASE("a grouped GEMM splits its rows evenly over the groups; FP32 steps run as TF32") {
  OpCost op{OpKind::grouped_gemm, 0, 0};
  op.m = 8192;
  op.n = 1408;
  op.k = 2048;
  op.groups = 8;
  const GemmPlan p = plan_gemm(op, Dtype::bf16, 90);
  CHECK(p.groups == 8);
  CHECK(p.n == 1024);
  CHECK(p.flops == rel_approx(2.0 * 8192 * 1408 * 2048, 1e-12));
  const auto buf = buffers_for(op, Dtype::bf16, 90);
  CHECK(buf[0] == 8u * 2048u * 1408u * 2u);  // eight experts' weights
  CHECK(buf[1] == 8192u * 2048u * 2u);       // every token's activations
  CHECK(buf[2] == 8192u * 1408u * 2u);
  // Slices start on 256-byte boundaries: 3 experts of a 8 x 24 BF16 weight (384 bytes) take 512 each.
  OpCost small{OpKind::grouped_gemm, 0, 0};
  small.m = 30;
  small.n = 24;
  small.k = 8;
  small.groups = 3;
  CHECK(buffers_for(small, Dtype::bf16, 90)[0] == 3u * 512u);
  CHECK(buffers_for(small, Dtype::bf16, 90)[1] == 3u * 256u);  // 10 x 8 x 2 = 160 bytes a group
  OpCost f{OpKind::gemm, 0, 0};
  f.m = f.n = f.k = 64;
  const GemmPlan t = plan_gemm(f, Dtype::fp32, 90);
  CHECK(t.a_type == ElemType::fp32);
  CHECK(t.tf32);
  CHECK(t.a_bytes == 64u * 64u * 4u);
}

TEST_CASE("attention geometry is recovered from the op's totals for training, chunked prefill and decode") {
  SUBCASE("training: 2 sequences of 4096, 32 heads of 128") {
    const double seq = 4096, T = 2 * seq, heads = 32;
    OpCost op{OpKind::attention, 2 * heads * seq * seq * 256, 0};  // seqs heads s^2 (dq + dv)
    op.query_tokens = T;
    op.attended_pairs = T * seq / 2;
    op.kv_tokens = T;
    const AttentionPlan p = plan_attention(op);
    CHECK_FALSE(p.decode);
    CHECK(p.seqs == 2);
    CHECK(p.q_len == 4096);
    CHECK(p.kv_len == 4096);
    CHECK(p.heads == 32);
    CHECK(p.pairs == rel_approx(2 * 4096.0 * 4097 / 2, 1e-12));  // causal, diagonal included
    CHECK(p.flops == rel_approx(op.flops, 1e-3));
  }
  SUBCASE("chunked prefill: a 512-token chunk after 1536 cached tokens") {
    OpCost op{OpKind::attention, 0, 0};
    op.query_tokens = 512;
    op.attended_pairs = 512.0 * 1536 + 512.0 * 513 / 2;
    op.kv_tokens = 2048;
    op.flops = 4 * op.attended_pairs * 8 * 128;  // 8 heads
    const AttentionPlan p = plan_attention(op);
    CHECK(p.q_len == 512);
    CHECK(p.kv_len == 2048);
    CHECK(p.seqs == 1);
    CHECK(p.heads == 8);
    CHECK(p.pairs == rel_approx(op.attended_pairs, 1e-12));
  }
  SUBCASE("decode: 64 sequences at context 1000") {
    OpCost op{OpKind::attention, 0, 0};
    op.query_tokens = 64;
    op.attended_pairs = 64000;
    op.kv_tokens = 64000;
    op.flops = 4 * 64000.0 * 8 * 128;
    const AttentionPlan p = plan_attention(op);
    CHECK(p.decode);
    CHECK(p.seqs == 64);
    CHECK(p.kv_len == 1000);
    CHECK(p.heads == 8);
    // Q: 64 queries x 8 heads x 128 BF16; K and V: 63 blocks of 16 per sequence (1008 keys).
    const auto buf = buffers_for(op, Dtype::bf16, 90);
    CHECK(buf[0] == 64u * 1024u * 2u);
    CHECK(buf[1] == 2u * 64u * 1008u * 1024u * 2u);
    CHECK(p.kv_heads == 8);  // no bytes: one K/V head a query head
  }
  SUBCASE("decode with grouped-query attention: Llama-3-8B, 32 query and 8 K/V heads, 64 x 2048") {
    // attention_forward's bytes: BF16 Q and O of 4096 a token, K and V of 1024 each a key.
    OpCost op{OpKind::attention, 4 * 131072.0 * 32 * 128, 2 * (64 * (4096.0 + 4096) + 131072 * (1024.0 + 1024))};
    op.query_tokens = 64;
    op.attended_pairs = op.kv_tokens = 131072;
    const AttentionPlan p = plan_attention(op);
    CHECK(p.heads == 32);
    CHECK(p.kv_heads == 8);
    // The pool is 8 heads wide; O is followed by 4 splits of partials (128 outputs, max and sum).
    const auto buf = buffers_for(op, Dtype::bf16, 90);
    CHECK(buf[1] == 2u * 131072u * 1024u * 2u);
    CHECK(buf[2] == 64u * 4096u * 2u + 64u * 32u * 4u * 130u * 4u);
    // Bytes of 3 K/V heads, which do not divide 32: the pool takes 4.
    op.bytes = 2 * (64 * (4096.0 + 4096) + 131072 * (384.0 + 384));
    CHECK(plan_attention(op).kv_heads == 4);
  }
}

TEST_CASE("the decode kernel's split-K fills about 2048 work items with splits of 64 to 512 keys") {
  // Batch 1, 8 K/V heads, 2048 keys: 256 splits would fill 2048 items, but no split is under
  // 64 keys: 32 of 64.
  DecodeSplit d = plan_decode_split(1, 8, 2048);
  CHECK(d.splits == 32);
  CHECK(d.keys_per_split == 64);
  // Batch 64: 512 items want 4 splits, which no split over 512 keys needs anyway: 4 of 512.
  d = plan_decode_split(64, 8, 2048);
  CHECK(d.splits == 4);
  CHECK(d.keys_per_split == 512);
  // Batch 32 at 1024: 256 items, 8 splits of 128.
  d = plan_decode_split(32, 8, 1024);
  CHECK(d.splits == 8);
  CHECK(d.keys_per_split == 128);
  // Batch 64 at 8192: 4 splits would do, but 512 keys at most: 16.
  d = plan_decode_split(64, 8, 8192);
  CHECK(d.splits == 16);
  CHECK(d.keys_per_split == 512);
  // 300 keys, 6 items: 5 splits of 60, rounded up to 64 keys.
  d = plan_decode_split(3, 2, 300);
  CHECK(d.splits == 5);
  CHECK(d.keys_per_split == 64);
  // 1000 sequences of 100 keys: one split of 112 (whole 16s); no partials.
  d = plan_decode_split(1000, 8, 100);
  CHECK(d.splits == 1);
  CHECK(d.keys_per_split == 112);
  CHECK(decode_workspace_bytes(1000, 32, 1, 128) == 0u);
  CHECK(decode_workspace_bytes(2, 32, 4, 128) == 2u * 32u * 4u * 130u * 4u);
}

TEST_CASE("the paged-KV block table gives each sequence ceil(len / block) distinct blocks of one pool") {
  const std::vector<std::int32_t> lens = {1, 16, 17, 40, 0};
  const BlockTable t = build_block_table(lens, 16);
  CHECK(t.seqs == 5);
  CHECK(t.max_blocks == 3);    // ceil(40 / 16)
  CHECK(t.total_blocks == 7);  // 1 + 1 + 2 + 3 + 0
  REQUIRE(t.table.size() == 15u);
  const std::vector<int> used = {1, 1, 2, 3, 0};
  std::set<int> seen;
  for (int s = 0; s < 5; ++s) {
    for (int b = 0; b < 3; ++b) {
      const int v = t.table[static_cast<std::size_t>(s * 3 + b)];
      if (b < used[static_cast<std::size_t>(s)]) {
        CHECK(v >= 0);
        CHECK(v < 7);
        seen.insert(v);
      } else {
        CHECK(v == -1);
      }
    }
  }
  CHECK(seen.size() == 7u);  // no block shared
  // Scattered, not the identity a fresh cache would give, and the same every run.
  CHECK(t.table != build_block_table(lens, 64).table);
  CHECK(build_block_table(lens, 16).table == t.table);
  std::vector<int> in_order;
  for (int s = 0; s < 5; ++s)
    for (int b = 0; b < used[static_cast<std::size_t>(s)]; ++b)
      in_order.push_back(t.table[static_cast<std::size_t>(s * 3 + b)]);
  CHECK_FALSE(std::is_sorted(in_order.begin(), in_order.end()));
}

TEST_CASE("streaming kernels move the op's bytes: RMSNorm 4, AdamW 28 and the vector op 6 bytes an element") {
  OpCost norm{OpKind::norm, 0, 4.0 * 8192 * 4096};
  StreamPlan p = plan_stream(norm);
  CHECK(p.kernel == StreamKernel::rmsnorm);
  CHECK(p.rows == 8192);
  CHECK(p.cols == 4096);
  CHECK(p.bytes == rel_approx(norm.bytes, 1e-12));
  const OpCost adam{OpKind::optimizer, 0, 28e6};
  p = plan_stream(adam);
  CHECK(p.kernel == StreamKernel::adamw);
  CHECK(p.elements == 1000000);
  CHECK(buffers_for(adam, Dtype::bf16, 90)[0] == 8000000u);  // FP32 params and grads
  const OpCost add{OpKind::elementwise, 0, 6001};
  p = plan_stream(add);
  CHECK(p.kernel == StreamKernel::axpy);
  CHECK(p.elements == 1001);  // rounded up: never fewer bytes than asked
  CHECK(p.bytes == rel_approx(6006, 1e-12));
}

TEST_CASE("NCCL calls take nccl-tests' counts: all_gather's size is its output, reduce_scatter's its input") {
  const double mib = 1 << 20;  // 262144 floats
  NcclPlan p = plan_nccl(CollectiveOp::all_reduce, mib, 4);
  CHECK(p.count == 262144u);
  CHECK(p.send_elems == 262144u);
  p = plan_nccl(CollectiveOp::all_gather, mib, 4);
  CHECK(p.count == 65536u);  // each rank's part
  CHECK(p.send_elems == 65536u);
  CHECK(p.recv_elems == 262144u);
  CHECK(p.bytes == rel_approx(mib, 1e-12));
  p = plan_nccl(CollectiveOp::reduce_scatter, mib, 4);
  CHECK(p.count == 65536u);  // what each rank receives
  CHECK(p.send_elems == 262144u);
  CHECK(p.bytes == rel_approx(mib, 1e-12));
  p = plan_nccl(CollectiveOp::all_to_all, mib, 8);
  CHECK(p.count == 32768u);  // one peer's slice
  CHECK(p.recv_elems == 262144u);
  p = plan_nccl(CollectiveOp::send_recv, mib, 2);
  CHECK(p.count == 262144u);
  // 1000 bytes over 3 ranks: 250 floats, 83 a rank, so 996 bytes run.
  p = plan_nccl(CollectiveOp::all_gather, 1000, 3);
  CHECK(p.count == 83u);
  CHECK(p.bytes == rel_approx(996, 1e-12));
  CHECK(plan_nccl(CollectiveOp::broadcast, 1000, 3, 2).count == 500u);  // BF16 elements
}

TEST_CASE("rank and size come from Open MPI's, PMI's or Slurm's environment, else one process") {
  const auto env = [](std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  LaunchEnv e = launch_env(env({}));
  CHECK_FALSE(e.launched);
  CHECK(e.rank == 0);
  CHECK(e.size == 1);
  e = launch_env(
      env({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "16"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  CHECK(e.launched);
  CHECK(e.rank == 5);
  CHECK(e.size == 16);
  CHECK(e.local_rank == 1);
  e = launch_env(env({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}}));
  CHECK(e.rank == 9);
  CHECK(e.local_rank == 1);
  // A rank past the size, or text that is not a number, is no launch.
  CHECK_FALSE(launch_env(env({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}})).launched);
  CHECK_FALSE(launch_env(env({{"PMI_RANK", "x"}, {"PMI_SIZE", "4"}})).launched);
}

TEST_CASE("InfiniBand ports are read from sysfs: active ones, with their rate") {
  CHECK(parse_ib_rate_gbit("400 Gb/sec (4X NDR)") == 400);
  CHECK(parse_ib_rate_gbit("200 Gb/sec (4X HDR)") == 200);
  CHECK(parse_ib_rate_gbit("unknown") == 0);
  const auto root = std::filesystem::temp_directory_path() / ("ctwin-test-ib-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  const auto port = [&](const std::string& dev, const std::string& state, const std::string& rate) {
    const auto dir = root / dev / "ports" / "1";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "state") << state << "\n";
    std::ofstream(dir / "rate") << rate << "\n";
    std::ofstream(dir / "link_layer") << "InfiniBand\n";
  };
  port("mlx5_1", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  port("mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  port("mlx5_2", "1: DOWN", "10 Gb/sec (4X SDR)");
  const auto nics = read_infiniband(root);
  std::filesystem::remove_all(root);
  REQUIRE(nics.size() == 2u);
  CHECK(nics[0].name == "mlx5_0");  // sorted, not directory order
  CHECK(nics[1].gbit_per_s == 400);
  CHECK(read_infiniband(root / "absent").empty());
}

TEST_CASE("a discovered DGX H100 node is written as a cluster file the loader reads back") {
  DiscoveredNode node;
  node.hostname = "node01";
  for (int i = 0; i < 8; ++i) {
    DiscoveredGpu g;
    g.name = "NVIDIA H100 80GB HBM3";
    g.memory_bytes = 85520809984.0;
    g.sm = 90;
    g.nvlinks = 18;
    node.gpus.push_back(g);
  }
  for (int i = 0; i < 8; ++i) node.nics.push_back({"mlx5_" + std::to_string(i), 1, 400, "InfiniBand"});
  const nlohmann::ordered_json out = cluster_json_from_discovery(node, 4);
  const Json j = Json::parse(out.dump());
  const std::string file = "discovered.json";
  const CatalogEntries gpus = merged_catalog(builtin_gpus_json(), "builtin gpus", nullptr, file, "gpus");
  const ClusterSpec c = cluster_from_json(JsonObject(j, "", file), gpus);
  CHECK(c.gpu.name == "H100-SXM");
  CHECK(c.gpus_per_node == 8);
  CHECK(c.nodes == 4);
  CHECK(c.intra == IntraNodeFabric::nvswitch);
  // 18 NVLink 4 links x 25 GB/s: the datasheet's 900 GB/s bidirectional, 450 each way.
  CHECK(c.intra_gbyte_per_s == rel_approx(450, 1e-12));
  CHECK(c.nic_gbyte_per_s == rel_approx(50, 1e-12));  // NDR 400 Gb/s
  CHECK(c.nics_per_node == 0);                        // one a GPU

  // Four L40S on PCIe Gen4 x16 with two NICs: 16 GT/s x 16 lanes x 128/130 / 8 = 31.5 GB/s.
  DiscoveredNode pcie;
  for (int i = 0; i < 4; ++i) {
    DiscoveredGpu g;
    g.name = "NVIDIA L40S";
    g.memory_bytes = 48305799168.0;
    g.sm = 89;
    g.pcie_gen = 4;
    g.pcie_width = 16;
    pcie.gpus.push_back(g);
  }
  pcie.nics = {{"mlx5_0", 1, 200, "InfiniBand"}, {"mlx5_1", 1, 200, "InfiniBand"}};
  const Json k = Json::parse(cluster_json_from_discovery(pcie, 1).dump());
  const ClusterSpec p = cluster_from_json(JsonObject(k, "", file), gpus);
  CHECK(p.intra == IntraNodeFabric::pcie);
  CHECK(p.intra_gbyte_per_s == rel_approx(16.0 * 16 * 128 / 130 / 8, 1e-12));
  CHECK(p.nics_per_node == 2);
  CHECK(p.nic_gbyte_per_s == rel_approx(25, 1e-12));
  // A GPU the catalog lacks keeps its name, so loading asks for a /catalog/gpus entry.
  pcie.gpus[0].name = "Tesla V100-SXM2-16GB";
  CHECK(cluster_json_from_discovery(pcie, 1)["gpu"] == "Tesla V100-SXM2-16GB");
}

TEST_CASE("a backward GEMM op (dgrad and wgrad: twice its shape's FLOPs) runs its shape twice, as the CPU backend") {
  // The step program prices a linear layer's backward as one op of 2 x 2mnk FLOPs at the
  // forward's shape; the GPU must run the same work, not one GEMM of it.
  OpCost op{OpKind::gemm, 2 * 2.0 * 8192 * 2048 * 8192, 0};
  op.m = 8192;
  op.n = 2048;
  op.k = 8192;
  const GemmPlan p = plan_gemm(op, Dtype::bf16, 90);
  CHECK(p.repeats == 2);
  CHECK(p.flops == rel_approx(op.flops, 1e-12));
  op.flops = 2.0 * 8192 * 2048 * 8192;  // forward
  CHECK(plan_gemm(op, Dtype::bf16, 90).repeats == 1);
  op.flops = 0;  // a GEMM given no FLOPs still runs once
  CHECK(plan_gemm(op, Dtype::bf16, 90).repeats == 1);
  // Grouped: the FLOPs of all groups are one run.
  OpCost g{OpKind::grouped_gemm, 2 * 2.0 * 8192 * 1408 * 2048, 0};
  g.m = 8192;
  g.n = 1408;
  g.k = 2048;
  g.groups = 8;
  CHECK(plan_gemm(g, Dtype::bf16, 90).repeats == 2);
}
