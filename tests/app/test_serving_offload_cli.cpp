// KV offloading through `ctwin run` (docs/serving.md, "KV offloading"): a hand-made Mooncake trace
// of two requests sharing one 512-token block, on two round-robin replicas, so the second request
// runs where the first did not. A pooled host tier finds the block the other replica wrote and
// loads it over the NICs; each replica's own tier does not. And the errors of the two keys.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"

namespace ctwin {

namespace {

nlohmann::json two_replicas(const std::string& scope) {
  nlohmann::json sc = nlohmann::json::parse(R"({"name": "m", "kind": "serving", "seed": 1,
      "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
      "serving": {"enable_prefix_caching": true, "kv_offloading_size": 64, "max_num_seqs": 16,
                  "max_num_batched_tokens": 2048, "router": {"policy": "round_robin"},
                  "pools": [{"name": "h100", "replicas": 2}]},
      "traffic": {"arrival": {"process": "trace", "format": "mooncake_jsonl"}}})");
  sc["serving"]["kv_offloading_scope"] = scope;
  sc["traffic"]["arrival"]["file"] = test::source_dir() + "/tests/app/scenarios/serving-data/mooncake-ok.jsonl";
  return sc;
}

test::Run run(const nlohmann::json& sc, const std::string& name, const std::string& args = " --json") {
  const auto path = test::temp_dir() / name;
  std::ofstream(path) << sc.dump();
  return test::cli("run " + path.string() + args);
}

}  // namespace

TEST_CASE("ctwin run: a pooled host tier gives the second replica the first one's block, loaded over the NICs") {
  const auto r = run(two_replicas("pool"), "offload-pool.json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const auto kv = nlohmann::json::parse(r.out).at("kv_cache");
  CHECK(kv.at("prefix_hit_tokens").get<long long>() == 512);
  const auto& o = kv.at("offload");
  CHECK(o.at("scope") == "pool");
  CHECK(o.at("hit_tokens").get<long long>() == 512);
  CHECK(o.at("remote_hit_tokens").get<long long>() == 512);
  // 64 GiB a replica of 2 MiB pages (Llama-3-8B: 16 tokens x 32 layers x 2 x 8 x 128 x 2 bytes), pooled: 2 x 32,768.
  CHECK(o.at("capacity_pages").get<long long>() == 65536);
  // 32 pages of 2 MiB at the NIC's 50 GB/s x 0.96 (below H100's 64 GB/s PCIe), one GPU a replica.
  CHECK(o.at("load_s").get<double>() == test::rel_approx(32.0 * 2097152 / 48e9, 1e-9));
  // The first request wrote its 64 prompt pages (1024 tokens), the second its 43 full ones of
  // which 32 were held: 75 pages.
  CHECK(o.at("stored_pages").get<long long>() == 75);
  CHECK(o.at("evicted_pages").get<long long>() == 0);
  // The text report says it in one line.
  const auto t = run(two_replicas("pool"), "offload-pool-text.json", "");
  REQUIRE(t.status == 0);
  CHECK(t.out.find("KV offload    host tier of 64 GiB per replica, pooled over the pool, 65536 pages") !=
        std::string::npos);
}

TEST_CASE("ctwin run: each replica's own host tier does not see the other's block") {
  const auto r = run(two_replicas("replica"), "offload-replica.json");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  const auto kv = nlohmann::json::parse(r.out).at("kv_cache");
  CHECK(kv.at("prefix_hit_tokens").get<long long>() == 0);
  CHECK(kv.at("offload").at("hit_tokens").get<long long>() == 0);
  CHECK(kv.at("offload").at("capacity_pages").get<long long>() == 65536);  // two tiers of 32,768
}

TEST_CASE("ctwin run: kv_offloading_size without prefix caching, and a pooled tier over replicas run apart, exit 2") {
  nlohmann::json no_prefix = two_replicas("replica");
  no_prefix["serving"]["enable_prefix_caching"] = false;
  const auto a = run(no_prefix, "offload-no-prefix.json");
  CHECK(a.status == 2);
  CHECK(a.err.find("/serving/kv_offloading_size") != std::string::npos);
  CHECK(a.err.find("enable_prefix_caching") != std::string::npos);

  nlohmann::json split = two_replicas("pool");
  split["serving"].erase("router");
  split["serving"].erase("pools");
  split["serving"]["data_parallel_size"] = 2;
  const auto b = run(split, "offload-dp-split.json");
  CHECK(b.status == 2);
  CHECK(b.err.find("/serving/kv_offloading_scope") != std::string::npos);
  CHECK(b.err.find("routed fleet") != std::string::npos);
}

}  // namespace ctwin
