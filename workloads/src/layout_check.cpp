#include "workloads/layout_check.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "workloads/step_program.hpp"

namespace ctwin {

namespace {

// a*b for counts >= 0, saturating at LLONG_MAX instead of overflowing.
long long saturating_mul(long long a, long long b) {
  long long r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<long long>::max() : r;
}

// The layer split over pipeline stages (workloads/pipeline_split.hpp): pipeline_layers, Megatron's
// first / last stage counts, the embedding / loss counted as layers, or else an even split.
template <class Bad>
void split_problems(int layers, const Parallelism& par, int vs, Bad&& bad) {
  const int chunks = par.pp * vs;
  const std::string L = std::to_string(layers);
  const bool first = par.first_stage_layers >= 0, last = par.last_stage_layers >= 0;
  const bool account = par.account_for_embedding || par.account_for_loss;
  const char* account_key =
      par.account_for_embedding ? "account_for_embedding_in_pipeline_split" : "account_for_loss_in_pipeline_split";
  const char* first_key = first ? "decoder_first_pipeline_num_layers" : "decoder_last_pipeline_num_layers";
  if (!par.pipeline_layers.empty()) {
    if (first || last || account) {
      bad("pipeline_layers", std::string("given together with ") + (first || last ? first_key : account_key),
          "one way of splitting layers: pipeline_layers alone");
      return;
    }
    const int n = static_cast<int>(par.pipeline_layers.size());
    if (n != chunks) {
      bad("pipeline_layers",
          "has " + std::to_string(n) + " entries, but there are " + std::to_string(chunks) +
              (vs > 1 ? " virtual stages (pp*virtual_stages = " + std::to_string(par.pp) + "*" + std::to_string(vs) +
                            "; entry chunk*pp + stage)"
                      : " pipeline stages (pp)"),
          "one layer count per " + std::string(vs > 1 ? "virtual stage" : "stage") + ": " + std::to_string(chunks) +
              " entries");
      return;
    }
    long long sum = 0;
    for (int i = 0; i < n; ++i) {
      const int c = par.pipeline_layers[static_cast<std::size_t>(i)];
      if (c < 0) {
        bad("pipeline_layers/" + std::to_string(i), "found " + std::to_string(c), "a layer count >= 0");
        return;
      }
      sum += c;
    }
    if (sum != layers) {
      bad("pipeline_layers", "sums to " + std::to_string(sum) + ", but the model has " + L + " layers",
          "entries summing to " + L);
    }
    return;
  }
  if (first || last) {
    if (account) {
      bad(first_key, std::string("given together with ") + account_key,
          "either Megatron's first/last stage counts or the embedding/loss counted as layers, not both");
      return;
    }
    if (par.pp < 2) {
      bad(first_key, "given with pp 1: a single stage is both first and last", "pp >= 2, or no first/last count");
      return;
    }
    if (vs > 1) {
      bad(first_key, "given with the interleaved schedule",
          "schedule \"1f1b\" (or another without virtual stages), or pipeline_layers with one entry per virtual stage");
      return;
    }
    const int f = first ? par.first_stage_layers : 0, l = last ? par.last_stage_layers : 0;
    const int middle = par.pp - (first ? 1 : 0) - (last ? 1 : 0);
    const int rest = layers - f - l;
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle != 0)) {
      bad(first_key,
          "leaves " + std::to_string(rest) + " of the model's " + L + " layers for the " + std::to_string(middle) +
              " other stage(s), which do not split evenly",
          middle > 0 ? "first/last counts leaving a multiple of " + std::to_string(middle) + " layers"
                     : "first + last = " + L + " when pp is 2");
    }
    return;
  }
  const int total = layers + (par.account_for_embedding ? 1 : 0) + (par.account_for_loss ? 1 : 0);
  if (total % chunks != 0) {
    const std::string what =
        account ? " layers (with the embedding/loss counted as layers: " + std::to_string(total) + ")" : " layers";
    bad(account ? account_key : (vs > 1 ? "virtual_stages" : "pp"),
        "the model's " + L + what + " do not split evenly into pp*virtual_stages = " + std::to_string(chunks) +
            " chunks",
        "pp*virtual_stages dividing " + std::to_string(total) +
            ", or an uneven split (pipeline_layers, decoder_first/last_pipeline_num_layers)");
  }
}

