#include "workloads/training_trace.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <utility>

#include "workloads/memory.hpp"

namespace ctwin {

std::vector<StepCollective> step_collectives(const StepProgram& p) {
  std::vector<StepCollective> out;
  for (const StepOp& mt : p.ops) {
    if (mt.cls == OpClass::compute || mt.cls == OpClass::optimizer) continue;
    if (!mt.call.valid()) continue;
    const auto& call = p.calls[mt.call.value];
    StepCollective sc;
    const StepGpu& c = p.gpus[mt.gpu];
    sc.rank = c.rank;
    sc.stage = c.pp;
    sc.group = static_cast<CommGroup>(mt.group);
    sc.op = call.op;
    sc.bytes = call.bytes;
    sc.group_size = static_cast<int>(p.groups[call.group].size());
    sc.phase = static_cast<StepCollective::Phase>(std::min<int>(static_cast<int>(mt.phase), 3));
    sc.micro_batch = sc.phase == StepCollective::Phase::step ? -1 : mt.mb;
    sc.layer = mt.layer;
    sc.name = p.names.str(mt.name);
    out.push_back(std::move(sc));
  }
  return out;
}

Trace training_trace(const StepProgram& p, Trace names, const std::vector<std::vector<std::uint32_t>>& gpu_ops,
                     const TaskGraph& graph, const StreamExecutor& exec, const TrainingConfig& cfg,
                     const Cluster& cluster, const TrainingResult& res) {
  const auto& par = cfg.parallel;
  Trace tr = std::move(names);
  const auto gpn = cluster.spec.gpus_per_node;
  // Each GPU's lanes by stream: compute, dp comm, pp comm, then tp comm and cp comm if used.
  std::vector<std::array<std::uint32_t, kStepStreams>> lane_of(p.gpus.size());
  for (std::uint32_t g = 0; g < p.gpus.size(); ++g) {
    const auto& c = p.gpus[g];
    const int rank = c.rank;
    const std::string proc = "gpu " + std::to_string(rank);
    const std::string group = "node " + std::to_string(rank / gpn) + " / stage " + std::to_string(c.pp);
    const auto pid = static_cast<std::uint32_t>(rank);
    auto& l = lane_of[g];
    l[0] = tr.add_lane(proc, "compute", group, pid, 0);
    l[1] = tr.add_lane(proc, "dp comm", group, pid, 1);
    l[2] = tr.add_lane(proc, "pp comm", group, pid, 2);
    l[3] = l[4] = l[5] = l[6] = l[7] = l[0];
    if (par.tp_comm_overlap) l[3] = tr.add_lane(proc, "tp comm", group, pid, 3);
    if (par.cp > 1 && par.cp_comm == Parallelism::CpComm::ring) l[4] = tr.add_lane(proc, "cp comm", group, pid, 4);
    if (p.offload) {
      l[5] = tr.add_lane(proc, "pcie h2d", group, pid, 5);
      l[6] = tr.add_lane(proc, "pcie d2h", group, pid, 6);
      l[7] = tr.add_lane(proc, "host cpu", group, pid, 7);
    }
  }
  tr.events.reserve(p.ops.size());
  static const char* kPhase[] = {"", "bwd ", "recompute ", ""};
  std::unordered_map<std::uint64_t, std::uint32_t> display;  // (name, layer, mb, phase) -> interned
  auto display_name = [&](const StepOp& mt) {
    const std::uint64_t key = std::uint64_t{mt.name} << 40 | std::uint64_t(static_cast<std::uint16_t>(mt.layer)) << 24 |
                              std::uint64_t{mt.mb} << 8 | static_cast<std::uint64_t>(mt.phase);
    auto it = display.find(key);
    if (it != display.end()) return it->second;
    std::string n;
    if (mt.phase != StepPhase::step) n.append("mb").append(std::to_string(mt.mb)).append(" ");
    if (mt.layer >= 0) n.append("L").append(std::to_string(mt.layer)).append(" ");
    n += kPhase[static_cast<int>(mt.phase) & 3];
    n += tr.str(mt.name);
    const auto id = tr.intern(n);
    display.emplace(key, id);
    return id;
  };
  for (std::uint32_t t = 0; t < p.ops.size(); ++t) {
    const auto& mt = p.ops[t];
    const auto& tm = exec.timing(TaskId(t));
    const auto& task = graph.task(TaskId(t));
    TraceEvent e;
    e.lane = lane_of[mt.gpu][static_cast<int>(mt.stream)];
    e.name = display_name(mt);
    e.kind = mt.kind;
    e.start_ps = tm.start.ps;
    e.dur_ps = (tm.end - tm.start).ps;
    e.flops = mt.flops;
    e.bytes = mt.bytes;
    e.group = task.rendezvous.valid() ? task.rendezvous.value : kNoIndex;
    tr.events.push_back(e);
  }
  // Pipeline transfers as arrows from sender to receiver.
  for (std::uint32_t r = 0; r < graph.rendezvous_count(); ++r) {
    const auto mem = exec.members(RendezvousId(r));
    if (p.calls[r].op != CollectiveOp::send_recv || mem.size() != 2) continue;
    const auto& a = p.ops[mem[0]];
    const auto& z = p.ops[mem[1]];
    if (a.stream != StepStream::pp_transfer) continue;  // ring attention's K/V steps are drawn with the collectives
    const bool a_sends = tr.str(a.name).rfind("send", 0) == 0;
    const auto& from = a_sends ? a : z;
    const auto& to = a_sends ? z : a;
    const TaskId from_id(a_sends ? mem[0] : mem[1]);
    const TaskId to_id(a_sends ? mem[1] : mem[0]);
    tr.arrows.push_back(TraceArrow{lane_of[from.gpu][2], lane_of[to.gpu][2], exec.timing(from_id).start.ps,
                                   exec.timing(to_id).end.ps, display_name(from)});
  }
  // Collectives as arrows around their ring of members (bounded, so huge traces stay light).
  constexpr std::size_t kMaxCollectiveArrows = 200000;
  for (std::uint32_t r = 0; r < graph.rendezvous_count() && tr.arrows.size() < kMaxCollectiveArrows; ++r) {
    const auto mem = exec.members(RendezvousId(r));
    if (mem.size() < 2 || p.ops[mem[0]].stream == StepStream::pp_transfer) continue;  // pipeline transfers: above
    for (std::size_t i = 0; i < mem.size(); ++i) {
      const TaskId from(mem[i]), to(mem[(i + 1) % mem.size()]);
      const auto& fm = p.ops[from.value];
      const auto& tm = p.ops[to.value];
      tr.arrows.push_back(TraceArrow{lane_of[fm.gpu][static_cast<int>(fm.stream)],
                                     lane_of[tm.gpu][static_cast<int>(tm.stream)], exec.timing(from).start.ps,
                                     exec.timing(to).end.ps, display_name(fm)});
    }
  }
  // Memory in use per GPU, by the model the report uses (estimate_stage_memory): the stage's peak
  // less its in-flight activations, then each chunk forward adds and each chunk backward frees
  // 1/v of a whole-stage micro-batch's activations, so the counter peaks at the stage's peak.
  const int v = par.schedule == PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
  for (std::uint32_t g = 0; g < p.gpus.size(); ++g) {
    const int stage = p.gpus[g].pp;
    const MemoryBreakdown& sm = res.stage_memory.at(static_cast<std::size_t>(stage));
    const double act = sm.activations_per_microbatch / v;
    const double static_bytes = sm.peak - sm.activations_per_microbatch * inflight_microbatches(cfg, stage);
    TraceCounterTrack ct;
    ct.process = tr.lanes[lane_of[g][0]].process;
    ct.pid = tr.lanes[lane_of[g][0]].pid;
    ct.name = tr.intern("memory_bytes");
    double cur = static_bytes;
    ct.samples.emplace_back(0, cur);
    for (std::uint32_t t : gpu_ops[g]) {
      const auto& mt = p.ops[t];
      if (mt.activation_delta == 0) continue;
      cur += mt.activation_delta * act;
      const auto when = mt.activation_delta > 0 ? exec.timing(TaskId(t)).start.ps : exec.timing(TaskId(t)).end.ps;
      ct.samples.emplace_back(when, cur);
    }
    std::stable_sort(ct.samples.begin(), ct.samples.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    tr.counters.push_back(std::move(ct));
  }
  canonicalize(tr);
  tr.summary = {{"step_time_s", res.step_time_s},
                {"mfu", res.mfu},
                {"compute_s", res.breakdown.compute_s},
                {"optimizer_s", res.breakdown.optimizer_s},
                {"exposed_comm_s", res.breakdown.exposed_comm_s()},
                {"bubble_s", res.breakdown.bubble_s},
                {"other_s", res.breakdown.other_s}};
  // The exposed communication by group, and the rank layout of the simulated GPUs (the
  // viewer's --fold): each dimension's size as simulated and its stride in ranks, so a rank's
  // coordinate is (rank / stride) % size; EP is carved from consecutive DP coordinates.
  const auto& b = res.breakdown;
  for (const auto& [k, v] :
       {std::pair{"exposed_tp_s", b.exposed_tp_s}, std::pair{"exposed_cp_s", b.exposed_cp_s},
        std::pair{"exposed_ep_s", b.exposed_ep_s}, std::pair{"exposed_dp_s", b.exposed_dp_s},
        std::pair{"exposed_pp_s", b.exposed_pp_s}, std::pair{"exposed_offload_s", b.exposed_offload_s}}) {
    if (v > 0) tr.summary.emplace_back(k, v);
  }
  if (!p.gpus.empty()) {
    auto coord = [](const StepGpu& g, int d) { return d == 0 ? g.tp : d == 1 ? g.cp : d == 2 ? g.dp : g.pp; };
    const StepGpu& g0 = p.gpus.front();
    static const char* kDim[] = {"tp", "cp", "dp", "pp"};
    int dp_size = 1;
    for (int d = 0; d < 4; ++d) {
      int size = 1, stride = 1;
      for (const StepGpu& g : p.gpus) {
        size = std::max(size, coord(g, d) + 1);
        bool unit_step = coord(g, d) == coord(g0, d) + 1;
        for (int o = 0; o < 4 && unit_step; ++o) unit_step = o == d || coord(g, o) == coord(g0, o);
        if (unit_step) stride = g.rank - g0.rank;
      }
      if (d == 2) dp_size = size;
      tr.summary.emplace_back(std::string(kDim[d]) + "_size", size);
      tr.summary.emplace_back(std::string(kDim[d]) + "_stride", stride);
    }
    if (par.ep > 1 && dp_size % par.ep == 0) tr.summary.emplace_back("ep_size", par.ep);
  }
  return tr;
}

}  // namespace ctwin
