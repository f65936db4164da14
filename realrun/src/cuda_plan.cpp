#include "realrun/cuda_plan.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace ctwin::realrun {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

std::int64_t at_least_one(double x) { return std::max<std::int64_t>(1, std::llround(x)); }

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

std::string catalog_gpu_name(std::string_view device_name, double memory_bytes) {
  const std::string n = upper(device_name);
  const double gib = memory_bytes / static_cast<double>(1ull << 30);
  if (has(n, "H200")) return "H200";
  if (has(n, "H100")) {
    // CUDA names the SXM part "NVIDIA H100 80GB HBM3" and the PCIe part "NVIDIA H100 PCIe"; the
    // NVL (94 GB, PCIe with bridges) prices as the PCIe part.
    if (has(n, "PCIE") || has(n, "NVL")) return "H100-PCIe";
    return "H100-SXM";
  }
  if (has(n, "A100")) {
    // "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe": the catalog has
    // the SXM parts, told apart by memory (the name's "40GB" where the driver reports less).
    if (has(n, "40GB")) return "A100-SXM-40GB";
    if (has(n, "80GB")) return "A100-SXM-80GB";
    return gib > 60 ? "A100-SXM-80GB" : "A100-SXM-40GB";
  }
  if (has(n, "B200")) return "B200";
  if (has(n, "L40S")) return "L40S";
  return "";
}

std::size_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::fp32:
      return 4;
    case ElemType::fp16:
    case ElemType::bf16:
      return 2;
    case ElemType::fp8_e4m3:
      return 1;
  }
  return 4;
}

const char* to_string(ElemType t) {
  switch (t) {
    case ElemType::fp32:
      return "fp32";
    case ElemType::fp16:
      return "fp16";
    case ElemType::bf16:
      return "bf16";
    case ElemType::fp8_e4m3:
      return "fp8_e4m3";
  }
  return "?";
}

GemmPlan plan_gemm(const OpCost& op, Dtype step_dtype, int sm) {
  GemmPlan p;
  const double groups = op.kind == OpKind::grouped_gemm ? std::max(1.0, std::round(op.groups)) : 1.0;
  p.groups = static_cast<std::int64_t>(groups);
  std::int64_t rows = at_least_one(op.m / groups);  // tokens per group
  std::int64_t out = at_least_one(op.n);
  std::int64_t inner = at_least_one(op.k);
  const Dtype d = op.dtype.value_or(step_dtype);
  switch (d) {
    case Dtype::fp8:
      if (gpu_has_fp8(sm)) {
        p.a_type = p.b_type = ElemType::fp8_e4m3;
        p.d_type = ElemType::bf16;
        p.scales = true;
        p.fast_accum = !op.split_accumulator;
        rows = round_up(rows, 16);
        out = round_up(out, 16);
        inner = round_up(inner, 16);
      } else {
        p.fp8_fallback = true;  // BF16, the defaults
      }
      break;
    case Dtype::fp16:
      p.a_type = p.b_type = p.d_type = ElemType::fp16;
      break;
    case Dtype::fp32:
      p.a_type = p.b_type = p.d_type = ElemType::fp32;
      p.tf32 = true;
      break;
    case Dtype::bf16:
      break;
  }
  p.m = out;
  p.n = rows;
  p.k = inner;
  p.lda = inner;
  p.ldb = inner;
  p.ldd = out;
  p.a_bytes = static_cast<std::size_t>(inner * out) * elem_bytes(p.a_type);
  p.b_bytes = static_cast<std::size_t>(inner * rows) * elem_bytes(p.b_type);
  p.d_bytes = static_cast<std::size_t>(out * rows) * elem_bytes(p.d_type);
  const double shape_flops = 2.0 * static_cast<double>(at_least_one(op.m / groups)) *
                             static_cast<double>(at_least_one(op.n)) * static_cast<double>(at_least_one(op.k)) * groups;
  p.repeats = static_cast<std::int64_t>(std::max(1.0, std::round(op.flops / shape_flops)));
  p.flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) * groups *
            static_cast<double>(p.repeats);
  return p;
}

