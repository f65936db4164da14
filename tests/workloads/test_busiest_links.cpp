// The busiest-link report at flow fidelity: bytes per link from the step's collectives, and
// where a rank order puts them.
#include <doctest/doctest.h>

#include <string>

#include "tiny_models.hpp"
#include "tolerance.hpp"
#include "workloads/training_sim.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

TEST_CASE("busiest links: pure DP on one node puts 2(n-1)/n of every gradient byte on each GPU's NVSwitch port") {
  const ModelSpec m = test::fold_gpt(4);
  TrainingConfig c = test::fold_layout(1, 1, 8, 2);
  TrainingOptions opt;
  opt.flow_network = true;
  opt.busiest_links = 100;
  opt.collectives.algo = CollectiveAlgo::ring;  // every ring edge at Simple's efficiency 1
  opt.collectives.protocol = Protocol::simple;
  const Cluster cl = test::h100_node8();
  const auto r = simulate_training(m, c, cl, opt);
  // Each gradient is all-reduced once over 8 ranks (bf16, 2 bytes); a rank's ring edges, one per
  // channel, carry 2 (8 - 1) / 8 of the buffer out through its port and as much in through it.
  const double grads = 2.0 * static_cast<double>(count_parameters(m).total);
  const double per_port = 2.0 * 7 / 8 * grads;
  // Two classes, each way through the 8 ports: nothing else moved.
  REQUIRE(r.busiest_links.size() == 2);
  for (const auto& l : r.busiest_links) {
    CAPTURE(l.name);
    CHECK(l.links == 8);
    CHECK(l.bytes == rel_approx(per_port, 1e-9));
    CHECK(l.capacity_gbyte_per_s == rel_approx(450, 1e-12));
    CHECK(l.busy_fraction == rel_approx(per_port / 450e9 / r.step_time_s, 1e-9));
  }
  // Ties by name: GPU 0's port out first.
  CHECK(r.busiest_links.front().name == "node0.gpu0 -> node0.nvswitch");
  CHECK(r.busiest_links.back().name == "node0.nvswitch -> node0.gpu0");
  // The analytical fidelity prices collectives without links: nothing to name.
  opt.flow_network = false;
  CHECK(simulate_training(m, c, cl, opt).busiest_links.empty());
}

TEST_CASE("busiest links: TP across nodes (dp innermost) loads the NICs more than TP inside each node") {
  // Two nodes, TP8 DP2. Megatron's order keeps each TP group on one node's NVSwitch and only the
  // data-parallel gradients cross the NICs; dp innermost pairs GPUs of one node for DP and splits
  // every TP group over both nodes, so every layer's activations cross them.
  const ModelSpec m = test::fold_gpt(2);
  TrainingConfig inside = test::fold_layout(8, 1, 2, 2);
  TrainingConfig across = inside;
  across.parallel.order = "dp-tp-cp-ep-pp";
  TrainingOptions opt;
  opt.flow_network = true;
  opt.busiest_links = 1000;  // every class of link that carried anything
  const Cluster cl = test::fold_nodes(2);
  const auto a = simulate_training(m, inside, cl, opt);
  const auto b = simulate_training(m, across, cl, opt);
  REQUIRE_FALSE(a.busiest_links.empty());
  REQUIRE_FALSE(b.busiest_links.empty());
  auto nic_bytes = [](const TrainingResult& r) {
    double most = 0;
    for (const auto& l : r.busiest_links) {
      if (l.name.find("nic") != std::string::npos) most = std::max(most, l.bytes);
    }
    return most;
  };
  CHECK(b.busiest_links.front().name.find("nic") != std::string::npos);
  CHECK(nic_bytes(b) > 2 * nic_bytes(a));  // 21.7 MB against 8.0 MB when written
}
