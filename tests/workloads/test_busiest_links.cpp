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
  opt.collectives.algo = CollectiveAlgo::ring;
  opt.collectives.protocol = Protocol::simple;  // every ring edge at Simple's efficiency 1
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
  // Two nodes, TP8 DP2, 8 micro-batches a step. Megatron's order keeps each TP group on one
  // node's NVSwitch and only the data-parallel gradients cross the NICs; dp innermost pairs GPUs
  // of one node for DP and splits every TP group over both nodes, so every layer's activations
  // cross them.
  const ModelSpec m = test::fold_gpt(2);
  TrainingConfig inside = test::fold_layout(8, 1, 2, 8);
  TrainingConfig across = inside;
  across.parallel.order = "dp-tp-cp-ep-pp";
  TrainingOptions opt;
  opt.flow_network = true;
  opt.busiest_links = 1000;  // every class of link that carried anything
  // Rings for both, so the placement is what differs: left to the tuner, the two layouts' calls
  // pick ring or tree by their sizes, and a tree crosses the NICs with fewer bytes than a ring.
  opt.collectives.algo = CollectiveAlgo::ring;
  opt.collectives.protocol = Protocol::simple;
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
  // Inside: each GPU's NIC carries its TP shard's BF16 gradients once (a ring of two ranks sends
  // 2(n-1)/n = 1 buffer), 1/8 of 2 x (12h^2 + 5h + f + 4h) + Vh + 2h parameters at 2 bytes.
  const double h = m.hidden, f = m.ffn_hidden;
  const double params = m.layers * (12 * h * h + 5 * h + f + 4 * h) + m.vocab * h + 2 * h;
  CHECK(nic_bytes(a) == rel_approx(params / 8 * 2, 0.01));
  // Across: every micro-batch's TP all-reduces (1 MB each at 512 tokens, four a layer, plus the
  // embedding's) cross the nodes, 4.6 MB a micro-batch on the busiest NIC: 36.7 MB at 8 against
  // 7.4 MB of gradients.
  CHECK(nic_bytes(b) > 2 * nic_bytes(a));
}

TEST_CASE("a degraded NIC link slows DP's all-reduce by the bytes over the lost bandwidth") {
  // Two nodes of one GPU, DP2, every gradient in one bucket reduced after backward (no overlap):
  // a ring of two ranks sends the buffer S each way, one flow per direction over PCIe and the
  // NICs. Node 0's NIC uplink at a fraction f small enough to be the flow's bottleneck (below the
  // one channel's own ceiling) carries S at f x NIC: halving f from 1/4 to 1/8 adds exactly
  // S / (NIC / 8) - S / (NIC / 4) = 4 S / NIC to the step, latencies unchanged.
  const ModelSpec m = test::fold_gpt(2);
  TrainingConfig c = test::fold_layout(1, 1, 2, 2);
  c.overlap_grad_reduce = false;
  c.grad_bucket_bytes = 1e12;
  ClusterSpec s = test::fold_nodes(2).spec;
  s.gpus_per_node = 1;
  s.gpu.pcie_gbyte_per_s = 64;
  TrainingOptions opt;
  opt.flow_network = true;
  opt.collectives.algo = CollectiveAlgo::ring;
  opt.collectives.protocol = Protocol::simple;
  opt.collectives.protocol = Protocol::simple;
  const auto healthy = simulate_training(m, c, build_cluster(s), opt);
  std::string uplink;
  for (const auto& l : healthy.busiest_links) {
    if (l.name.rfind("node0.nic0 -> pod", 0) == 0) uplink = l.name;  // the NIC into the fabric
  }
  REQUIRE_FALSE(uplink.empty());
  auto step_at = [&](double fraction) {
    ClusterSpec d = s;
    d.degraded_links = {{uplink, fraction}};
    return simulate_training(m, c, build_cluster(d), opt);
  };
  const auto quarter = step_at(0.25), eighth = step_at(0.125);
  const double S = 2.0 * static_cast<double>(count_parameters(m).total);
  const double nic = s.nic_gbyte_per_s * (s.nic_efficiency > 0 ? s.nic_efficiency : 1.0) * 1e9;  // 0: line rate
  CHECK(eighth.step_time_s - quarter.step_time_s == rel_approx(4 * S / nic, 1e-6));
  CHECK(quarter.step_time_s > healthy.step_time_s);
  // The report shows the degraded link at its reduced capacity, busiest of all.
  CHECK(eighth.busiest_links.front().name == uplink);
  CHECK(eighth.busiest_links.front().capacity_gbyte_per_s == rel_approx(nic / 8 / 1e9, 1e-12));
}
