#include "training_report.hpp"

#include <cstdio>

#include "report_format.hpp"
#include "workloads/model.hpp"
#include "workloads/offload.hpp"
#include "workloads/pipeline_split.hpp"

namespace ctwin {

std::vector<std::string> training_warnings(const Scenario& sc, const TrainingResult& r) {
  std::vector<std::string> w = sc.warnings;  // the loader's (suspicious values), then the run's
  const auto& m = r.memory;
  const double margin = training_job(sc).training.memory_margin;
  char buf[512];
  if (m.oom) {
    w.push_back("out of memory: the peak stage " + m.advice);
  } else if (m.peak > (1 - margin) * m.capacity) {
    std::snprintf(buf, sizeof buf,
                  "memory headroom: peak %.2f GiB is %.1f%% of the GPU's %.2f GiB, above the %.1f%% that "
                  "/training/memory_margin = %g leaves; fragmentation or a larger batch may not fit",
                  m.peak / (1024.0 * 1024 * 1024), 100 * m.peak / m.capacity, m.capacity / (1024.0 * 1024 * 1024),
                  100 * (1 - margin), margin);
    w.emplace_back(buf);
  }
  const auto& job = training_job(sc);
  if (job.training.offload.active()) {
    const NodeOffloadMemory host = node_offload_memory(job.model, job.training, sc.cluster);
    if (host.host_oom) {
      std::snprintf(buf, sizeof buf,
                    "out of host memory: offloading needs %.1f GiB per node, the node has %.1f GiB "
                    "(/training/offload/host_memory_gib); try offloading to \"nvme\" or more nodes",
                    host.host_bytes / (1024.0 * 1024 * 1024), host.host_capacity / (1024.0 * 1024 * 1024));
      w.emplace_back(buf);
    }
  }
  return w;
}

namespace {

// One pipeline stage's row: its layers, its busy (compute and optimizer) and idle time over
// the step, and its peak memory (estimate_stage_memory).
struct StageRow {
  int layers = 0;
  double compute_s = 0, idle_s = 0, peak_bytes = 0;
};

std::vector<StageRow> stage_rows(const Scenario& sc, const TrainingResult& r) {
  const ModelSpec& model = training_job(sc).model;
  const int pp = static_cast<int>(r.stage_utilization.size());
  const int layers = model.is_generic() ? static_cast<int>(model.generic_layers.size()) : model.layers;
  const PipelineSplit split = pipeline_split(layers, training_job(sc).training.parallel);
  std::vector<StageRow> rows;
  for (int s = 0; s < pp; ++s) {
    StageRow row;
    row.layers = s < split.pp ? split.stage_layers(s) : 0;
    row.compute_s = r.stage_utilization[s] * r.step_time_s;
    row.idle_s = r.step_time_s - row.compute_s;
    row.peak_bytes = s < static_cast<int>(r.stage_memory.size()) ? r.stage_memory[s].peak : r.memory.peak;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

nlohmann::ordered_json training_report_json(const Scenario& sc, const TrainingResult& r) {
  using J = nlohmann::ordered_json;
  const auto& p = training_job(sc).training.parallel;
  J j;
  j["kind"] = "training";
  j["scenario"] = sc.name;
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["hw_tflops_per_gpu"] = r.hw_tflops_per_gpu;
  j["hfu"] = r.hfu;
  j["model_flops_per_step"] = r.model_flops_per_step;
  j["tokens_per_step"] = r.tokens_per_step;
  j["gpus"] = r.gpus;
  j["layout"] = J{{"tp", p.tp},
                  {"pp", p.pp},
                  {"dp", p.dp},
                  {"cp", p.cp},
                  {"ep", p.ep},
                  {"etp", expert_tp(p)},
                  {"micro_batch", training_job(sc).training.micro_batch},
                  {"grad_accum", r.grad_accum},
                  {"schedule", to_string(p.schedule)},
                  {"zero_stage", p.zero_stage},
                  {"recompute", to_string(training_job(sc).training.recompute)}};
  if (training_job(sc).training.recompute == Recompute::full) {
    j["layout"]["recompute_method"] = recompute_method_names.name(training_job(sc).training.recompute_method);
    j["layout"]["recompute_num_layers"] = training_job(sc).training.recompute_num_layers;
  }
  {
    // Parameters of the whole model (all experts), those a token uses, and model FLOPs per
    // token of a training step (6N plus attention at this seq_len, as model_flops_per_step).
    const ParamCounts pc = count_parameters(training_job(sc).model);
    j["model"] = J{{"name", training_job(sc).model.name},
                   {"params", pc.total},
                   {"active_params", pc.active_per_token},
                   {"flops_per_token", r.tokens_per_step > 0 ? r.model_flops_per_step / r.tokens_per_step : 0.0}};
  }
  const auto& m = r.memory;
  // peak_bytes = reserved_bytes + comm_buffers + overhead; reserved = allocated x (1 + the
  // allocator's reserve fraction); allocated = the by_kind terms up to gathered.
  j["memory"] = J{{"peak_bytes", m.peak},
                  {"allocated_bytes", m.allocated},
                  {"reserved_bytes", m.reserved},
                  {"capacity_bytes", m.capacity},
                  {"oom", m.oom},
                  {"by_kind", J{{"weights", m.weights},
                                {"grads", m.grads},
                                {"optimizer", m.optimizer},
                                {"activations", m.activations},
                                {"recompute", m.recompute},
                                {"gathered", m.gathered},
                                {"comm_buffers", m.comm_buffers},
                                {"overhead", m.overhead}}}};
  if (m.oom) j["memory"]["advice"] = m.advice;
  if (training_job(sc).training.offload.active()) {
    // Offloaded states per node (workloads/offload.hpp); host_oom only where the node's host memory is known.
    const NodeOffloadMemory host = node_offload_memory(training_job(sc).model, training_job(sc).training, sc.cluster);
    j["memory"]["offload"] = J{{"host_bytes_per_gpu", m.host_bytes},        {"nvme_bytes_per_gpu", m.nvme_bytes},
                               {"host_bytes_per_node", host.host_bytes},    {"nvme_bytes_per_node", host.nvme_bytes},
                               {"host_capacity_bytes", host.host_capacity}, {"host_oom", host.host_oom}};
  }
  const auto& b = r.breakdown;
  // Disjoint parts: the top-level numbers add up to the step time once; exposed_comm is split
  // by group in its own object.
  j["breakdown_s"] = J{{"compute", b.compute_s},
                       {"optimizer", b.optimizer_s},
                       {"exposed_comm", b.exposed_comm_s()},
                       {"bubble", b.bubble_s},
                       {"other", b.other_s},
                       {"exposed_comm_by_group", J{{"tp", b.exposed_tp_s},
                                                   {"cp", b.exposed_cp_s},
                                                   {"ep", b.exposed_ep_s},
                                                   {"dp", b.exposed_dp_s},
                                                   {"pp", b.exposed_pp_s},
                                                   {"offload", b.exposed_offload_s}}}};
  j["stage_utilization"] = r.stage_utilization;
  j["stages"] = J::array();
  for (const auto& st : stage_rows(sc, r)) {
    j["stages"].push_back(
        J{{"layers", st.layers}, {"compute_s", st.compute_s}, {"idle_s", st.idle_s}, {"peak_bytes", st.peak_bytes}});
  }
  if (r.step_times_s.size() > 1) {
    j["steps"] = J{{"count", r.step_times_s.size()},
                   {"step_time_p50_s", r.step_time_p50_s},
                   {"step_time_p99_s", r.step_time_p99_s},
                   {"step_times_s", r.step_times_s}};
  }
  if (!r.busiest_links.empty()) {
    j["busiest_links"] = J::array();
    for (const auto& l : r.busiest_links) {
      j["busiest_links"].push_back(J{{"link", l.name},
                                     {"class", link_class(l.name)},
                                     {"links_in_class", l.links},
                                     {"bytes", l.bytes},
                                     {"capacity_gbyte_per_s", l.capacity_gbyte_per_s},
                                     {"busy_fraction", l.busy_fraction}});
    }
  }
  j["warnings"] = training_warnings(sc, r);
  j["simulation"] = J{{"simulated_gpus", r.simulated_gpus}, {"folded", r.folded}, {"tp_folded", r.tp_folded},
                      {"cp_folded", r.cp_folded},           {"tasks", r.tasks},   {"events", r.events}};
  // The micro-batch counts simulated when the steady state was extrapolated (docs/training.md).
  if (!r.simulated_micro_batches.empty()) j["simulation"]["simulated_micro_batches"] = r.simulated_micro_batches;
  return j;
}

namespace {

std::string gib(double b) { return format_gib(b); }
std::string ms(double s) { return format_ms(s, 3); }

std::string pct(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%5.1f%%", whole > 0 ? 100 * part / whole : 0.0);
  return buf;
}

}  // namespace

std::string training_report_text(const Scenario& sc, const TrainingResult& r) {
  const auto& p = training_job(sc).training.parallel;
  std::string o;
  char line[256];
  auto row = [&](const char* k, const std::string& v) {
    std::snprintf(line, sizeof line, "  %-28s %s\n", k, v.c_str());
    o += line;
  };
  o += "ClusterTwin training step: " + sc.name + "\n";
  // The layout: TP, PP and DP always, EP and CP when not 1.
  std::string layout = "TP" + std::to_string(p.tp) + " PP" + std::to_string(p.pp) + " DP" + std::to_string(p.dp);
  if (p.ep > 1) layout += " EP" + std::to_string(p.ep);
  if (p.ep > 1 && experts_folded(p)) layout += " ETP1";
  if (p.cp > 1) layout += " CP" + std::to_string(p.cp);
  std::snprintf(line, sizeof line, "  %s on %d x %s (%s, %d node%s); %s; micro-batch %d x %d accum; seq %d",
                training_job(sc).model.name.c_str(), r.gpus, sc.cluster.gpu.name.c_str(), sc.cluster.name.c_str(),
                sc.cluster.nodes, sc.cluster.nodes == 1 ? "" : "s", layout.c_str(),
                training_job(sc).training.micro_batch, r.grad_accum, training_job(sc).training.seq_len);
  o += line;
  // Recomputation, when on: which layers full recomputation reruns unless it is all of them one by one.
  const TrainingConfig& tc = training_job(sc).training;
  if (tc.recompute != Recompute::none) o += std::string("; recompute ") + to_string(tc.recompute);
  if (tc.recompute == Recompute::full && tc.recompute_method == RecomputeMethod::block) {
    o += " (block: the first " + std::to_string(tc.recompute_num_layers) + " layers of each chunk)";
  } else if (tc.recompute == Recompute::full && tc.recompute_num_layers > 1) {
    o += " (uniform groups of " + std::to_string(tc.recompute_num_layers) + " layers)";
  }
  o += "\n";
  {
    const ParamCounts pc = count_parameters(training_job(sc).model);
    std::snprintf(line, sizeof line,
                  "  model: %s parameters (%s active per token), %s FLOPs per token (forward + backward)\n\n",
                  human_number(pc.total).c_str(), human_number(pc.active_per_token).c_str(),
                  human_number(r.tokens_per_step > 0 ? r.model_flops_per_step / r.tokens_per_step : 0.0).c_str());
    o += line;
  }
  row("step time", ms(r.step_time_s));
  if (r.step_times_s.size() > 1) {
    row("step time p50 / p99", ms(r.step_time_p50_s) + " / " + ms(r.step_time_p99_s) + " over " +
                                   std::to_string(r.step_times_s.size()) + " steps");
  }
  row("tokens/s", human_number(r.tokens_per_s));
  std::snprintf(line, sizeof line, "%.1f TFLOP/s (peak %.0f)", r.tflops_per_gpu, r.peak_tflops);
  row("model TFLOP/s per GPU", line);
  std::snprintf(line, sizeof line, "%.1f%%", 100 * r.mfu);
  row("MFU", line);
  std::snprintf(line, sizeof line, "%.1f%% (%.1f TFLOP/s with recomputation)", 100 * r.hfu, r.hw_tflops_per_gpu);
  row("HFU", line);
  o += "\n  where the step goes (GPU 0)\n";
  const auto& b = r.breakdown;
  const double st = r.step_time_s;
  auto part = [&](const char* k, double v) {
    std::snprintf(line, sizeof line, "    %-26s %12s  %s\n", k, ms(v).c_str(), pct(v, st).c_str());
    o += line;
  };
  part("compute", b.compute_s);
  if (p.tp > 1) part("exposed TP comm", b.exposed_tp_s);
  if (p.cp > 1) part("exposed CP comm", b.exposed_cp_s);
  if (p.ep > 1) part("exposed EP comm", b.exposed_ep_s);
  part("exposed DP comm", b.exposed_dp_s);
  if (p.pp > 1) {
    part("exposed PP comm", b.exposed_pp_s);
    part("pipeline bubble", b.bubble_s);
  }
  if (b.exposed_offload_s > 0) part("exposed PCIe offload", b.exposed_offload_s);
  part("optimizer", b.optimizer_s);
  // Collective members that reached a call before their peers (skew from imbalance or congestion
  // elsewhere), and idle time outside a pipeline: the JSON calls it "other".
  part("waiting for peer ranks", b.other_s);
  o += "\n  memory per GPU (peak stage)\n";
  const auto& m = r.memory;
  auto mem = [&](const char* k, double v) {
    std::snprintf(line, sizeof line, "    %-26s %12s\n", k, gib(v).c_str());
    o += line;
  };
  mem("weights", m.weights);
  mem("gradients", m.grads);
  mem("optimizer states", m.optimizer);
  mem("activations", m.activations);
  if (m.recompute > 0) mem("recomputed layer", m.recompute);
  if (m.gathered > 0) mem("ZeRO-3 gathered units", m.gathered);
  mem("allocated (PyTorch peak)", m.allocated);
  mem("reserved (allocator)", m.reserved);
  mem("comm buffers + overhead", m.comm_buffers + m.overhead);
  std::snprintf(line, sizeof line, "    %-26s %12s of %s  %s\n", "peak", gib(m.peak).c_str(), gib(m.capacity).c_str(),
                m.oom ? "OUT OF MEMORY" : "fits");
  o += line;
  if (m.oom) o += "    " + m.advice + "\n";
  if (training_job(sc).training.offload.active()) {
    const NodeOffloadMemory host = node_offload_memory(training_job(sc).model, training_job(sc).training, sc.cluster);
    std::snprintf(line, sizeof line, "    %-26s %12s per GPU, %s per node", "offloaded to host memory",
                  gib(m.host_bytes).c_str(), gib(host.host_bytes).c_str());
    o += line;
    if (host.host_capacity > 0) {
      o += " of " + gib(host.host_capacity) + (host.host_oom ? "  OUT OF HOST MEMORY" : "  fits");
    }
    o += "\n";
    if (m.nvme_bytes > 0) {
      std::snprintf(line, sizeof line, "    %-26s %12s per GPU, %s per node\n", "offloaded to NVMe",
                    gib(m.nvme_bytes).c_str(), gib(host.nvme_bytes).c_str());
      o += line;
    }
  }
  if (p.pp > 1) {
    o += "\n  pipeline stages\n";
    std::snprintf(line, sizeof line, "    %-6s %6s %12s %12s %12s\n", "stage", "layers", "compute", "idle",
                  "peak memory");
    o += line;
    const auto rows = stage_rows(sc, r);
    for (std::size_t s = 0; s < rows.size(); ++s) {
      std::snprintf(line, sizeof line, "    %-6zu %6d %12s %12s %12s\n", s, rows[s].layers,
                    ms(rows[s].compute_s).c_str(), ms(rows[s].idle_s).c_str(), gib(rows[s].peak_bytes).c_str());
      o += line;
    }
  }
  if (!r.busiest_links.empty()) {
    // At flow fidelity: where the rank order put the traffic (/training/parallelism/order).
    // One line per class of link (GPU port, NIC, leaf uplink...): its busiest, and how many
    // links of the class carried traffic.
    o += "\n  busiest links (the most loaded of each kind: bytes this step over capacity x step time)\n";
    for (const auto& l : r.busiest_links) {
      std::snprintf(line, sizeof line, "    %-36s %9.2f GB %7.1f GB/s  busy %5.1f%%  (of %d like it)\n", l.name.c_str(),
                    l.bytes / 1e9, l.capacity_gbyte_per_s, 100 * l.busy_fraction, l.links);
      o += line;
    }
  }
  // What stood for what (docs/training.md, "Folding").
  std::string folded;
  auto fold_part = [&](bool on, const std::string& what) {
    if (on) folded += (folded.empty() ? " (folded: " : ", ") + what;
  };
  fold_part(r.folded, "identical data-parallel replicas into one");
  fold_part(r.tp_folded, "each TP group's " + std::to_string(p.tp) + " ranks into one");
  fold_part(r.cp_folded, "each CP group's " + std::to_string(p.cp) + " ranks into one");
  if (!r.simulated_micro_batches.empty()) {
    const auto& mb = r.simulated_micro_batches;
    fold_part(true, "the " + std::to_string(r.grad_accum) + " micro-batches as runs of " + std::to_string(mb[0]) +
                        ", " + std::to_string(mb[1]) + " and " + std::to_string(mb[2]) +
                        " whose steady period is extended to the step");
  }
  if (!folded.empty()) folded += "; --no-fold to simulate all)";
  // Built as a string: the folding note can outgrow a line buffer.
  o += "\n  simulated " + std::to_string(r.simulated_gpus) + " of " + std::to_string(r.gpus) + " GPUs" + folded + ": " +
       std::to_string(r.tasks) + " tasks, " + std::to_string(r.events) + " events\n";
  return o;
}

}  // namespace ctwin