// A step whose work alone, at the cluster's peak rate, takes longer than this is refused: each
// key may be in range while together they are out of proportion (a model at every maximum), and
// the simulated clock holds 2^63 ps (about 106 days).
constexpr double kMaxStepSeconds = 1e6;

// The step's FLOPs (a lower bound: the matmuls only) against the GPUs' fastest peak: one check,
// in doubles, of the magnitudes the simulation derives from the inputs together.
void magnitude_problems(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster,
                        std::vector<LayoutProblem>& out) {
  double flops = 0;
  std::string work;
  char buf[512];
  if (m.is_generic()) {
    double fwd = 0;
    for (const auto& l : m.generic_layers) fwd += l.fwd_flops;
    flops = 3 * fwd * t.global_batch;
    std::snprintf(buf, sizeof buf, "3 x %.3g forward FLOPs per sample x global_batch %d", fwd, t.global_batch);
    work = buf;
  } else {
    const double per_token = count_parameters(m).matmul_per_token;
    const double tokens = static_cast<double>(t.global_batch) * t.seq_len;
    flops = 6 * per_token * tokens;
    std::snprintf(buf, sizeof buf,
                  "6 x %.3g matmul parameters per token (layers, hidden, ffn_hidden, vocab, experts) x "
                  "global_batch*seq_len = %.3g tokens",
                  per_token, tokens);
    work = buf;
  }
  const GpuSpec& g = cluster.spec.gpu;
  const double peak = std::max({g.bf16_tflops, g.fp16_tflops, g.fp8_tflops, g.tf32_tflops}) * 1e12;
  const double gpus = cluster.gpu_count();
  const double seconds = flops / (peak * gpus);
  // A GPU without a rate (a hand-built spec in a unit test) is not checked: inputs have one.
  if (peak > 0 && !(seconds >= 0 && seconds <= kMaxStepSeconds)) {  // also NaN and infinity
    std::snprintf(
        buf, sizeof buf,
        "the step's work, at least %.3g FLOPs (%s), takes at least %.3g s at the peak of %g GPUs x %g TFLOP/s", flops,
        work.c_str(), seconds, gpus, peak / 1e12);
    out.push_back(LayoutProblem{
        "global_batch", buf, "a step under 1e6 s: a smaller model, global_batch or seq_len, or more or faster GPUs"});
  }
}

