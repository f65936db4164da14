// Serving's cost and energy (workloads/serving_energy.hpp) on hand-worked cases: GPU time by
// part, GPUs, powers and prices in, joules, kWh and dollars out, each worked out in the comments.
// The catalog's power and price figures are checked against their datasheets.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "sim/error.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/serving_energy.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// TDP 700 W, idle 100 W; prefill at 1 (700 W), decode at 0.5 (400 W), transfers at 0.25
// (250 W), host overhead at 0 (100 W).
PowerModel hand_power() {
  PowerModel p;
  p.tdp_w = 700;
  p.idle_w = 100;
  p.prefill_utilization = 1;
  p.decode_utilization = 0.5;
  p.transfer_utilization = 0.25;
  p.overhead_utilization = 0;
  return p;
}

// 2 replicas of 4 GPUs over a 100 s run; replica-seconds summed over both replicas: prefill 30,
// decode 90, communication 10, overhead 20, so 150 of 200 busy. The replicas' own idle_s says 40:
// the other 10 s is one replica's tail after its last iteration, before the run ends.
ServingPool hand_pool() {
  ServingPool p;
  p.replicas = 2;
  p.gpus_per_replica = 4;
  p.gpu_time.prefill_s = 30;
  p.gpu_time.decode_s = 90;
  p.gpu_time.comm_s = 10;
  p.gpu_time.overhead_s = 20;
  p.gpu_time.idle_s = 40;
  p.power = hand_power();
  p.gpu_hour_usd = 3;
  return p;
}

}  // namespace

TEST_CASE("serving energy: each GPU-time part at its power, idle time (the tail included) at idle power") {
  const std::vector<ServingPool> pools = {hand_pool()};
  const ServingEconomics e = serving_economics(pools, 100, 40000, 10000);
  REQUIRE(e.pools.size() == 1);
  const EnergyParts& j = e.pools[0].energy;
  // 4 GPUs per replica-second.
  CHECK(j.prefill_j == rel_approx(4 * 30 * 700.0, 1e-12));   // 84,000 J
  CHECK(j.decode_j == rel_approx(4 * 90 * 400.0, 1e-12));    // 144,000 J
  CHECK(j.comm_j == rel_approx(4 * 10 * 250.0, 1e-12));      // 10,000 J
  CHECK(j.overhead_j == rel_approx(4 * 20 * 100.0, 1e-12));  // 8,000 J
  CHECK(e.pools[0].idle_gpu_s == rel_approx(4 * 50.0, 1e-12));
  CHECK(j.idle_j == rel_approx(4 * 50 * 100.0, 1e-12));  // 20,000 J
  CHECK(e.energy_j == rel_approx(266000, 1e-12));
  CHECK(e.energy_kwh == rel_approx(266000 / 3.6e6, 1e-12));
  CHECK(e.average_power_w == rel_approx(266000 / (8 * 100.0), 1e-12));  // 332.5 W per GPU
  CHECK(e.joules_per_output_token == rel_approx(26.6, 1e-12));          // 266,000 J / 10,000
  CHECK(e.joules_per_token == rel_approx(5.32, 1e-12));                 // / 50,000
}

TEST_CASE("serving cost: GPU-hours of every GPU over the run, split between input and output by GPU time") {
  const std::vector<ServingPool> pools = {hand_pool()};
  const ServingEconomics e = serving_economics(pools, 100, 40000, 10000, 0.5);
  CHECK(e.gpu_hours == rel_approx(8 * 100 / 3600.0, 1e-12));    // 0.2222 GPU-hours
  CHECK(e.gpu_usd == rel_approx(8 * 100 / 3600.0 * 3, 1e-12));  // $0.6667
  CHECK(e.electricity_usd == rel_approx(266000 / 3.6e6 * 0.5, 1e-12));
  const double total = 8 * 100 / 3600.0 * 3 + 266000 / 3.6e6 * 0.5;  // $0.7036
  CHECK(e.total_usd == rel_approx(total, 1e-12));
  // Prefill 30 of the 120 working replica-seconds: a quarter of the cost is the input's.
  CHECK(e.prefill_share == rel_approx(0.25, 1e-12));
  CHECK(e.input_usd == rel_approx(total / 4, 1e-12));
  CHECK(e.output_usd == rel_approx(total * 3 / 4, 1e-12));
  CHECK(e.input_usd + e.output_usd == rel_approx(e.total_usd, 1e-12));
  CHECK(e.usd_per_million_input_tokens == rel_approx(total / 4 / 40000 * 1e6, 1e-12));
  CHECK(e.usd_per_million_output_tokens == rel_approx(total * 3 / 4 / 10000 * 1e6, 1e-12));
  CHECK(e.usd_per_million_tokens == rel_approx(total / 50000 * 1e6, 1e-12));
  // Without an electricity price the energy is reported but not charged.
  const ServingEconomics free_power = serving_economics(pools, 100, 40000, 10000);
  CHECK(free_power.electricity_usd == 0);
  CHECK(free_power.total_usd == rel_approx(8 * 100 / 3600.0 * 3, 1e-12));
}

