// A Mooncake JSONL trace through `ctwin run` (docs/serving.md, "Trace formats"): two requests by
// hand, the second sharing the first's first 512-token block, so both prefix caches find exactly
// 512 of the 1024 + 700 prompt tokens.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"
#include "test_paths.hpp"
#include "tolerance.hpp"

namespace ctwin {

TEST_CASE("ctwin run replays a mooncake_jsonl trace: the second request finds the shared block, 512 of 1724 tokens") {
  const std::string data = test::source_dir() + "/tests/app/scenarios/serving-data/mooncake-ok.jsonl";
  for (const char* cache : {"hash_lru", "radix"}) {
    CAPTURE(cache);
    nlohmann::json sc = nlohmann::json::parse(R"({"name": "m", "kind": "serving", "seed": 1,
      "cluster": {"preset": "dgx-h100", "nodes": 1}, "model": "llama3-8b",
      "serving": {"enable_prefix_caching": true, "max_num_seqs": 16, "max_num_batched_tokens": 2048},
      "traffic": {"arrival": {"process": "trace", "format": "mooncake_jsonl"}}})");
    sc["serving"]["prefix_cache"] = cache;
    sc["traffic"]["arrival"]["file"] = data;
    const auto path = test::temp_dir() / (std::string("mooncake-") + cache + ".json");
    std::ofstream(path) << sc.dump();
    const auto r = test::cli("run " + path.string() + " --json");
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    const auto out = nlohmann::json::parse(r.out);
    CHECK(out.at("kv_cache").at("prefix_hit_tokens").get<long long>() == 512);
    CHECK(out.at("kv_cache").at("prefix_hit_rate").get<double>() == test::rel_approx(512.0 / 1724.0, 1e-12));
  }
}

}  // namespace ctwin
