// The CUDA Device: in-order streams, timing events, GEMMs through cuBLASLt, attention and
// streaming kernels of ours (kernels.cu). Communicators are in cuda_comm.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cuda_internal.hpp"
#include "realrun/cuda_kernels.hpp"
#include "workloads/step_program.hpp"

namespace ctwin::realrun::cuda {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(what + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
  }
}

namespace {

cudaDataType_t cuda_type(ElemType t) {
  switch (t) {
    case ElemType::fp32:
      return CUDA_R_32F;
    case ElemType::fp16:
      return CUDA_R_16F;
    case ElemType::bf16:
      return CUDA_R_16BF;
    case ElemType::fp8_e4m3:
      return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

}  // namespace

CudaDevice::CudaDevice(int rank, int gpu, const BackendOptions& opt, const CudaOptions& cuda)
    : rank_(rank), gpu_(gpu), opt_(opt), cuda_(cuda) {
  const std::string where = "realrun rank " + std::to_string(rank) + " (GPU " + std::to_string(gpu) + ")";
  use();
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, gpu), where + ": cudaGetDeviceProperties");
  name_ = prop.name;
  sm_ = prop.major * 10 + prop.minor;
  streams_.resize(kStepStreams);
  for (cudaStream_t& s : streams_) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), where + ": stream");
  check(cublasLtCreate(&lt_), where + ": cublasLtCreate");
  check(cudaMalloc(&workspace_, workspace_bytes_), where + ": cuBLASLt workspace");
  // A's scale at 0 and B's 256 bytes on, each on its own aligned line as separate tensors'
  // scales are in the frameworks (cuBLASLt may assume it of a scale pointer).
  const std::vector<float> ones(2 * kScaleStride, 1.0f);
  check(cudaMalloc(reinterpret_cast<void**>(&scales_), ones.size() * sizeof(float)), where + ": FP8 scales");
  check(cudaMemcpy(scales_, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice), where + ": FP8 scales");
}

CudaDevice::~CudaDevice() {
  // Destructors never throw: errors here are those of a device already failing.
  cudaSetDevice(gpu_);
  cudaDeviceSynchronize();
  for (auto& [key, p] : lt_plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
  }
#ifdef CTWIN_HAVE_NCCL
  for (auto& [id, c] : comms_) {
    if (c.comm != nullptr) ncclCommDestroy(c.comm);
  }
#endif
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  for (void* p : buf_) cudaFree(p);
  cudaFree(send_);
  cudaFree(recv_);
  cudaFree(scales_);
  cudaFree(table_);
  cudaFree(lens_);
  cudaFree(workspace_);
  if (lt_ != nullptr) cublasLtDestroy(lt_);
}

void CudaDevice::use() const { check(cudaSetDevice(gpu_), "cudaSetDevice(" + std::to_string(gpu_) + ")"); }

cudaStream_t CudaDevice::stream_at(int stream) const {
  if (stream < 0 || stream >= static_cast<int>(streams_.size())) {
    throw std::runtime_error("realrun rank " + std::to_string(rank_) + ": no stream " + std::to_string(stream));
  }
  return streams_[static_cast<std::size_t>(stream)];
}

void CudaDevice::reserve(const std::array<std::size_t, 3>& bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] <= buf_bytes_[i]) continue;
    synchronize();  // nothing in flight may still use the old buffer
    cudaFree(buf_[i]);
    buf_[i] = nullptr;
    buf_bytes_[i] = 0;
    // Round up to 2 MiB so a sweep of growing shapes reallocates rarely.
    const std::size_t size = (bytes[i] + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    check(cudaMalloc(&buf_[i], size),
          "realrun rank " + std::to_string(rank_) + ": " + std::to_string(size) + " bytes for an op's buffer");
    buf_bytes_[i] = size;
    check(fill_random(buf_[i], size, FillKind::bf16, static_cast<std::uint32_t>(rank_ * 3 + i), nullptr),
          "realrun: filling a buffer");
    // The fill ran on the legacy stream, which the non-blocking streams do not wait for.
    check(cudaDeviceSynchronize(), "realrun: filling a buffer");
  }
}

void CudaDevice::launch(int stream, const OpCost& op) {
  use();
  const cudaStream_t s = stream_at(stream);
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::grouped_gemm: {
      const GemmPlan p = plan_gemm(op, cuda_.step_dtype, sm_);
      reserve(buffers_for(op, cuda_.step_dtype, sm_));
      // The buffers hold BF16 bit patterns; read as FP8 or FP32 they are other finite values
      // (the odd NaN among them costs a tensor core nothing), so no refill lands in a timing.
      run_gemm(s, p);
      break;
    }
    case OpKind::attention:
      run_attention(s, op);
      break;
    default:
      run_stream(s, op);
      break;
  }
}