TEST_CASE("serving cost: a fleet pays for every replica's GPUs, busy or not") {
  ServingPool one = hand_pool();
  one.replicas = 1;
  one.gpu_time = GpuTimeSplit{};
  one.gpu_time.decode_s = 50;
  ServingPool three = one;
  three.replicas = 3;  // the same 50 s of work, now on one of three replicas; two wait
  const ServingEconomics a = serving_economics(std::vector<ServingPool>{one}, 100, 0, 1000);
  const ServingEconomics b = serving_economics(std::vector<ServingPool>{three}, 100, 0, 1000);
  CHECK(a.gpu_hours == rel_approx(4 * 100 / 3600.0, 1e-12));
  CHECK(b.gpu_hours == rel_approx(12 * 100 / 3600.0, 1e-12));
  CHECK(b.pools[0].gpus == 12);
  // Energy: 4 GPUs x 50 s at 400 W, and the rest of 3 x 100 replica-seconds at 100 W.
  CHECK(b.energy_j == rel_approx(4 * 50 * 400.0 + 4 * 250 * 100.0, 1e-12));
  CHECK(b.average_power_w == rel_approx((4 * 50 * 400.0 + 4 * 250 * 100.0) / (12 * 100), 1e-12));
}

TEST_CASE("serving cost: two pools (disaggregated) weigh prefill and decode time by each pool's GPUs") {
  // Prefill pool: 1 replica of 2 GPUs, 8 s of prefill. Decode pool: 2 replicas of 1 GPU, 12
  // replica-seconds of decode. Over 10 s: 16 prefill GPU-seconds against 12 decode.
  ServingPool prefill;
  prefill.replicas = 1;
  prefill.gpus_per_replica = 2;
  prefill.gpu_time.prefill_s = 8;
  prefill.power = hand_power();
  prefill.gpu_hour_usd = 2;
  ServingPool decode = prefill;
  decode.replicas = 2;
  decode.gpus_per_replica = 1;
  decode.gpu_time = GpuTimeSplit{};
  decode.gpu_time.decode_s = 12;
  decode.gpu_hour_usd = 1;
  const ServingEconomics e = serving_economics(std::vector<ServingPool>{prefill, decode}, 10, 3000, 500);
  REQUIRE(e.pools.size() == 2);
  CHECK(e.pools[0].gpu_hours == rel_approx(2 * 10 / 3600.0, 1e-12));
  CHECK(e.pools[1].gpu_hours == rel_approx(2 * 10 / 3600.0, 1e-12));
  CHECK(e.gpu_usd == rel_approx(20 / 3600.0 * 2 + 20 / 3600.0 * 1, 1e-12));
  CHECK(e.prefill_share == rel_approx(16.0 / 28, 1e-12));
  // Prefill pool: 2 x 8 s at 700 W + 2 x 2 s idle; decode pool: 12 s at 400 W + 8 s idle.
  CHECK(e.pools[0].energy.total_j() == rel_approx(2 * 8 * 700.0 + 2 * 2 * 100.0, 1e-12));
  CHECK(e.pools[1].energy.total_j() == rel_approx(12 * 400.0 + 8 * 100.0, 1e-12));
  CHECK(e.pools[0].average_power_w == rel_approx((2 * 8 * 700.0 + 2 * 2 * 100.0) / 20, 1e-12));
}

