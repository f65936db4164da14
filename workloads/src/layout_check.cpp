#include "workloads/layout_check.hpp"

#include <utility>

#include "workloads/step_program.hpp"

namespace ctwin {

namespace {

// Every problem, the cluster's GPU count checked exactly (a scenario) or as an upper bound (the
// simulator may run a layout on the first GPUs of a larger cluster).
std::vector<LayoutProblem> layout_problems(const ModelSpec& m, const TrainingConfig& t, int gpus, bool exact) {
  std::vector<LayoutProblem> out;
  const auto& par = t.parallel;
  auto bad = [&](const std::string& key, const std::string& problem, const std::string& expected) {
    out.push_back(LayoutProblem{"parallelism/" + key, problem, expected});
  };
  const long long product = 1ll * par.tp * par.pp * par.dp * par.cp;
  if (exact ? product != gpus : product > gpus) {
    bad("dp",
        "tp*pp*dp*cp = " + std::to_string(par.tp) + "*" + std::to_string(par.pp) + "*" + std::to_string(par.dp) + "*" +
            std::to_string(par.cp) + " = " + std::to_string(product) + ", but the cluster has " + std::to_string(gpus) +
            " GPUs",
        "tp*pp*dp*cp equal to nodes*gpus_per_node = " + std::to_string(gpus));
  }
  if (m.is_generic() && (par.tp > 1 || par.cp > 1 || par.ep > 1)) {
    bad(par.tp > 1   ? "tp"
        : par.cp > 1 ? "cp"
                     : "ep",
        "a generic layer-list model cannot be split by tp, cp or ep", "1 (use dp and pp)");
  }
  if (!m.is_generic()) {
    if (m.heads % par.tp != 0) {
      bad("tp",
          "found " + std::to_string(par.tp) + ", which does not divide the model's " + std::to_string(m.heads) +
              " attention heads",
          "a divisor of " + std::to_string(m.heads));
    }
    if (m.kv_heads % par.tp != 0 && par.tp % m.kv_heads != 0) {
      bad("tp",
          "found " + std::to_string(par.tp) + "; the model's " + std::to_string(m.kv_heads) +
              " KV heads can neither be split nor replicated evenly",
          "a divisor or a multiple of " + std::to_string(m.kv_heads));
    }
    if (par.cp > 1 && t.seq_len % (2 * par.cp) != 0) {
      bad("cp",
          "seq_len " + std::to_string(t.seq_len) + " does not split into 2*cp = " + std::to_string(2 * par.cp) +
              " load-balanced chunks",
          "seq_len divisible by 2*cp");
    }
  }
  const int layers = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
  const int vs = par.schedule == PipelineSchedule::interleaved ? par.virtual_stages : 1;
  if (par.virtual_stages > 1 && par.schedule != PipelineSchedule::interleaved) {
    bad("virtual_stages",
        "found " + std::to_string(par.virtual_stages) + " with schedule \"" + to_string(par.schedule) + "\"",
        "1, or schedule \"interleaved\"");
  }
  if (par.schedule == PipelineSchedule::interleaved && par.virtual_stages < 2) {
    // One chunk per stage is plain 1F1B under another name: refuse it rather than report it as interleaved.
    bad("virtual_stages",
        "found " + std::to_string(par.virtual_stages) +
            " with schedule \"interleaved\", which needs at least 2 chunks a stage",
        "2 or more, or schedule \"1f1b\"");
  }
  if (par.schedule == PipelineSchedule::interleaved && par.pp < 2) {
    bad("schedule", "\"interleaved\" needs pipeline parallelism (pp is 1)", "pp >= 2, or schedule \"1f1b\"");
  }
  if (layers % (par.pp * vs) != 0) {
    bad(vs > 1 ? "virtual_stages" : "pp",
        "the model's " + std::to_string(layers) +
            " layers do not split evenly into pp*virtual_stages = " + std::to_string(par.pp * vs) + " chunks",
        "pp*virtual_stages dividing " + std::to_string(layers));
  }
  if (par.ep > 1) {
    if (!m.moe.enabled()) bad("ep", "found " + std::to_string(par.ep) + " but the model has no experts", "1");
    if (m.moe.experts % par.ep != 0) {
      bad("ep",
          "found " + std::to_string(par.ep) + ", which does not divide the " + std::to_string(m.moe.experts) +
              " experts",
          "a divisor of " + std::to_string(m.moe.experts));
    }
    if (par.dp % par.ep != 0) {
      bad("ep", "found " + std::to_string(par.ep) + ", which does not divide dp " + std::to_string(par.dp),
          "a divisor of dp (expert-parallel groups are carved from data-parallel ranks)");
    }
  }
  if (par.sequence_parallel && par.tp == 1) {
    bad("sequence_parallel", "true with tp 1", "false, or tp > 1 (sequence parallelism splits along the TP group)");
  }
  if (t.global_batch % (t.micro_batch * par.dp) != 0) {
    out.push_back(LayoutProblem{"global_batch",
                                "found " + std::to_string(t.global_batch) +
                                    ", not a multiple of micro_batch*dp = " + std::to_string(t.micro_batch) + "*" +
                                    std::to_string(par.dp) + " = " + std::to_string(t.micro_batch * par.dp),
                                "a multiple of " + std::to_string(t.micro_batch * par.dp)});
  }
  if (!m.is_generic() && t.seq_len > m.max_seq) {
    out.push_back(LayoutProblem{
        "seq_len",
        "found " + std::to_string(t.seq_len) + ", longer than the model's max_seq " + std::to_string(m.max_seq),
        "at most " + std::to_string(m.max_seq) + " (or raise /model/max_seq)"});
  }
  if (par.schedule == PipelineSchedule::interleaved && par.virtual_stages > 1 && (t.grad_accum() % par.pp) != 0) {
    out.push_back(LayoutProblem{"global_batch",
                                "gives " + std::to_string(t.grad_accum()) +
                                    " micro-batches per replica, not a multiple of pp " + std::to_string(par.pp) +
                                    " as the interleaved schedule needs",
                                "global_batch / (micro_batch*dp) divisible by pp"});
  }
  if (t.grad_accum() > kMaxMicroBatches) {
    out.push_back(LayoutProblem{"global_batch",
                                "gives " + std::to_string(t.grad_accum()) +
                                    " micro-batches per data-parallel replica; at most " +
                                    std::to_string(kMaxMicroBatches) + " are simulated",
                                "a larger micro_batch or dp, or a smaller global_batch"});
  }
  return out;
}

}  // namespace

std::vector<LayoutProblem> check_training_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster) {
  return layout_problems(m, t, cluster.gpu_count(), true);
}

void require_simulable_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster) {
  const auto problems = layout_problems(m, t, cluster.gpu_count(), false);
  if (!problems.empty()) throw LayoutError(problems);
}

LayoutError::LayoutError(std::vector<LayoutProblem> p)
    : std::invalid_argument("training layout: " + p.front().field + ": " + p.front().what + "; expected " +
                            p.front().expected),
      problems(std::move(p)) {}

}  // namespace ctwin