AttentionPlan plan_attention(const OpCost& op, int head_dim) {
  AttentionPlan p;
  p.head_dim = std::max(1, head_dim);
  const double q_total = op.query_tokens, kv_total = op.kv_tokens, pairs = op.attended_pairs;
  if (q_total >= 1 && pairs > 0) {
    // Per query a = pairs / q_total = L - Q/2 (+1/2, dropped as training's seq^2/2 does), and
    // r = L / Q = kv_total / q_total, so Q = a / (r - 1/2). Without K/V tokens, or with fewer
    // than half the queries, take one causal sequence per query block: L = Q = 2a.
    const double a = pairs / q_total;
    const double r = kv_total / q_total;
    const double q = r > 0.5 ? a / (r - 0.5) : 2 * a;
    p.q_len = std::clamp<std::int64_t>(std::llround(q), 1, static_cast<std::int64_t>(q_total));
    p.seqs = at_least_one(q_total / static_cast<double>(p.q_len));
    const double kv = r > 0.5 ? kv_total / static_cast<double>(p.seqs) : static_cast<double>(p.q_len);
    p.kv_len = std::max<std::int64_t>(p.q_len, std::llround(kv));
  }
  p.decode = p.q_len == 1;
  const double Q = static_cast<double>(p.q_len), L = static_cast<double>(p.kv_len);
  p.pairs = static_cast<double>(p.seqs) * (Q * (L - Q) + Q * (Q + 1) / 2);
  p.heads = at_least_one(op.flops / (4 * p.pairs * p.head_dim));
  p.flops = 4 * p.pairs * static_cast<double>(p.heads) * p.head_dim;
  // bytes = 2 (query_tokens 2 heads head_dim + kv_tokens 2 kv_heads head_dim), BF16.
  p.kv_heads = p.heads;
  if (op.bytes > 0 && kv_total > 0) {
    const double q_bytes = 2 * q_total * 2 * static_cast<double>(p.heads * p.head_dim);
    const double kv = std::round((op.bytes - q_bytes) / (2 * kv_total * 2 * static_cast<double>(p.head_dim)));
    if (kv >= 1) {
      p.kv_heads = static_cast<std::int64_t>(std::min(kv, static_cast<double>(p.heads)));
      while (p.heads % p.kv_heads != 0) ++p.kv_heads;
    }
  }
  return p;
}

BlockTable build_block_table(const std::vector<std::int32_t>& context_lens, int block_size) {
  BlockTable t;
  t.block_size = std::max(1, block_size);
  t.seqs = static_cast<int>(context_lens.size());
  t.context_lens = context_lens;
  std::vector<int> blocks(context_lens.size());
  for (std::size_t s = 0; s < context_lens.size(); ++s) {
    blocks[s] = (std::max(0, context_lens[s]) + t.block_size - 1) / t.block_size;
    t.max_blocks = std::max(t.max_blocks, blocks[s]);
    t.total_blocks += blocks[s];
  }
  // A fixed shuffle of the pool (Fisher-Yates on a 64-bit LCG, Knuth's MMIX constants).
  std::vector<std::int32_t> pool(static_cast<std::size_t>(t.total_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = pool.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(pool[i - 1], pool[(state >> 33) % i]);
  }
  t.table.assign(static_cast<std::size_t>(t.seqs) * static_cast<std::size_t>(t.max_blocks), -1);
  std::size_t next = 0;
  for (std::size_t s = 0; s < context_lens.size(); ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      t.table[s * static_cast<std::size_t>(t.max_blocks) + static_cast<std::size_t>(b)] = pool[next++];
    }
  }
  return t;
}

DecodeSplit plan_decode_split(std::int64_t seqs, std::int64_t kv_heads, std::int64_t max_context) {
  const std::int64_t ctx = std::max<std::int64_t>(1, max_context);
  const std::int64_t items = std::max<std::int64_t>(1, seqs) * std::max<std::int64_t>(1, kv_heads);
  const std::int64_t fill = (kDecodeWorkItems + items - 1) / items;
  const std::int64_t most = (ctx + kDecodeMinSplitKeys - 1) / kDecodeMinSplitKeys;
  const std::int64_t least = (ctx + kDecodeMaxSplitKeys - 1) / kDecodeMaxSplitKeys;
  const std::int64_t splits = std::max(std::min(fill, most), least);
  DecodeSplit d;
  d.keys_per_split = static_cast<int>(((ctx + splits - 1) / splits + 15) / 16 * 16);
  d.splits = static_cast<int>((ctx + d.keys_per_split - 1) / d.keys_per_split);
  return d;
}

std::size_t decode_workspace_bytes(std::int64_t seqs, std::int64_t heads, int splits, std::int64_t head_dim) {
  if (splits <= 1) return 0;
  return static_cast<std::size_t>(seqs * heads * splits * (head_dim + 2)) * sizeof(float);
}

