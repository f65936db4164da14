// Calibration profiles: every assumed or fitted coefficient of the cost models in one place,
// with its source. A profile holds the compute model's coefficients, NCCL's tables
// (topology/nccl_model.hpp) and the per-link efficiencies NCCL moves at. Shipped profiles
// (workloads/catalog/profiles/*.json, embedded) give each GPU generation's values; a measured
// profile replaces any of them. docs/profiles.md lists every key.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "topology/catalog.hpp"
#include "topology/cluster.hpp"
#include "topology/nccl_model.hpp"
#include "workloads/compute_model.hpp"
#include "workloads/measured_tables.hpp"

namespace ctwin {

class JsonObject;

struct ProfileCompute {
  double gemm_efficiency = 0.75;                   // fraction of dense peak a large GEMM sustains
  double attention_ratio = 0.75;                   // flash attention's efficiency over the GEMM efficiency
  double attention_ratio_flash2 = 0.75;            // FlashAttention-2's, over the GEMM efficiency
  double attention_ratio_triton = 0.75;            // Triton flash attention's, over the GEMM efficiency
  double hbm_efficiency = 0.85;                    // fraction of HBM bandwidth streaming kernels sustain
  double kernel_launch_us = 2.0;                   // fixed cost per kernel
  double gemm_knee = 64;                           // a GEMM dimension d scales efficiency by d / (d + knee)
  double grouped_gemm_efficiency = 0.93;           // grouped (MoE) GEMM over one GEMM of the same shape
  double fp8_gemm_efficiency = 0.75;               // fraction of the dense FP8 peak a large FP8 GEMM sustains
  double fp8_split_accumulator_efficiency = 0.78;  // FP8 GEMM with split accumulation over fast
  // A kernel that starts while a collective runs on its GPU takes (1 + this) as long: the
  // default of a training scenario's /training/overlap_slowdown (ctwin calibrate fits it).
  double overlap_slowdown = 0;
};

struct ProfileLinks {
  double nvlink_efficiency = 20.0 / 25;  // NCCL's effective NVLink rate over line rate
  double nvls_efficiency = 0;            // NVLS all-reduce algbw over NVLink line rate, 8 GPUs (0: none)
  double pcie_efficiency = 0.75;         // NCCL's PCIe rate over line rate
  double nic_efficiency = 0.96;          // NCCL's network transport over NIC line rate
  double nvlink_latency_us = 0.6;        // NCCL's LL hop latency over NVLink (hwLat)
  double pcie_latency_us = 1.0;          // ... over PCIe
  double net_latency_us = 2.7;           // ... over the network
};

// Serving's per-iteration host costs (vLLM's scheduler, input preparation, sampling and
// detokenisation), which no kernel model sees. Assumed until calibrated (docs/profiles.md).
struct ProfileServing {
  double iteration_overhead_eager_us = 1000;  // per iteration, kernels launched one by one
  double iteration_overhead_graph_us = 300;   // per iteration replayed as a captured CUDA graph
  double per_sequence_overhead_us = 4;        // per sequence in the batch (inputs, sampling, output)
  double request_overhead_us = 0;             // per request, before the scheduler sees it (API, tokenizer)
  double ngram_lookup_us = 2;                 // n-gram proposer: per decode sequence per step
  double non_torch_gib = 0.35;                // CUDA context and allocator state outside torch
  double nccl_gib = 0.25;                     // with tensor or pipeline parallelism: NCCL buffers
  // The share of the streaming HBM rate (compute.hbm_efficiency) a serving GEMM reaches reading
  // its weights: small-batch decode GEMMs (GEMV-like, split-K) stream below the elementwise rate.
  double weight_read_efficiency = 1;
};

struct Profile {
  std::string name;               // "H100"
  std::vector<std::string> gpus;  // catalog GPU names it applies to
  std::string source;             // where the profile as a whole comes from
  ProfileCompute compute;
  ProfileLinks links;
  NcclModel nccl;
  ProfileServing serving;
  // Per key (JSON pointer such as /compute/gemm_efficiency): where its value comes from.
  std::map<std::string, std::string> sources;
  // /tables: measured kernel and collective times (ctwin calibrate writes them) that the models
  // consult before their formulas; empty in the shipped profiles.
  MeasuredTables tables;
};

// One key of the profile format: declared once, with its type, bounds, unit, doc and the source
// of its default. Every reader, writer and doc listing walks this table.
struct ProfileKey {
  const char* pointer;  // JSON pointer: /compute/gemm_efficiency, /nccl/base_ring_us
  int count;            // 1: a number; 3: [LL, LL128, Simple]
  double min, max;
  const char* unit;
  const char* doc;
  const char* source;  // where the default comes from
  double* (*ref)(Profile&);
  bool zero_is_none = false;  // 0 also accepted: "none" (no NVLink, no NVLS), below min otherwise
};
const std::vector<ProfileKey>& profile_keys();

// Parses a profile. Values are plain numbers or {"value": x, "source": "..."}; keys left out
// keep the defaults. Throws InputError naming `file`, the JSON pointer, what was found and what
// is expected.
Profile parse_profile(const std::string& text, const std::string& file);
// An OpCost's fields (kind, dtype, GEMM shape, groups, split_accumulator, flops, bytes, attention
// geometry) from a JSON object: a profile's kernel table and realrun's measurements file share
// it. flops and bytes are required unless `sizes_default` gives their default. The caller
// checks the object's other keys (JsonObject::only).
OpCost read_op_cost(const JsonObject& o, std::optional<double> sizes_default);
Profile load_profile(const std::string& path);
// Every key, as {"value", "source"} where the profile has a source for it, else the number.
std::string profile_to_json(const Profile& p);

// The shipped profile whose `gpus` list the catalog name (A100-SXM-80GB -> A100); the built-in
// defaults (NCCL's and the roofline's) for a GPU no profile lists.
Profile builtin_profile(const std::string& gpu_name);
// The shipped profiles' names: A100, B200, H100, H200, L40S.
std::vector<std::string> builtin_profile_names();

// The roofline's coefficients: peak and HBM rate from the GPU's datasheet, the rest from the
// profile.
ComputeModel compute_model(const Profile& p, const GpuSpec& gpu, Dtype dtype);
// The profile's kernel pricing: its roofline, wrapped in a TableCostModel when the profile
// carries measured kernels.
CostModelPtr profile_cost_model(const Profile& p, const GpuSpec& gpu, Dtype dtype);

// A profile's NCCL tables and link efficiencies on a cluster (intra_efficiency by the node's
// fabric, nvls_efficiency where NVSwitch reduces, nic_efficiency, hop latencies).
void apply_profile(const Profile& p, ClusterSpec& s);

}  // namespace ctwin
