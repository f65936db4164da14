// ctwin collective: what nccl-tests would print for a collective on a cluster, predicted.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "scenario_parts.hpp"
#include "sim/error.hpp"
#include "topology/catalog_json.hpp"
#include "topology/collective.hpp"
#include "topology/custom_all_reduce.hpp"
#include "topology/network.hpp"

namespace ctwin {
namespace {

CollectiveOp parse_op(const std::string& s) {
  const std::pair<const char*, CollectiveOp> ops[] = {{"all_reduce", CollectiveOp::all_reduce},
                                                      {"all_gather", CollectiveOp::all_gather},
                                                      {"reduce_scatter", CollectiveOp::reduce_scatter},
                                                      {"broadcast", CollectiveOp::broadcast},
                                                      {"reduce", CollectiveOp::reduce},
                                                      {"all_to_all", CollectiveOp::all_to_all},
                                                      {"send_recv", CollectiveOp::send_recv}};
  for (const auto& [name, op] : ops) {
    if (s == name) return op;
  }
  throw InputError("", "--op", "unknown collective '" + s + "'",
                   "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or send_recv");
}

std::size_t dtype_bytes(const std::string& s) {
  if (s == "bf16" || s == "fp16" || s == "half") return 2;
  if (s == "fp32" || s == "float" || s == "int32") return 4;
  if (s == "fp8" || s == "int8" || s == "uint8") return 1;
  if (s == "fp64" || s == "double" || s == "int64") return 8;
  throw InputError("", "--dtype", "unknown type '" + s + "'", "bf16, fp16, fp32, fp8, int8, fp64");
}

}  // namespace

int cmd_collective(const Args& args) {
  const std::string usage =
      "usage: ctwin collective --op OP (--cluster PRESET | --cluster-file FILE) [--nodes N] [--gpus-per-node G]\n"
      "                        [--algo auto|ring|tree|nvls|nvlstree|collnet] [--proto auto|ll|ll128|simple]\n"
      "                        [--dtype bf16] [--min-bytes 8] [--max-bytes 8G] [--step-factor 2]\n"
      "                        [--fidelity analytical|flow] [--set /cluster/KEY=VALUE]... [--custom-all-reduce]\n"
      "                        [--gpus-per-thread G] [--json]\n\n"
      "Predicts what nccl-tests' OP_perf would print on the cluster: per size, the time, algbw and\n"
      "busbw with nccl-tests' conventions (all_reduce busbw = algbw*2(n-1)/n; all_gather,\n"
      "reduce_scatter and all_to_all (n-1)/n; broadcast, reduce and send_recv 1).\n\n"
      "The cluster is read as a scenario's /cluster: {\"preset\": PRESET, \"nodes\": N}, or\n"
      "{\"file\": FILE} with --cluster-file (a description from ctwin cluster --write); --set\n"
      "changes any of its keys with the scenario's pointers, e.g. --set /cluster/oversubscription=2.";
  auto p = parse_args(
      args, usage,
      {{"--op", "OP", "all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, send_recv"},
       {"--cluster", "PRESET", "dgx-a100, dgx-h100, hgx-h200, dgx-b200, l40s-pcie, h100-pcie"},
       {"--cluster-file", "FILE", "a cluster description written by ctwin cluster --write, instead of --cluster"},
       {"--set", "/POINTER=VALUE", "override a /cluster key as in a scenario, e.g. --set /cluster/oversubscription=2",
        true},
       {"--nodes", "N", "nodes (default 1)"},
       {"--gpus-per-node", "G", "GPUs per node taking part (default: the preset's)"},
       {"--algo", "ALGO",
        "auto (default: NCCL's tuner picks by size and topology), ring, tree, nvls, nvlstree or collnet"},
       {"--proto", "PROTO", "auto (default), ll, ll128 or simple"},
       {"--sharp", "", "the fabric reduces in-network (SHARP), so CollNet applies"},
       {"--dtype", "TYPE", "element type for the count column (default bf16)"},
       {"--min-bytes", "SIZE", "smallest size (default 8)"},
       {"--max-bytes", "SIZE", "largest size (default 8G)"},
       {"--step-factor", "F", "size multiplier between rows (default 2)"},
       {"--fidelity", "MODE", "analytical (default) or flow (max-min flows on the cluster graph)"},
       {"--custom-all-reduce", "",
        "time the all_reduce sizes vLLM's and TensorRT-LLM's own kernels take (up to 8 MiB on 2, 4, 6 or 8 GPUs of "
        "one NVSwitch node) on those one-shot / two-shot kernels, as serving does; NCCL takes the rest"},
       {"--gpus-per-thread", "G",
        "GPUs one process thread drives, as nccl-tests' -g (default 1, one GPU a process as with mpirun -np N -g 1); "
        "with -g 8 an iteration takes at least the 8 kernel launches one after another"},
       {"--json", "", "print a JSON list of rows"}});
  if (!p) return kExitOk;
  if (!p->positional.empty()) throw InputError("", p->positional[0], "unexpected argument", "options only");
  const auto op_name = p->get("--op");
  if (!op_name) throw InputError("", "--op", "missing", "the collective to predict, e.g. --op all_reduce");
  const CollectiveOp op = parse_op(*op_name);
  const auto preset = p->get("--cluster");
  const auto cluster_file = p->get("--cluster-file");
  if (preset && cluster_file) throw InputError("", "--cluster-file", "given with --cluster", "one of the two");
  if (!preset && !cluster_file) {
    throw InputError("", "--cluster", "missing", "a cluster preset, e.g. --cluster dgx-h100, or --cluster-file FILE");
  }
  const double nodes_d = p->number("--nodes", 1);
  if (nodes_d < 1 || nodes_d != std::floor(nodes_d))
    throw InputError("", "--nodes", "must be a positive integer", "1, 2, ...");
  ClusterSpec spec;
  if (preset && !preset_cluster(*preset, static_cast<int>(nodes_d), builtin_gpus(), spec)) {
    std::string names;
    for (const auto& n : preset_cluster_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError("", "--cluster", "unknown preset '" + *preset + "'", "one of " + names);
  }
  // The cluster as a scenario's /cluster, so --set and --cluster-file mean what they mean in a scenario.
  Json root = Json::object();
  if (preset) {
    root["cluster"] = {{"preset", *preset}, {"nodes", static_cast<int>(nodes_d)}};
  } else {
    root["cluster"] = {{"file", std::filesystem::absolute(*cluster_file).string()}};
    if (p->has("--nodes")) root["cluster"]["nodes"] = static_cast<int>(nodes_d);
  }
  const std::string where = "(ctwin collective)";
  for (const auto& s : p->all("--set")) {
    const Override ov = parse_override(s);
    if (ov.pointer.rfind("/cluster/", 0) != 0) {
      throw InputError(where + " (--set)", ov.pointer, "not a /cluster key",
                       "a pointer such as /cluster/nic_gbit_per_s");
    }
    apply_override(root, ov, where);
  }
  const JsonObject top(root, "", where);
  std::vector<std::string> warnings;
  spec = read_cluster(top, read_catalogs(top).gpus, std::nullopt, &warnings);
  for (auto& w : cluster_warnings(spec)) warnings.push_back(std::move(w));
  for (const auto& w : warnings) std::fprintf(stderr, "ctwin: warning: %s\n", w.c_str());
  const std::string cluster_name = preset ? *preset : *cluster_file;
  const double gpn = p->number("--gpus-per-node", spec.gpus_per_node);
  if (gpn < 1 || gpn > spec.gpus_per_node || gpn != std::floor(gpn)) {
    throw InputError("", "--gpus-per-node", "must be an integer from 1 to " + std::to_string(spec.gpus_per_node),
                     "at most the node's GPU count");
  }
  const std::string algo = p->get("--algo").value_or("auto");
  CollectiveOptions options;
  if (!parse_collective_algo(algo, options.algo)) {
    throw InputError("", "--algo", "unknown algorithm '" + algo + "'", "auto, ring, tree, nvls, nvlstree or collnet");
  }
  const std::string proto = p->get("--proto").value_or("auto");
  if (!parse_protocol(proto, options.protocol)) {
    throw InputError("", "--proto", "unknown protocol '" + proto + "'", "auto, ll, ll128 or simple");
  }
  if (p->has("--sharp")) spec.sharp = true;
  const double gpt = p->number("--gpus-per-thread", 1);
  if (gpt < 1 || gpt != std::floor(gpt) || gpt > 1024) {
    throw InputError("", "--gpus-per-thread", "must be an integer from 1 to 1024", "nccl-tests' -g, e.g. 1 or 8");
  }
  options.gpus_per_thread = static_cast<int>(gpt);
  const std::size_t elem = dtype_bytes(p->get("--dtype").value_or("bf16"));
  const double min_b = p->bytes("--min-bytes", 8), max_b = p->bytes("--max-bytes", 8.0 * (1u << 30));
  const double factor = p->number("--step-factor", 2);
  if (!(factor > 1)) throw InputError("", "--step-factor", "must be greater than 1", "e.g. 2");
  if (min_b > max_b) throw InputError("", "--min-bytes", "is larger than --max-bytes", "min <= max");
  const std::string fidelity = p->get("--fidelity").value_or("analytical");
  if (fidelity != "analytical" && fidelity != "flow") {
    throw InputError("", "--fidelity", "unknown fidelity '" + fidelity + "'", "analytical or flow");
  }
  const bool custom = p->has("--custom-all-reduce");
  if (custom && op != CollectiveOp::all_reduce) {
    throw InputError("", "--custom-all-reduce", "given with --op " + *op_name, "--op all_reduce");
  }
  if (custom && (options.algo != CollectiveAlgo::automatic || fidelity != "analytical")) {
    throw InputError("", "--custom-all-reduce", "given with a forced --algo or --fidelity flow",
                     "the default NCCL choice and the analytical model for the sizes NCCL takes");
  }
  const Cluster cl = build_cluster(spec);
  CollectiveCall call;
  call.op = op;
  for (int n = 0; n < spec.nodes; ++n) {
    for (int g = 0; g < static_cast<int>(gpn); ++g) call.ranks.emplace_back(n * spec.gpus_per_node + g);
  }
  if (op == CollectiveOp::send_recv)
    call.ranks = {GpuId(0), GpuId(call.ranks.size() > 1 ? call.ranks.back() : GpuId(0))};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  const bool json = p->has("--json");
  if (!json) {
    std::printf("# ctwin collective: %s on %s, %d node(s) x %d GPUs, algo %s (%s model)\n", op_name->c_str(),
                cluster_name.c_str(), spec.nodes, static_cast<int>(gpn), algo.c_str(), fidelity.c_str());
    if (options.gpus_per_thread > 1) {
      std::printf(
          "# %d GPUs a thread (nccl-tests -g %d): at least %.1f us an iteration for their launches, %.2f us more "
          "for each channel a size runs on\n",
          options.gpus_per_thread, options.gpus_per_thread, group_launch_floor_s(cl, options.gpus_per_thread, 1) * 1e6,
          options.gpus_per_thread * spec.nccl.group_launch_us_per_channel);
    }
    std::printf("#\n#%12s %12s %6s %10s %10s %10s %8s %7s\n", "size", "count", "type", "time(us)", "algbw", "busbw",
                "algo", "proto");
    std::printf("#%12s %12s %6s %10s %10s %10s %8s %7s\n", "(B)", "(elements)", "", "", "(GB/s)", "(GB/s)", "", "");
  }
  ProgressLine progress("simulating flows");
  for (double b = min_b; b <= max_b * (1 + 1e-12); b *= factor) {
    if (fidelity == "flow") progress.update(std::log(b / min_b) / std::log(std::max(max_b / min_b, factor)));
    const double bytes = std::floor(b / elem) * elem;
    call.bytes = bytes;
    if (options.algo != CollectiveAlgo::automatic && !algo_applies(cl, call, options.algo)) {
      const char* why = options.algo == CollectiveAlgo::nvls      ? "an all_reduce within one node of NVLink 4 or later"
                        : options.algo == CollectiveAlgo::collnet ? "an all_reduce across nodes with --sharp"
                        : options.algo == CollectiveAlgo::nvls_tree
                            ? "an all_reduce across nodes of NVLink 4 or later, 2 or more GPUs in a node"
                        : options.algo == CollectiveAlgo::tree ? "an all_reduce"
                                                               : "a collective other than all_to_all and send_recv";
      throw InputError("", "--algo", std::string(to_string(options.algo)) + " does not apply to this call", why);
    }
    CollectiveEstimate est;
    const CustomAllReduceKernel kernel =
        custom ? custom_all_reduce_kernel(cl, call, CustomAllReduce{}) : CustomAllReduceKernel::none;
    if (kernel != CustomAllReduceKernel::none) {
      est.time = ctwin::seconds(std::max(custom_all_reduce_s(cl, call, CustomAllReduce{}, kernel),
                                         group_launch_floor_s(cl, options.gpus_per_thread, 1)));
      est.algbw_gbps = bytes / est.time.seconds() / 1e9;
      est.busbw_gbps = est.algbw_gbps * bus_factor(op, static_cast<int>(call.ranks.size()));
      est.algo = kernel == CustomAllReduceKernel::one_shot ? "oneshot" : "twoshot";
      est.protocol = "-";
    } else {
      try {
        est = estimate_collective(cl, call, options);
      } catch (const std::invalid_argument& e) {
        throw InputError("", "--proto", e.what(), "auto, or a protocol the algorithm runs (NVLS and CollNet: simple)");
      }
    }
    if (fidelity == "flow") {
      Engine engine;
      CollectiveRunner runner(engine, cl, Fidelity::flow, options);
      Time end{};
      Time* end_ptr = &end;
      Engine* eng = &engine;
      runner.start(call, [end_ptr, eng] { *end_ptr = eng->now(); });
      engine.run();
      est.time = std::max(end, ctwin::seconds(group_launch_floor_s(cl, options.gpus_per_thread, est.channels)));
      est.algbw_gbps = end.ps > 0 ? bytes / end.seconds() / 1e9 : 0;
      est.busbw_gbps = est.algbw_gbps * bus_factor(op, static_cast<int>(call.ranks.size()));
    }
    const double t_us = est.time.micros();
    if (json) {
      rows.push_back({{"bytes", bytes},
                      {"time_us", t_us},
                      {"algbw_gbps", est.algbw_gbps},
                      {"busbw_gbps", est.busbw_gbps},
                      {"algo", est.algo},
                      {"protocol", est.protocol},
                      {"channels", est.channels}});
    } else {
      progress.clear();
      std::printf(" %12.0f %12.0f %6s %10.2f %10.2f %10.2f %8s %7s\n", bytes, bytes / elem,
                  p->get("--dtype").value_or("bf16").c_str(), t_us, est.algbw_gbps, est.busbw_gbps, est.algo.c_str(),
                  est.protocol.c_str());
    }
  }
  progress.clear();
  if (json) std::printf("%s\n", rows.dump(2).c_str());
  return kExitOk;
}

}  // namespace ctwin
