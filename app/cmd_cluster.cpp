// ctwin cluster: describe a cluster (preset x nodes) as JSON, to edit or to load back through
// /cluster/file in a scenario.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli.hpp"
#include "commands.hpp"
#include "scenario.hpp"
#include "sim/error.hpp"
#include "sim/flow.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster_json.hpp"
#include "topology/network.hpp"

namespace ctwin {

int cmd_cluster(const Args& args) {
  const std::string usage =
      "usage: ctwin cluster --cluster PRESET [--nodes N] [--write FILE [--force]]\n\n"
      "Prints the cluster description (GPU, node fabric, NICs, leaves and spines) as JSON, or writes\n"
      "it to FILE; a scenario loads it back with \"cluster\": {\"file\": \"FILE\"}.";
  auto p = parse_args(args, usage,
                      {{"--cluster", "PRESET", "dgx-a100, dgx-h100, hgx-h200, dgx-b200, l40s-pcie"},
                       {"--nodes", "N", "nodes (default 1)"},
                       {"--write", "FILE", "write the description to FILE"},
                       {"--force", "", "overwrite FILE if it exists"}});
  if (!p) return kExitOk;
  const auto preset = p->get("--cluster");
  if (!preset) throw InputError("", "--cluster", "missing", "a cluster preset, e.g. --cluster dgx-h100");
  const double nodes = p->number("--nodes", 1);
  if (nodes < 1 || nodes != static_cast<int>(nodes))
    throw InputError("", "--nodes", "must be a positive integer", "1, 2, ...");
  ClusterSpec spec;
  if (!preset_cluster(*preset, static_cast<int>(nodes), builtin_gpus(), spec)) {
    throw InputError("", "--cluster", "unknown preset '" + *preset + "'",
                     "one of dgx-a100, dgx-h100, hgx-h200, dgx-b200, l40s-pcie");
  }
  const std::string text = cluster_to_json(spec).dump(2) + "\n";
  if (const auto out = p->get("--write")) {
    write_output_file(*out, text, p->has("--force"));
    Engine e;
    FlowNetwork net(e);
    const Cluster cl = build_cluster(spec);
    ClusterNetwork graph(cl, net);
    std::printf("wrote %s: %d GPUs, %zu vertices, %zu directed links\n", out->c_str(), cl.gpu_count(),
                graph.vertex_count(), graph.link_count());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return kExitOk;
}

}  // namespace ctwin
