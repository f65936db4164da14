// realrun's plan for a serving replica: the iterations to replay (the scenario's, or
// default_serving_iterations), each one's op list from the serving cost model itself, the
// distinct kernels among them, and the TP communicator's collectives over a size sweep.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "plan_parts.hpp"
#include "sim/error.hpp"
#include "workloads/serving_memory.hpp"

namespace ctwin::realrun {

std::vector<IterationShape> default_serving_iterations(const SchedulerConfig& s, std::int64_t num_gpu_blocks) {
  const std::int64_t B = s.max_num_batched_tokens, S = s.max_num_seqs;
  const std::int64_t L = s.max_model_len > 0 ? s.max_model_len : B;
  const bool chunked = s.enable_chunked_prefill;
  std::vector<IterationShape> out;
  const auto add = [&](IterationShape x) {
    if (x.kind().empty() || kv_blocks_needed(x, s.block_size) > num_gpu_blocks) return;
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  };
  const auto prefill = [](std::int64_t tokens, std::int64_t context) {
    IterationShape x;
    x.prefill_seqs = 1;
    x.prefill_tokens = tokens;
    x.prefill_context = context;
    return x;
  };
  for (std::int64_t c : {B / 4, B / 2, B}) {
    if (c >= 1) add(prefill(std::min(c, L), 0));
  }
  if (chunked && L > B) add(prefill(std::min(B, L - B), B));
  for (std::int64_t batch : {std::int64_t{1}, S / 2, S}) {
    for (std::int64_t ctx : {L / 4, L / 2}) {
      if (batch < 1 || ctx < 1 || batch > B) continue;
      IterationShape x;
      x.decode_seqs = batch;
      x.decode_context = ctx;
      add(x);
    }
  }
  if (chunked && S >= 2) {
    for (const auto& [batch, ctx] : {std::pair{S / 2, L / 4}, std::pair{S - 1, L / 2}}) {
      if (batch < 1 || ctx < 1 || B - batch < 1) continue;
      IterationShape x = prefill(std::min(B - batch, L), 0);
      x.decode_seqs = batch;
      x.decode_context = ctx;
      add(x);
    }
  }
  return out;
}

RealrunPlan plan_serving_realrun(const RealrunJob& job) {
  const ServingReplayJob& sj = *job.serving;
  const ServingDeployment& d = sj.deployment;
  const SchedulerConfig& sched = sj.scheduler;
  const std::string& file = job.scenario_file;
  if (d.pp != 1) {
    throw InputError(file, "/serving/pipeline_parallel_size", std::to_string(d.pp) + " stages",
                     "1: realrun replays the iterations of one stage's TP ranks");
  }
  if (d.spec_method != SpecMethod::none || sched.num_speculative_tokens > 0) {
    throw InputError(file, "/serving/speculative_config", "a speculative proposer",
                     "none: realrun replays the target model's forward pass only");
  }
  if (d.quantization != Quantization::none) {
    throw InputError(file, "/serving/quantization", std::string("\"") + quantization_names.name(d.quantization) + "\"",
                     "\"none\": realrun replays BF16 weights");
  }
  RealrunPlan plan;
  plan.ranks = d.tp;
  if (job.config.ranks != 0 && job.config.ranks != plan.ranks) {
    throw InputError(
        file, "/realrun/ranks",
        std::to_string(job.config.ranks) + " ranks for a replica of " + std::to_string(plan.ranks) + " GPUs",
        "the replica's tensor_parallel_size, or no /realrun/ranks");
  }
  const KvCapacity cap = kv_capacity(d, sched);
  if (!cap.refusal.empty()) throw InputError(file, "/serving", cap.refusal, "a replica whose weights fit");

  std::vector<IterationShape> shapes = job.config.iterations;
  const bool planned = shapes.empty();
  if (planned) shapes = default_serving_iterations(sched, cap.num_gpu_blocks);
  if (shapes.empty()) {
    throw InputError(file, "/serving",
                     "no iteration fits the KV cache of " + std::to_string(cap.num_gpu_blocks) + " blocks",
                     "a larger cache, or /realrun/iterations that fit it");
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    check_iteration_shape(shapes[i], sched, cap.num_gpu_blocks, file,
                          planned ? std::string("/serving") : "/realrun/iterations/" + std::to_string(i));
  }

  const ServingCostModel cost(d);
  std::unordered_set<OpCost, OpCostHash> seen;
  std::map<int, std::set<double>> exact;  // collective op -> exact sizes
  std::vector<CollectiveOp> ops_used;     // in order of first use
  for (const IterationShape& shape : shapes) {
    PlannedIteration it{shape, cost.iteration_ops(batch_shape(shape, d.model.attention_window))};
    for (IterationOp& op : it.ops) {
      if (op.collective) {
        if (!exact.contains(static_cast<int>(op.op))) ops_used.push_back(op.op);
        exact[static_cast<int>(op.op)].insert(op.bytes);
        continue;
      }
      if (!op.cost.dtype) op.cost.dtype = Dtype::bf16;  // the serving model's kernels are BF16
      if (seen.insert(op.cost).second)
        plan.ops.push_back(PlannedOp{op.cost, "step", op.name, std::string(shape.kind())});
    }
    plan.iterations.push_back(std::move(it));
  }
  add_gemm_sweep(job.config, plan.ops, seen);

  if (!ops_used.empty()) {
    CommSpec tp;
    tp.id = 0;
    tp.label = "tp";
    for (int r = 0; r < d.tp; ++r) tp.ranks.push_back(r);
    plan.comms.push_back(std::move(tp));
    const std::vector<double> sweep = collective_sweep_sizes(job.config);
    for (CollectiveOp op : ops_used) {
      std::set<double> sizes(sweep.begin(), sweep.end());
      const auto& ex = exact[static_cast<int>(op)];
      sizes.insert(ex.begin(), ex.end());
      for (double b : sizes) {
        if (b > 0) plan.collectives.push_back(PlannedCollective{op, 0, b});
      }
    }
  }
  return plan;
}

}  // namespace ctwin::realrun