StreamPlan plan_stream(const OpCost& op) {
  StreamPlan p;
  double per_elem = 6;
  switch (op.kind) {
    case OpKind::norm:
      p.kernel = StreamKernel::rmsnorm;
      per_elem = 4;
      break;
    case OpKind::optimizer:
      p.kernel = StreamKernel::adamw;
      per_elem = 28;
      break;
    default:
      p.kernel = StreamKernel::axpy;
      break;
  }
  p.elements = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(op.bytes / per_elem)));
  if (p.kernel == StreamKernel::rmsnorm) {
    p.cols = std::min<std::int64_t>(4096, p.elements);  // a hidden width; rows are tokens
    p.rows = (p.elements + p.cols - 1) / p.cols;
    p.elements = p.rows * p.cols;
  } else {
    p.rows = 1;
    p.cols = p.elements;
  }
  p.bytes = static_cast<double>(p.elements) * per_elem;
  return p;
}

std::array<std::size_t, 3> buffers_for(const OpCost& op, Dtype step_dtype, int sm, int head_dim, int kv_block_size) {
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::grouped_gemm: {
      const GemmPlan g = plan_gemm(op, step_dtype, sm);
      const auto n = static_cast<std::size_t>(g.groups);
      return {gemm_group_stride(g.a_bytes) * n, gemm_group_stride(g.b_bytes) * n, gemm_group_stride(g.d_bytes) * n};
    }
    case OpKind::attention: {
      // BF16 Q and O of every query; K and V of every key: contiguous for prefill, a block pool
      // of whole blocks for decode.
      const AttentionPlan a = plan_attention(op, head_dim);
      const auto width = static_cast<std::size_t>(a.heads * a.head_dim) * 2;
      const auto q = static_cast<std::size_t>(a.seqs * a.q_len) * width;
      if (!a.decode) return {q, 2 * static_cast<std::size_t>(a.seqs * a.kv_len) * width, q};
      const std::int64_t bs = std::max(1, kv_block_size);
      const std::int64_t keys = (a.kv_len + bs - 1) / bs * bs;
      const auto kv_width = static_cast<std::size_t>(a.kv_heads * a.head_dim) * 2;
      const std::size_t ws =
          decode_workspace_bytes(a.seqs, a.heads, plan_decode_split(a.seqs, a.kv_heads, a.kv_len).splits, a.head_dim);
      return {q, 2 * static_cast<std::size_t>(a.seqs * keys) * kv_width, ws > 0 ? (q + 255) / 256 * 256 + ws : q};
    }
    default: {
      const StreamPlan s = plan_stream(op);
      const auto e = static_cast<std::size_t>(s.elements);
      if (s.kernel == StreamKernel::adamw) return {8 * e, 8 * e, 0};  // params + grads, two moments
      if (s.kernel == StreamKernel::rmsnorm) return {2 * e, 2 * e, 2 * static_cast<std::size_t>(s.cols)};
      return {2 * e, 2 * e, 0};
    }
  }
}

NcclPlan plan_nccl(CollectiveOp op, double bytes, int nranks, std::size_t elem) {
  NcclPlan p;
  p.op = op;
  p.elem_bytes = std::max<std::size_t>(1, elem);
  const auto n = static_cast<std::size_t>(std::max(1, nranks));
  const auto count = static_cast<std::size_t>(std::max(0.0, bytes) / static_cast<double>(p.elem_bytes));
  switch (op) {
    case CollectiveOp::all_gather:
      p.count = count / n;  // each rank's contribution; the output is n of them
      p.send_elems = p.count;
      p.recv_elems = p.count * n;
      break;
    case CollectiveOp::reduce_scatter:
      p.count = count / n;  // each rank's share of the reduced input
      p.send_elems = p.count * n;
      p.recv_elems = p.count;
      break;
    case CollectiveOp::all_to_all:
      p.count = count / n;  // one peer's slice
      p.send_elems = p.recv_elems = p.count * n;
      break;
    default:
      p.count = p.send_elems = p.recv_elems = count;
      break;
  }
  const std::size_t size_elems = op == CollectiveOp::all_gather ? p.recv_elems : p.send_elems;
  p.bytes = static_cast<double>(size_elems * p.elem_bytes);
  return p;
}

LaunchEnv launch_env(const std::function<const char*(const char*)>& getenv_fn) {
  const auto num = [&](const char* name, int& out) {
    const char* v = getenv_fn(name);
    if (v == nullptr || *v == '\0') return false;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < 0 || x > (1 << 24)) return false;
    out = static_cast<int>(x);
    return true;
  };
  LaunchEnv e;
  struct Names {
    const char *rank, *size, *local;
  };
  for (const Names& n :
       {Names{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        Names{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}, Names{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}}) {
    LaunchEnv c;
    if (!num(n.rank, c.rank) || !num(n.size, c.size) || c.size < 1 || c.rank >= c.size) continue;
    if (!num(n.local, c.local_rank)) c.local_rank = 0;
    c.launched = true;
    return c;
  }
  return e;
}

}  // namespace ctwin::realrun
