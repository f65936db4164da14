// The links a run loaded most: bytes asked of each directed link over its capacity, as a fraction
// of the run's time. Which links top the list is what a rank order (TP inside a node or across
// it, DP or PP on the rails) changes, so the training report names them.
#pragma once

#include <string>
#include <vector>

#include "sim/flow.hpp"
#include "topology/network.hpp"

namespace ctwin {

struct LinkLoad {
  std::string name;  // ClusterNetwork::link_name
  double bytes = 0;  // started across it during the run (at the protocol's efficiency)
  double capacity_gbyte_per_s = 0;
  double busy_fraction = 0;  // bytes / capacity / run time: 1 = busy the whole run
  int links = 1;             // links of its class that carried traffic (it is the busiest of them)
};

// A link's class: its name without numbers ("node.gpu -> node.nvswitch", "node.nic -> pod.leaf"),
// so a symmetric step's thousand equal NVSwitch ports make one line, not the whole list.
std::string link_class(const std::string& name);

// The busiest link of each class over a run of `run_s` seconds, the `top` classes with the highest
// busy fraction first (ties by name); links that carried nothing left out.
std::vector<LinkLoad> busiest_links(const FlowNetwork& net, const ClusterNetwork& routes, double run_s, int top);

}  // namespace ctwin