void CudaDevice::run_gemm(cudaStream_t s, const GemmPlan& p) {
  const LtKey key{p.m, p.n, p.k, static_cast<int>(p.a_type), p.fast_accum, p.tf32};
  auto it = lt_plans_.find(key);
  if (it == lt_plans_.end()) {
    LtPlan lp;
    const std::string what = "realrun rank " + std::to_string(rank_) + ": cuBLASLt " + to_string(p.a_type) +
                             " GEMM m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                             " k=" + std::to_string(p.k);
    const cublasComputeType_t compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check(cublasLtMatmulDescCreate(&lp.desc, compute, CUDA_R_32F), what);
    const cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(lp.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), what);
    check(cublasLtMatmulDescSetAttribute(lp.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), what);
    if (p.scales) {
      const float* a_scale = scales_;
      const float* b_scale = scales_ + kScaleStride;
      check(cublasLtMatmulDescSetAttribute(lp.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale),
            what);
      check(cublasLtMatmulDescSetAttribute(lp.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale),
            what);
      const std::int8_t fast = p.fast_accum ? 1 : 0;
      check(cublasLtMatmulDescSetAttribute(lp.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), what);
    }
    // Stored shapes: A is k x m (op T), B is k x n, D is m x n, all column-major.
    check(cublasLtMatrixLayoutCreate(&lp.a, cuda_type(p.a_type), static_cast<std::uint64_t>(p.trans_a ? p.k : p.m),
                                     static_cast<std::uint64_t>(p.trans_a ? p.m : p.k), p.lda),
          what);
    check(cublasLtMatrixLayoutCreate(&lp.b, cuda_type(p.b_type), static_cast<std::uint64_t>(p.trans_b ? p.n : p.k),
                                     static_cast<std::uint64_t>(p.trans_b ? p.k : p.n), p.ldb),
          what);
    check(cublasLtMatrixLayoutCreate(&lp.d, cuda_type(p.d_type), static_cast<std::uint64_t>(p.m),
                                     static_cast<std::uint64_t>(p.n), p.ldd),
          what);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), what);
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                               sizeof workspace_bytes_),
          what);
    // Up to eight candidates, best first; the first that runs on these buffers is kept. The
    // heuristic can offer an algorithm that cublasLtMatmul then refuses (NOT_SUPPORTED), seen
    // with FP8 on an H200 (docs/realrun-cuda.md), so each is tried once here, untimed.
    constexpr int kCandidates = 8;
    cublasLtMatmulHeuristicResult_t cand[kCandidates] = {};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, lp.desc, lp.a, lp.b, lp.d, lp.d, pref, kCandidates, cand, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, what + ": heuristic");
    if (found == 0) throw std::runtime_error(what + ": cuBLASLt has no algorithm for it");
    std::string refused;
    bool ok = false;
    for (int c = 0; c < found && !ok; ++c) {
      const float one = 1.0f, zero = 0.0f;
      const cublasStatus_t r = cublasLtMatmul(lt_, lp.desc, &one, buf_[0], lp.a, buf_[1], lp.b, &zero, buf_[2], lp.d,
                                              buf_[2], lp.d, &cand[c].algo, workspace_, workspace_bytes_, s);
      if (r == CUBLAS_STATUS_SUCCESS) {
        lp.algo = cand[c];
        ok = true;
      } else {
        refused += (refused.empty() ? "" : ", ") + std::to_string(static_cast<int>(r));
      }
    }
    if (!ok) {
      cublasLtMatrixLayoutDestroy(lp.a);
      cublasLtMatrixLayoutDestroy(lp.b);
      cublasLtMatrixLayoutDestroy(lp.d);
      cublasLtMatmulDescDestroy(lp.desc);
      throw std::runtime_error(what + ": cublasLtMatmul refused all " + std::to_string(found) +
                               " algorithms the heuristic offered (statuses " + refused + ")");
    }
    it = lt_plans_.emplace(key, lp).first;
  }
  const LtPlan& lp = it->second;
  const float alpha = 1.0f, beta = 0.0f;
  const auto* a = static_cast<const char*>(buf_[0]);
  const auto* b = static_cast<const char*>(buf_[1]);
  auto* d = static_cast<char*>(buf_[2]);
  for (std::int64_t rep = 0; rep < p.repeats; ++rep) {
    for (std::int64_t g = 0; g < p.groups; ++g) {
      // Grouped GEMM as a loop of its experts' GEMMs on the stream, each on its own slice.
      const auto ga = static_cast<std::size_t>(g) * gemm_group_stride(p.a_bytes);
      const auto gb = static_cast<std::size_t>(g) * gemm_group_stride(p.b_bytes);
      const auto gd = static_cast<std::size_t>(g) * gemm_group_stride(p.d_bytes);
      check(cublasLtMatmul(lt_, lp.desc, &alpha, a + ga, lp.a, b + gb, lp.b, &beta, d + gd, lp.d, d + gd, lp.d,
                           &lp.algo.algo, workspace_, workspace_bytes_, s),
            "realrun rank " + std::to_string(rank_) + ": cublasLtMatmul");
    }
  }
}