TEST_CASE("serving cost: speculative decoding's draft time is decode work; refusals name what is wrong") {
  ServingPool p = hand_pool();
  p.gpu_time.draft_s = 30;  // now 180 of 200 busy
  const ServingEconomics e = serving_economics(std::vector<ServingPool>{p}, 100, 1, 1);
  CHECK(e.pools[0].energy.draft_j == rel_approx(4 * 30 * 400.0, 1e-12));
  CHECK(e.prefill_share == rel_approx(30.0 / 150, 1e-12));
  p.gpu_time.draft_s = 60;  // 210 busy replica-seconds in a 2 x 100 s run
  CHECK_THROWS_AS(serving_economics(std::vector<ServingPool>{p}, 100, 1, 1), std::invalid_argument);
  ServingPool none = hand_pool();
  none.gpus_per_replica = 0;
  CHECK_THROWS_AS(serving_economics(std::vector<ServingPool>{none}, 100, 1, 1), std::invalid_argument);
  const ServingEconomics empty = serving_economics(std::vector<ServingPool>{hand_pool()}, 100, 0, 0);
  CHECK(empty.usd_per_million_tokens == 0);
  CHECK(empty.joules_per_output_token == 0);
}

TEST_CASE("GPU catalog: TDPs are the datasheets' board power limits, idle below them, prices sourced") {
  struct Row {
    const char* name;
    double tdp_w;
  };
  // NVIDIA's datasheets: A100 SXM max TDP 400 W; H100 SXM and H200 up to 700 W; H100 PCIe 350 W
  // (product brief PB-11133-001); B200 1000 W (HGX B200); L40S max power 350 W.
  const Row rows[] = {{"A100-SXM-40GB", 400}, {"A100-SXM-80GB", 400}, {"H100-SXM", 700}, {"H100-PCIe", 350},
                      {"H200", 700},          {"B200", 1000},         {"L40S", 350}};
  const GpuCatalog c = builtin_gpus();
  CHECK(c.gpus.size() == std::size(rows));
  for (const Row& r : rows) {
    CAPTURE(r.name);
    REQUIRE(c.gpus.count(r.name) == 1);
    const GpuSpec& g = c.gpus.at(r.name);
    CHECK(g.tdp_w == r.tdp_w);
    CHECK(g.idle_w > 0);
    CHECK(g.idle_w < 0.2 * g.tdp_w);
    CHECK(g.gpu_hour_usd > 0);
    CHECK(g.power_source.find("W") != std::string::npos);
    CHECK(g.price_source.find("2025") != std::string::npos);  // a dated price
  }
  // The one measured idle figure: H200, 80.3 W.
  CHECK(c.gpus.at("H200").idle_w == rel_approx(80.3, 0.01));
}

TEST_CASE("GPU catalog: power and price survive a cluster description's round trip; idle above TDP is refused") {
  ClusterSpec spec;
  spec.name = std::string("round trip");
  spec.gpu = builtin_gpus().gpus.at("H100-SXM");
  spec.gpu.tdp_w = 650;
  spec.gpu.idle_w = 75;
  spec.gpu.gpu_hour_usd = 2.5;
  spec.gpu.power_source = std::string("a power measurement");
  spec.gpu.price_source = std::string("a price list");
  Json gpu = Json::parse(cluster_to_json(spec)["gpu"].dump());
  gpu.erase("name");  // the cluster reader takes it apart from the GPU's keys
  const GpuSpec back = gpu_from_json(JsonObject(gpu, "/gpu", "t.json"), "H100-SXM");
  CHECK(back.tdp_w == 650);
  CHECK(back.idle_w == 75);
  CHECK(back.gpu_hour_usd == 2.5);
  CHECK(back.power_source == "a power measurement");
  CHECK(back.price_source == "a price list");
  Json bad = gpu;
  bad["idle_w"] = 700;
  CHECK_THROWS_AS(gpu_from_json(JsonObject(bad, "/gpu", "t.json"), "H100-SXM"), InputError);
  const PowerModel p = power_model(back);
  CHECK(p.power_w(p.prefill_utilization) == rel_approx(650, 1e-12));
  CHECK(p.power_w(0) == rel_approx(75, 1e-12));
  CHECK(p.decode_utilization < p.prefill_utilization);
}
