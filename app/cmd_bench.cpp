#include <unistd.h>
#include <cstdio>

#include "bench.hpp"
#include "bench_sweep.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "report_format.hpp"
#include "sim/error.hpp"

namespace ctwin {

int cmd_bench(const Args& args) {
  const std::string usage =
      "usage: ctwin bench NAME [--json] [--quick]\n\n"
      "Benchmarks, each reported with a baseline run in the same process:\n"
      "  engine    event schedule-and-dispatch throughput, 1M pending events, vs std::priority_queue\n"
      "  network   flow-level max-min solver: all-to-all on a fat-tree, ring all-reduce on 1,024 GPUs\n"
      "  viewer    viewer frame build time and load time on a 10M-event trace\n"
      "  training  simulation time of large training steps (405B on 16,384 GPUs)\n"
      "  serving   an hour at 100 requests/s on one Llama-3-8B replica, 16 replicas round-robin, vs the\n"
      "            reference replica loop; a routed fleet of 128 Llama-3-70B TP8 replicas (1,024 GPUs),\n"
      "            an hour at 500 requests/s\n"
      "  sweep     the auto-sweep of Llama-3-70B on 1,024 H100, vs simulating every layout that fits\n"
      "  job       a 54-day Llama 3 405B job on 16,384 H100 with failures, 1,000 Monte Carlo replications,\n"
      "            vs an engine that steps every step";
  auto p = parse_args(args, usage,
                      {{"--json", "", "print the figures as JSON on stdout"},
                       {"--quick", "", "small sizes (for a smoke test of the benchmark itself)"}});
  if (!p) return kExitOk;
  if (p->positional.size() != 1)
    throw InputError("", "NAME", "expected exactly one benchmark name",
                     "engine, network, viewer, training, serving, sweep or job");
  BenchOptions o;
  o.quick = p->has("--quick");
  o.progress = isatty(STDERR_FILENO);
  const std::string& name = p->positional[0];
  nlohmann::ordered_json j;
  if (name == "engine")
    j = bench_engine(o);
  else if (name == "network")
    j = bench_network(o);
  else if (name == "viewer")
    j = bench_viewer(o);
  else if (name == "training")
    j = bench_training(o);
  else if (name == "serving")
    j = bench_serving(o);
  else if (name == "sweep")
    j = bench_sweep(o);
  else if (name == "job")
    j = bench_job(o);
  else
    throw InputError("", "NAME", "unknown benchmark '" + name + "'",
                     "engine, network, viewer, training, serving, sweep or job");
  if (p->has("--json")) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", format_figures_table("bench " + name, j).c_str());
  }
  return kExitOk;
}

}  // namespace ctwin