// Every problem, the cluster's GPU count checked exactly (a scenario) or as an upper bound (the
// simulator may run a layout on the first GPUs of a larger cluster).
std::vector<LayoutProblem> layout_problems(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster,
                                           bool exact) {
  std::vector<LayoutProblem> out;
  const int gpus = cluster.gpu_count();
  const auto& par = t.parallel;
  auto bad = [&](const std::string& key, const std::string& problem, const std::string& expected) {
    out.push_back(LayoutProblem{"parallelism/" + key, problem, expected});
  };
  // Each factor may be 2^20 or more: the product of four overflows even 64 bits (saturates).
  const long long product = saturating_mul(saturating_mul(saturating_mul(par.tp, par.pp), par.dp), par.cp);
  if (exact ? product != gpus : product > gpus) {
    bad("dp",
        "tp*pp*dp*cp = " + std::to_string(par.tp) + "*" + std::to_string(par.pp) + "*" + std::to_string(par.dp) + "*" +
            std::to_string(par.cp) + " = " +
            (product == std::numeric_limits<long long>::max() ? std::string("over 2^63") : std::to_string(product)) +
            ", but the cluster has " + std::to_string(gpus) + " GPUs",
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
  split_problems(layers, par, vs, bad);
  if (par.ep > 1) {
    if (!m.moe.enabled()) bad("ep", "found " + std::to_string(par.ep) + " but the model has no experts", "1");
    if (m.moe.experts % par.ep != 0) {
      bad("ep",
          "found " + std::to_string(par.ep) + ", which does not divide the " + std::to_string(m.moe.experts) +
              " experts",
          "a divisor of " + std::to_string(m.moe.experts));
    }
    if (experts_folded(par)) {
      // 64-bit: tp, cp and dp may each be large.
      const long long ranks = 1ll * par.tp * par.cp * par.dp;
      if (ranks % par.ep != 0) {
        bad("ep", "found " + std::to_string(par.ep) + ", which does not divide tp x cp x dp = " + std::to_string(ranks),
            "a divisor of tp x cp x dp (with etp 1 expert-parallel groups span TP, CP and DP ranks)");
      }
    } else if (par.dp % par.ep != 0) {
      bad("ep", "found " + std::to_string(par.ep) + ", which does not divide dp " + std::to_string(par.dp),
          "a divisor of dp (expert-parallel groups are carved from data-parallel ranks), or etp 1");
    }
  }
  if (par.etp != 0 && par.etp != 1 && par.etp != par.tp) {
    bad("etp", "found " + std::to_string(par.etp) + " with tp " + std::to_string(par.tp),
        "0 or tp (experts split over the TP ranks) or 1 (experts whole); other expert TP sizes are not modelled");
  }
  if (experts_folded(par) && par.ep < 2) {
    bad("etp", "1 with tp " + std::to_string(par.tp) + " but ep 1",
        "ep > 1, or etp 0 (experts split over the TP ranks)");
  }
  if (experts_folded(par) && !par.sequence_parallel) {
    bad("etp", "1 with tp " + std::to_string(par.tp) + " but sequence_parallel false",
        "sequence_parallel true: each TP rank dispatches its own 1/tp of the tokens (Megatron-Core requires it "
        "for MoE with tp > 1)");
  }
  if (par.cp > 1 && m.attention_window > 0 && par.cp_comm == Parallelism::CpComm::ring &&
      t.attention != AttentionKernel::standard) {
    // Ring attention passes every K/V chunk round the ring; a window leaves most steps idle, which
    // the ring's model does not know.
    bad("cp_comm",
        "\"ring\" with the model's sliding-window attention (attention_window " + std::to_string(m.attention_window) +
            ")",
        "\"all_gather\" (K/V gathered, then attention over the window), or cp 1");
  }
  if (par.sequence_parallel && par.tp == 1) {
    bad("sequence_parallel", "true with tp 1", "false, or tp > 1 (sequence parallelism splits along the TP group)");
  }
  // 64-bit: micro_batch (2^20) x dp (2^24) overflows an int.
  const long long per_step = 1ll * t.micro_batch * par.dp;
  if (t.global_batch % per_step != 0) {
    out.push_back(LayoutProblem{"global_batch",
                                "found " + std::to_string(t.global_batch) +
                                    ", not a multiple of micro_batch*dp = " + std::to_string(t.micro_batch) + "*" +
                                    std::to_string(par.dp) + " = " + std::to_string(per_step),
                                "a multiple of " + std::to_string(per_step)});
  }
  // grad_accum() (an int quotient) is only meaningful for a whole number of micro-batches.
  const bool whole = t.global_batch % per_step == 0;
  if (!m.is_generic() && t.seq_len > m.max_seq) {
    out.push_back(LayoutProblem{
        "seq_len",
        "found " + std::to_string(t.seq_len) + ", longer than the model's max_seq " + std::to_string(m.max_seq),
        "at most " + std::to_string(m.max_seq) + " (or raise /model/max_seq)"});
  }
  if (whole && par.schedule == PipelineSchedule::interleaved && par.virtual_stages > 1 &&
      (t.grad_accum() % par.pp) != 0) {
    out.push_back(LayoutProblem{"global_batch",
                                "gives " + std::to_string(t.grad_accum()) +
                                    " micro-batches per replica, not a multiple of pp " + std::to_string(par.pp) +
                                    " as the interleaved schedule needs",
                                "global_batch / (micro_batch*dp) divisible by pp"});
  }
  if (whole && t.grad_accum() > kMaxMicroBatches) {
    out.push_back(LayoutProblem{"global_batch",
                                "gives " + std::to_string(t.grad_accum()) +
                                    " micro-batches per data-parallel replica; at most " +
                                    std::to_string(kMaxMicroBatches) + " are simulated",
                                "a larger micro_batch or dp, or a smaller global_batch"});
  }
  magnitude_problems(m, t, cluster, out);
  return out;
}

}  // namespace

std::vector<LayoutProblem> check_training_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster) {
  return layout_problems(m, t, cluster, true);
}

void require_simulable_layout(const ModelSpec& m, const TrainingConfig& t, const Cluster& cluster) {
  const auto problems = layout_problems(m, t, cluster, false);
  if (!problems.empty()) throw LayoutError(problems);
}

LayoutError::LayoutError(std::vector<LayoutProblem> p)
    : std::invalid_argument("training layout: " + p.front().field + ": " + p.front().what + "; expected " +
                            p.front().expected),
      problems(std::move(p)) {}

}  // namespace ctwin