void CudaDevice::run_attention(cudaStream_t s, const OpCost& op) {
  const AttentionPlan a = plan_attention(op, cuda_.head_dim);
  reserve(buffers_for(op, cuda_.step_dtype, sm_, cuda_.head_dim, cuda_.kv_block_size));
  const std::string what = "realrun rank " + std::to_string(rank_) + ": attention";
  const int seqs = static_cast<int>(a.seqs), heads = static_cast<int>(a.heads), hd = static_cast<int>(a.head_dim);
  auto* kv = static_cast<char*>(buf_[1]);
  const std::size_t half = buf_bytes_[1] / 2 / 256 * 256;  // K then V
  if (!a.decode) {
    const int q_len = static_cast<int>(a.q_len), kv_len = static_cast<int>(a.kv_len);
    if (cuda_.mma_attention) {
      // K/V kv_heads wide: a prefix of the buffers, which buffers_for sizes for the WMMA kernel.
      check(attention_prefill(buf_[0], kv, kv + half, buf_[2], seqs, q_len, kv_len, heads, static_cast<int>(a.kv_heads),
                              hd, s),
            what + " (prefill)");
    } else {
      // The WMMA and scalar kernels read K/V as wide as the queries (buffers_for sizes them so).
      const auto prefill = cuda_.simple_attention ? attention_prefill_simple : attention_prefill_wmma;
      check(prefill(buf_[0], kv, kv + half, buf_[2], seqs, q_len, kv_len, heads, hd, s), what + " (prefill)");
    }
    return;
  }
  const std::tuple<std::int64_t, std::int64_t, int> key{a.seqs, a.kv_len, cuda_.kv_block_size};
  if (table_ == nullptr || key != table_key_) {
    const BlockTable t = build_block_table(
        std::vector<std::int32_t>(static_cast<std::size_t>(seqs), static_cast<std::int32_t>(a.kv_len)),
        cuda_.kv_block_size);
    synchronize();
    cudaFree(table_);
    cudaFree(lens_);
    table_ = lens_ = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&table_), t.table.size() * sizeof(std::int32_t)), what);
    check(cudaMalloc(reinterpret_cast<void**>(&lens_), t.context_lens.size() * sizeof(std::int32_t)), what);
    check(cudaMemcpy(table_, t.table.data(), t.table.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), what);
    check(
        cudaMemcpy(lens_, t.context_lens.data(), t.context_lens.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
        what);
    table_key_ = key;
  }
  const int max_blocks = static_cast<int>((a.kv_len + cuda_.kv_block_size - 1) / cuda_.kv_block_size);
  // The split-K partials sit in O's buffer after O, as buffers_for sized it.
  const DecodeSplit split = plan_decode_split(a.seqs, a.kv_heads, a.kv_len);
  const std::size_t o_bytes = static_cast<std::size_t>(seqs) * static_cast<std::size_t>(heads * hd) * 2;
  check(attention_decode_paged(buf_[0], kv, kv + half, buf_[2], table_, lens_, seqs, max_blocks, cuda_.kv_block_size,
                               heads, static_cast<int>(a.kv_heads), hd, split.splits, split.keys_per_split,
                               static_cast<char*>(buf_[2]) + (o_bytes + 255) / 256 * 256, s),
        what + " (paged decode)");
}

