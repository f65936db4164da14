// A training job: the parallelism layout, batch, precision and options of one step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/catalog.hpp"

namespace ctwin {

enum class Recompute { none, selective, full };
// Which layers full recomputation checkpoints (Megatron's --recompute-method): uniform splits each
// model chunk's layers into groups of recompute_num_layers and checkpoints each group's input (every
// layer is recomputed); block checkpoints the first recompute_num_layers layers of each model chunk
// and keeps the others' activations (Megatron-Core transformer_block.py, _checkpointed_forward).
enum class RecomputeMethod { uniform, block };
enum class PipelineSchedule { gpipe, one_f_one_b, interleaved, zero_bubble };
// flash, flash2 and triton are fused (blockwise) kernels, priced as AttentionImpl; standard is
// Megatron's unfused QK^T, softmax and PV.
enum class AttentionKernel { flash, flash2, triton, standard };
// How MoE tokens travel to their experts' ranks: Megatron's all-to-all dispatcher sends one copy
// per selected expert; DeepEP (Megatron's flex dispatcher, NeMo AutoModel, SGLang) sends a token
// once to each rank that holds any of its experts and combines on that rank before sending back.
enum class MoeDispatcher { alltoall, deepep };
// The loss kernel over the logits, by the bytes it moves per logit (docs/training.md, "The loss"):
// fp32 is Megatron's unfused VocabParallelCrossEntropy (its default: the logits cast to FP32, then
// max, subtract, exp, sum and divide in place, each its own kernel); native is Megatron's
// --cross-entropy-loss-fusion with the jit-fused FP32 functions; fused is one kernel pair on the
// logits' own dtype (Transformer Engine's, flash-attn's, Liger's cross-entropy).
enum class CrossEntropyKernel { fp32, native, fused };
// Names in the order scenario messages offer them.
inline constexpr auto recompute_names =
    make_names<Recompute>({{Recompute::none, "none"}, {Recompute::selective, "selective"}, {Recompute::full, "full"}});
inline constexpr auto recompute_method_names =
    make_names<RecomputeMethod>({{RecomputeMethod::uniform, "uniform"}, {RecomputeMethod::block, "block"}});
inline constexpr auto schedule_names = make_names<PipelineSchedule>({{PipelineSchedule::one_f_one_b, "1f1b"},
                                                                     {PipelineSchedule::gpipe, "gpipe"},
                                                                     {PipelineSchedule::interleaved, "interleaved"},
                                                                     {PipelineSchedule::zero_bubble, "zero_bubble"}});
inline constexpr auto attention_names = make_names<AttentionKernel>({{AttentionKernel::flash, "flash"},
                                                                     {AttentionKernel::flash2, "flash2"},
                                                                     {AttentionKernel::triton, "triton"},
                                                                     {AttentionKernel::standard, "standard"}});
inline constexpr auto cross_entropy_names = make_names<CrossEntropyKernel>(
    {{CrossEntropyKernel::fp32, "fp32"}, {CrossEntropyKernel::native, "native"}, {CrossEntropyKernel::fused, "fused"}});
inline constexpr auto moe_dispatcher_names =
    make_names<MoeDispatcher>({{MoeDispatcher::alltoall, "alltoall"}, {MoeDispatcher::deepep, "deepep"}});

// How the framework behind ZeRO-3 issues its collectives (docs/training.md, "Sharded data
// parallelism"): PyTorch FSDP1 (FlatParameter per wrapped unit), FSDP2 (fully_shard per block)
// or DeepSpeed ZeRO-3 (per-module fetches coalesced into prefetch buckets). Each knob carries
// its framework's own name and default.
struct Sharding {
  enum class Framework { fsdp1, fsdp2, deepspeed };
  enum class BackwardPrefetch { backward_pre, backward_post, none };
  Framework framework = Framework::fsdp1;
  // FSDP1: when the next unit's all-gather is issued in backward (torch's default BACKWARD_PRE:
  // before the current unit's gradient computation; BACKWARD_POST: after it, behind its
  // reduce-scatter), and the rate limiter (at most two all-gathers in flight).
  BackwardPrefetch backward_prefetch = BackwardPrefetch::backward_pre;
  bool limit_all_gathers = true;
  // FSDP2: false keeps the gathered parameters from forward to backward (no backward gathers).
  bool reshard_after_forward = true;
  // DeepSpeed ZeRO-3, in elements (parameters), as its config names them.
  double prefetch_bucket_elements = 5e7;        // stage3_prefetch_bucket_size
  double persistence_threshold_elements = 1e5;  // stage3_param_persistence_threshold
  double reduce_bucket_elements = 5e8;          // reduce_bucket_size
  bool overlap_comm = true;                     // reduce-scatter beside backward (else on its stream)
  // Host work per collective the framework issues (hooks, flatten/copy-in, the c10d call); it
  // delays the collective on the DP stream.
  double collective_overhead_s = 10e-6;
};

inline constexpr auto sharding_framework_names =
    make_names<Sharding::Framework>({{Sharding::Framework::fsdp1, "fsdp1"},
                                     {Sharding::Framework::fsdp2, "fsdp2"},
                                     {Sharding::Framework::deepspeed, "deepspeed"}});
inline constexpr auto backward_prefetch_names =
    make_names<Sharding::BackwardPrefetch>({{Sharding::BackwardPrefetch::backward_pre, "backward_pre"},
                                            {Sharding::BackwardPrefetch::backward_post, "backward_post"},
                                            {Sharding::BackwardPrefetch::none, "none"}});

struct Parallelism {
  int tp = 1;  // tensor parallel (Megatron column/row split)
  int pp = 1;  // pipeline stages
  int dp = 1;  // data-parallel replicas
  int cp = 1;  // context parallel
  // How CP ranks share K and V: a ring of send/recv steps each overlapped with one block of
  // attention (ring attention; Megatron-CP's default "p2p"), or one all-gather before attention
  // and a reduce-scatter of their gradients after (Llama 3's form).
  enum class CpComm { ring, all_gather };
  CpComm cp_comm = CpComm::ring;
  int ep = 1;  // expert parallel (inside the data-parallel group, or with etp 1 over TP, CP and DP)
  // Expert tensor parallel: 0 splits every expert over the TP ranks as the dense MLP is; 1 keeps
  // each expert whole on its GPU and draws the expert-parallel groups from the TP, CP and DP
  // ranks of a stage together (Megatron-Core's MoE parallel folding, --expert-tensor-parallel-size 1).
  int etp = 0;
  bool sequence_parallel = false;
  bool tp_comm_overlap = false;  // TP collectives overlap the adjacent GEMM (Megatron tp_comm_overlap)
  int zero_stage = 0;            // 0 none, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)
  Sharding sharding;             // how ZeRO-3's collectives are issued
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;                // interleaved 1F1B: model chunks per stage
  std::string order = "tp-cp-ep-dp-pp";  // rank placement, innermost first (Megatron's order)
  // How layers split over stages (workloads/pipeline_split.hpp): layers per virtual stage
  // (pp x chunks entries, virtual stage = chunk * pp + stage), or Megatron's first / last stage
  // counts (-1: not given), or an even split counting the embedding / the loss as a layer.
  std::vector<int> pipeline_layers;
  int first_stage_layers = -1;  // decoder_first_pipeline_num_layers
  int last_stage_layers = -1;   // decoder_last_pipeline_num_layers
  bool account_for_embedding = false;
  bool account_for_loss = false;
};

// MoE parallel folding (Liu et al. 2025, arXiv 2504.14960): with etp 1 and tp > 1 the tp x cp x dp
// ranks of a stage, numbered TP fastest, then CP, then DP, form consecutive expert-parallel groups
// of ep ranks; the ranks ep apart form the expert-data-parallel groups.
inline bool experts_folded(const Parallelism& p) { return p.etp == 1 && p.tp > 1; }
// The TP ranks one expert is split over.
inline int expert_tp(const Parallelism& p) { return experts_folded(p) ? 1 : p.tp; }

inline constexpr auto cp_comm_names = make_names<Parallelism::CpComm>(
    {{Parallelism::CpComm::ring, "ring"}, {Parallelism::CpComm::all_gather, "all_gather"}});

struct Precision {
  Dtype compute = Dtype::bf16;
  double weight_bytes = 2;           // per parameter, the copy used in forward/backward
  double grad_bytes = 2;             // per parameter; 4 for FP32 gradient accumulation
  double master_bytes = 4;           // FP32 master weights kept by mixed-precision Adam
  double optimizer_state_bytes = 8;  // Adam: two FP32 moments
  // Megatron's --fp8-param-gather (TE fp8_model_init): FP8 training keeps the linear layers'
  // weights in FP8 only, and the distributed optimizer all-gathers them in FP8.
  bool fp8_param_gather = false;
};

// Offloading (docs/training.md, "Offloading"): DeepSpeed's ZeRO-Offload (Ren et al., ATC'21:
// optimizer states, FP32 master weights and the update on the host, gradients down and updated
// parameters up over PCIe) and ZeRO-Infinity (Rajbhandari et al., SC'21: also the parameters, on
// host memory or NVMe, fetched layer by layer before their all-gather). Names follow DeepSpeed's
// zero_optimization.offload_optimizer / offload_param.
struct Offload {
  enum class Device { none, cpu, nvme };
  Device optimizer = Device::none;  // offload_optimizer.device
  Device params = Device::none;     // offload_param.device (ZeRO-3 only)
  bool pin_memory = true;           // page-locked host buffers; false: copies reach half the rate
  // Share of the PCIe line rate a pinned host<->device copy reaches (bandwidthTest: ~25 of 32 GB/s, Gen4 x16).
  double pcie_efficiency = 0.8;
  double nvme_gbyte_per_s = 13;  // the node's NVMe aggregate, per direction, shared by its GPUs
  // DeepSpeedCPUAdam on the whole host: parameters updated per second, shared by the node's GPUs.
  double cpu_adam_params_per_s = 4e9;
  // Delayed parameter update (ZeRO-Offload Sec. 5.2): the CPU step of step i runs beside the GPU's
  // forward and backward of step i+1.
  bool delayed_param_update = false;
  double host_memory_bytes = 0;  // per node; 0: the node preset's (offload_host_memory_bytes), else unknown
  bool active() const { return optimizer != Device::none || params != Device::none; }
};
inline constexpr auto offload_device_names = make_names<Offload::Device>(
    {{Offload::Device::none, "none"}, {Offload::Device::cpu, "cpu"}, {Offload::Device::nvme, "nvme"}});

// Run-to-run variation: several steps, each kernel's time scaled by a log-normal factor,
// and now and then a straggling GPU. Seeded, so the same scenario gives the same numbers.
struct NoiseSpec {
  int steps = 1;
  double kernel_jitter = 0;          // sigma of ln(kernel time factor)
  double straggler_probability = 0;  // per GPU per step
  double straggler_slowdown = 1.5;   // a straggler's kernels take this factor longer
  bool active() const { return kernel_jitter > 0 || straggler_probability > 0; }
};

struct TrainingConfig {
  Parallelism parallel;
  Precision precision;
  int micro_batch = 1;   // sequences per micro-batch per replica
  int global_batch = 0;  // sequences per step over all replicas
  int seq_len = 0;
  Recompute recompute = Recompute::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;  // with Recompute::full only
  int recompute_num_layers = 1;                                 // Megatron's --recompute-num-layers
  AttentionKernel attention = AttentionKernel::flash;
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::fp32;
  // Forward-only FP32 cross-entropy evaluations of the logits per micro-batch for training
  // metrics (Composer computes its train metrics from every micro-batch's logits).
  int logit_metric_passes = 0;
  bool dropout = false;
  double grad_bucket_bytes = 25.0 * 1024 * 1024;  // DDP-style gradient buckets
  bool overlap_grad_reduce = true;
  double framework_overhead_bytes = 1.0 * 1024 * 1024 * 1024;  // CUDA context, unreleasable fragmentation
  double comm_buffer_bytes = 0.5 * 1024 * 1024 * 1024;         // NCCL buffers
  // PyTorch's caching allocator keeps this fraction of its allocated peak cached but unused at
  // the peak: max_memory_reserved / max_memory_allocated - 1 (released before an OOM error).
  double allocator_reserve_fraction = 0.03;
  // The report warns when the peak is above (1 - memory_margin) of the GPU's memory.
  double memory_margin = 0.05;
  // Kernels running while a collective runs on the same GPU lose SMs and HBM bandwidth to
  // it: their time is scaled by (1 + overlap_slowdown). Calibratable.
  double overlap_slowdown = 0.0;
  // MoE: tokens routed to the busiest expert rank over the balanced share (1.0 = balanced);
  // the step waits for that rank at every all-to-all.
  double moe_load_imbalance = 1.0;
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  NoiseSpec noise;
  Offload offload;
  std::uint64_t seed = 1;

  int grad_accum() const {
    const int per_step = micro_batch * parallel.dp;
    return per_step > 0 ? global_batch / per_step : 0;
  }
};

const char* to_string(Recompute r);

// Whether full recomputation re-runs layer `index` (counted from 0 within its model chunk) in
// backward: every layer under the uniform method, the chunk's first recompute_num_layers under block.
inline bool recomputes_layer(const TrainingConfig& c, int index) {
  return c.recompute == Recompute::full &&
         (c.recompute_method == RecomputeMethod::uniform || index < c.recompute_num_layers);
}
const char* to_string(PipelineSchedule s);
const char* to_string(AttentionKernel a);
const char* to_string(MoeDispatcher d);
const char* to_string(CrossEntropyKernel k);

}  // namespace ctwin
