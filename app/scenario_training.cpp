// /training: read through workloads' training tables, then the layout checked against the
// model and cluster (workloads' check_training_layout), its fields mapped to JSON pointers.
#include <algorithm>
#include <sstream>

#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/offload.hpp"
#include "workloads/training_params.hpp"

namespace ctwin {

namespace {

// /training/parallelism/sharding: the framework, then only its own knobs.
Sharding read_sharding(const JsonObject& o) {
  const ParamReader r(o, sharding_params);
  Sharding s;
  s.framework = r.choice("framework", sharding_framework_names);
  using F = Sharding::Framework;
  const struct {
    const char* key;
    F framework;
  } owner[] = {{"backward_prefetch", F::fsdp1},
               {"limit_all_gathers", F::fsdp1},
               {"reshard_after_forward", F::fsdp2},
               {"stage3_prefetch_bucket_size", F::deepspeed},
               {"stage3_param_persistence_threshold", F::deepspeed},
               {"reduce_bucket_size", F::deepspeed},
               {"overlap_comm", F::deepspeed}};
  for (const auto& k : owner) {
    if (r.has(k.key) && k.framework != s.framework) {
      o.fail(k.key,
             std::string("found a ") + sharding_framework_names.name(k.framework) + " key with framework \"" +
                 sharding_framework_names.name(s.framework) + "\"",
             std::string("framework \"") + sharding_framework_names.name(k.framework) + "\", or no " + k.key);
    }
  }
  s.backward_prefetch = r.choice("backward_prefetch", backward_prefetch_names);
  s.limit_all_gathers = r.boolean("limit_all_gathers");
  s.reshard_after_forward = r.boolean("reshard_after_forward");
  s.prefetch_bucket_elements = r.number("stage3_prefetch_bucket_size");
  s.persistence_threshold_elements = r.number("stage3_param_persistence_threshold");
  s.reduce_bucket_elements = r.number("reduce_bucket_size");
  s.overlap_comm = r.boolean("overlap_comm");
  s.collective_overhead_s = r.number("collective_overhead_us") * 1e-6;
  return s;
}

}  // namespace

TrainingConfig read_training(const JsonObject& o, const ModelSpec& m, const ClusterSpec& cl, bool auto_layout) {
  const ParamReader r(o, training_params);
  TrainingConfig t;
  t.micro_batch = static_cast<int>(r.integer("micro_batch"));
  t.global_batch = static_cast<int>(r.integer("global_batch"));
  t.seq_len = static_cast<int>(r.integer("seq_len", m.is_generic() ? std::optional<long long>(1) : std::nullopt));
  t.recompute = r.choice("recompute", recompute_names);
  t.recompute_method = r.choice("recompute_method", recompute_method_names);
  t.recompute_num_layers = static_cast<int>(r.integer("recompute_num_layers"));
  for (const char* key : {"recompute_method", "recompute_num_layers"}) {
    if (r.has(key) && t.recompute != Recompute::full) {
      o.fail(key, std::string("found it with recompute \"") + to_string(t.recompute) + "\"",
             "recompute \"full\" (the method and layer count choose which layers full recomputation reruns)");
    }
  }
  t.attention = r.choice("attention", attention_names);
  t.cross_entropy = r.choice("cross_entropy", cross_entropy_names);
  t.logit_metric_passes = static_cast<int>(r.integer("logit_metric_passes"));
  t.dropout = r.boolean("dropout");
  t.grad_bucket_bytes = r.number("grad_bucket_mb") * 1024 * 1024;
  t.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  t.overlap_slowdown = r.number("overlap_slowdown");
  t.moe_load_imbalance = r.number("moe_load_imbalance");
  t.moe_dispatcher = r.choice("moe_dispatcher", moe_dispatcher_names);
  t.framework_overhead_bytes = r.number("framework_overhead_gb") * 1024 * 1024 * 1024;
  t.comm_buffer_bytes = r.number("comm_buffer_gb") * 1024 * 1024 * 1024;
  t.allocator_reserve_fraction = r.number("allocator_reserve_fraction");
  t.memory_margin = r.number("memory_margin");
  if (o.has("precision")) {
    const JsonObject po = o.object("precision");
    const ParamReader p(po, precision_params);
    t.precision.compute = p.choice("compute", dtype_names);
    t.precision.weight_bytes = p.number("weight_bytes");
    t.precision.grad_bytes = p.number("grad_bytes");
    t.precision.master_bytes = p.number("master_bytes");
    t.precision.optimizer_state_bytes = p.number("optimizer_state_bytes");
    t.precision.fp8_param_gather = p.boolean("fp8_param_gather");
    if (t.precision.fp8_param_gather && t.precision.compute != Dtype::fp8) {
      po.fail("fp8_param_gather",
              std::string("found true with compute \"") + dtype_names.name(t.precision.compute) + "\"",
              "compute \"fp8\" (only FP8 training keeps FP8 weights), or false");
    }
    if (t.precision.compute == Dtype::fp8 && cl.gpu.fp8_tflops <= 0) {
      po.fail("compute", "found \"fp8\", but " + cl.gpu.name + " has no FP8 tensor cores", "\"bf16\" or \"fp16\"");
    }
    if (t.precision.compute == Dtype::fp32 && cl.gpu.tf32_tflops <= 0) {
      po.fail("compute", "found \"fp32\", but " + cl.gpu.name + " has no tf32_tflops",
              "\"bf16\", or a GPU with tf32_tflops");
    }
  }
  if (o.has("noise")) {
    const JsonObject no = o.object("noise");
    const ParamReader n(no, noise_params);
    t.noise.steps = static_cast<int>(n.integer("steps"));
    t.noise.kernel_jitter = n.number("kernel_jitter");
    t.noise.straggler_probability = n.number("straggler_probability");
    t.noise.straggler_slowdown = n.number("straggler_slowdown");
  }
  const int gpus = cl.nodes * cl.gpus_per_node;
  auto& par = t.parallel;
  bool dp_given = false;
  if (auto_layout) {
    par.dp = gpus;
    if (o.has("offload")) t.offload = read_offload(o.object("offload"), cl, -1);
    return t;
  }
  if (o.has("parallelism")) {
    const JsonObject po = o.object("parallelism");
    const ParamReader p(po, parallelism_params);
    par.tp = static_cast<int>(p.integer("tp"));
    par.pp = static_cast<int>(p.integer("pp"));
    par.cp = static_cast<int>(p.integer("cp"));
    par.cp_comm = p.choice("cp_comm", cp_comm_names);
    par.ep = static_cast<int>(p.integer("ep"));
    par.etp = static_cast<int>(p.integer("etp"));
    // 64-bit: each of tp, pp, cp may be 2^20 (the layout check refuses a product above the GPUs).
    const long long rest = 1ll * par.tp * par.pp * par.cp;
    par.dp = static_cast<int>(p.integer("dp", std::max<long long>(1, gpus / rest)));
    dp_given = p.has("dp");
    par.sequence_parallel = p.boolean("sequence_parallel");
    par.tp_comm_overlap = p.boolean("tp_comm_overlap");
    par.zero_stage = static_cast<int>(p.integer("zero_stage"));
    if (par.zero_stage >= 3 && t.precision.fp8_param_gather) {
      o.object("precision")
          .fail("fp8_param_gather",
                "found true with zero_stage " + std::to_string(par.zero_stage) +
                    " (FP8 parameters under ZeRO-3 / FSDP are not modelled)",
                "false, or zero_stage 0-2");
    }
    if (p.has("sharding")) par.sharding = read_sharding(po.object("sharding"));
    par.schedule = p.choice("schedule", schedule_names);
    par.virtual_stages = static_cast<int>(p.integer("virtual_stages"));
    par.order = p.string("order");
    if (p.has("pipeline_layers")) {
      const Json& pl = po.raw("pipeline_layers");
      if (!pl.is_array() || pl.empty()) {
        po.fail("pipeline_layers", "found " + shown(pl), "a non-empty array of layer counts per stage");
      }
      for (std::size_t i = 0; i < pl.size(); ++i) {
        if (!pl[i].is_number_integer() || pl[i].get<long long>() < 0 || pl[i].get<long long>() > 100000) {
          po.fail("pipeline_layers/" + std::to_string(i), "found " + shown(pl[i]), "a layer count, an integer >= 0");
        }
        par.pipeline_layers.push_back(pl[i].get<int>());
      }
    }
    if (p.has("decoder_first_pipeline_num_layers")) {
      par.first_stage_layers = static_cast<int>(p.integer("decoder_first_pipeline_num_layers"));
    }
    if (p.has("decoder_last_pipeline_num_layers")) {
      par.last_stage_layers = static_cast<int>(p.integer("decoder_last_pipeline_num_layers"));
    }
    par.account_for_embedding = p.boolean("account_for_embedding_in_pipeline_split");
    par.account_for_loss = p.boolean("account_for_loss_in_pipeline_split");
    // The order must name each of tp, cp, ep, dp, pp once.
    std::vector<std::string> dims;
    std::stringstream ss(par.order);
    for (std::string tok; std::getline(ss, tok, '-');) dims.push_back(tok);
    std::vector<std::string> sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != std::vector<std::string>{"cp", "dp", "ep", "pp", "tp"}) {
      po.fail("order", "found " + shown(Json(par.order)),
              "the five of tp, cp, ep, dp, pp joined by '-', innermost first");
    }
  } else {
    par.dp = gpus;
  }
  if (o.has("offload")) t.offload = read_offload(o.object("offload"), cl, par.zero_stage);
  const std::vector<LayoutProblem> problems = check_training_layout(m, t, Cluster{cl});
  if (!problems.empty()) {
    const LayoutProblem& p = problems.front();
    // dp was derived from tp*pp*cp when not given: the product is then tp's to fix.
    const std::string field = p.field == "parallelism/dp" && !dp_given ? "parallelism/tp" : p.field;
    throw InputError(o.file(), o.path() + "/" + field, p.what, p.expected);
  }
  return t;
}

}  // namespace ctwin