void CudaDevice::run_stream(cudaStream_t s, const OpCost& op) {
  const StreamPlan p = plan_stream(op);
  reserve(buffers_for(op, cuda_.step_dtype, sm_));
  const std::string what = "realrun rank " + std::to_string(rank_) + ": " + to_string(op.kind);
  switch (p.kernel) {
    case StreamKernel::rmsnorm:
      check(rmsnorm(buf_[0], buf_[2], buf_[1], p.rows, static_cast<int>(p.cols), 1e-5f, s), what);
      break;
    case StreamKernel::adamw: {
      auto* pg = static_cast<float*>(buf_[0]);
      auto* mv = static_cast<float*>(buf_[1]);
      check(
          adamw(pg, pg + p.elements, mv, mv + p.elements, p.elements, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++adam_step_, s),
          what);
      break;
    }
    case StreamKernel::axpy:
      check(axpy_bf16(0.5f, buf_[0], buf_[1], p.elements, s), what);
      break;
  }
}

EventHandle CudaDevice::record(int stream) {
  use();
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "realrun rank " + std::to_string(rank_) + ": cudaEventCreate");
  events_.push_back(e);
  check(cudaEventRecord(e, stream_at(stream)), "realrun rank " + std::to_string(rank_) + ": cudaEventRecord");
  return static_cast<EventHandle>(events_.size() - 1);
}

void CudaDevice::wait(int stream, EventHandle event) {
  use();
  if (event >= events_.size()) throw std::runtime_error("realrun: no event " + std::to_string(event));
  check(cudaStreamWaitEvent(stream_at(stream), events_[event], 0), "cudaStreamWaitEvent");
}

double CudaDevice::elapsed_s(EventHandle start, EventHandle end) {
  use();
  if (start >= events_.size() || end >= events_.size()) throw std::runtime_error("realrun: no such event");
  const cudaEvent_t e = events_[end];
  wait_until([e] { return cudaEventQuery(e) != cudaErrorNotReady; }, "an event");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, events_[start], e), "cudaEventElapsedTime");
  return ms * 1e-3;
}

void CudaDevice::synchronize() {
  use();
  for (cudaStream_t s : streams_) {
    wait_until([s] { return cudaStreamQuery(s) != cudaErrorNotReady; }, "synchronize");
    check(cudaStreamSynchronize(s), "realrun rank " + std::to_string(rank_) + ": a stream");
  }
}

void CudaDevice::wait_until(const std::function<bool()>& done, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (int spin = 0; !done(); ++spin) {
#ifdef CTWIN_HAVE_NCCL
    for (auto& [id, c] : comms_) {
      ncclResult_t async = ncclSuccess;
      if (c.comm != nullptr && ncclCommGetAsyncError(c.comm, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        const std::string msg = "realrun rank " + std::to_string(rank_) + ": NCCL error in " + c.last + " on '" +
                                c.spec.label + "': " + ncclGetErrorString(async);
        abort_comms();
        throw std::runtime_error(msg);
      }
    }
#endif
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > opt_.timeout_s) {
      std::string pending;
      for (const auto& [id, c] : comms_) {
        if (!c.last.empty()) pending += (pending.empty() ? "" : "; ") + c.last + " on '" + c.spec.label + "'";
      }
      abort_comms();
      throw std::runtime_error(
          "realrun rank " + std::to_string(rank_) + ": " + what + " not done after " + seconds(opt_.timeout_s) +
          (pending.empty()
               ? std::string()
               : "; last collectives: " + pending + " (a member rank never joined; communicators aborted)"));
    }
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace ctwin::realrun::cuda

namespace ctwin::realrun {

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<std::unique_ptr<Device>> make_cuda_devices(const BackendOptions& opt, const CudaOptions& cuda) {
  const int visible = cuda_device_count();
  if (visible == 0) throw std::runtime_error("realrun --backend cuda: no GPU visible to the CUDA runtime");
  std::vector<std::unique_ptr<Device>> devices;
  if (cuda.world_size > 0) {
    // Under MPI: this process is one rank and drives its node-local GPU.
    devices.push_back(std::make_unique<cuda::CudaDevice>(cuda.world_rank, cuda.local_gpu % visible, opt, cuda));
    return devices;
  }
  if (opt.ranks > visible) {
    throw std::runtime_error("realrun --backend cuda: " + std::to_string(opt.ranks) + " ranks asked, " +
                             std::to_string(visible) + " GPUs visible (run one process a GPU under mpirun/srun)");
  }
  for (int r = 0; r < std::max(1, opt.ranks); ++r) {
    devices.push_back(std::make_unique<cuda::CudaDevice>(r, r, opt, cuda));
  }
  return devices;
}

}  // namespace ctwin::realrun
