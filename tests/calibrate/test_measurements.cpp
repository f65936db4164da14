#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "calibrate/measurements.hpp"
#include "sim/error.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::calibrate;
using ctwin::test::rel_approx;

namespace {

Measurements sample() {
  Measurements m;
  m.backend = "cpu";
  m.scenario = {{"kind", "training"}, {"model", "tiny"}};
  m.host.ranks = 2;
  m.repeats = 5;
  OpMeasurement op;
  op.op.kind = OpKind::gemm;
  op.op.dtype = Dtype::fp32;
  op.op.m = 256, op.op.n = 512, op.op.k = 128;
  op.op.flops = 2.0 * 256 * 512 * 128;
  op.op.bytes = 4.0 * (256 * 128 + 128 * 512 + 256 * 512);
  op.origin = "step";
  op.name = "qkv";
  op.stats = stats_of({3e-3, 1e-3, 2e-3, 5e-3, 4e-3});
  m.ops.push_back(op);
  CollectiveMeasurement c;
  c.op = CollectiveOp::all_gather;
  c.ranks = {0, 1};
  c.bytes = 1 << 20;
  c.stats = stats_of({1e-4});
  m.collectives.push_back(c);
  StepMeasurement s;
  s.kind = "training_step";
  s.layout = {{"dp", 2}};
  s.stats = stats_of({0.5, 0.7});
  s.per_rank_median_s = {0.5, 0.6};
  m.steps.push_back(s);
  return m;
}

}  // namespace

TEST_CASE("stats_of: median, nearest-rank percentiles and extremes of hand-counted samples") {
  // Sorted: 1..10 ms. Median of an even count is the mean of the middle two (5.5 ms); p10 is the
  // 1st sample (ceil(0.1 * 10) = 1), p90 the 9th.
  std::vector<double> s;
  for (int i = 10; i >= 1; --i) s.push_back(i * 1e-3);
  const Stats st = stats_of(s);
  CHECK(st.median_s == rel_approx(5.5e-3, 1e-12));
  CHECK(st.p10_s == rel_approx(1e-3, 1e-12));
  CHECK(st.p90_s == rel_approx(9e-3, 1e-12));
  CHECK(st.min_s == rel_approx(1e-3, 1e-12));
  CHECK(st.max_s == rel_approx(10e-3, 1e-12));
  CHECK(st.repeats == 10);
  // An odd count: the middle sample.
  CHECK(stats_of({3, 1, 2}).median_s == rel_approx(2, 1e-12));
}

TEST_CASE("a measurements file reads back what was written") {
  const Measurements m = sample();
  const std::string text = measurements_to_json(m);
  const Measurements r = parse_measurements(text, "m.json");
  REQUIRE(r.ops.size() == 1);
  CHECK(r.ops[0].op.kind == OpKind::gemm);
  CHECK(*r.ops[0].op.dtype == Dtype::fp32);
  CHECK(r.ops[0].op.k == rel_approx(128, 1e-12));
  CHECK(r.ops[0].stats.median_s == rel_approx(3e-3, 1e-12));
  CHECK(r.ops[0].name == "qkv");
  REQUIRE(r.collectives.size() == 1);
  CHECK(r.collectives[0].op == CollectiveOp::all_gather);
  CHECK(r.collectives[0].ranks == std::vector<int>{0, 1});
  REQUIRE(r.steps.size() == 1);
  CHECK(r.steps[0].stats.median_s == rel_approx(0.6, 1e-12));
  CHECK(r.scenario.at("model") == "tiny");
  // Writing what was read gives the same bytes (deterministic output).
  CHECK(measurements_to_json(r) == text);
  CHECK(text.find("overlaps") == std::string::npos);  // none measured: the key is left out

  Measurements o = sample();
  OverlapMeasurement v;
  v.op = o.ops[0].op;
  v.collective = CollectiveOp::reduce_scatter;
  v.group = "dp";
  v.bytes = 4096;
  v.calls = 7;
  v.alone = stats_of({1e-3, 2e-3});
  v.overlapped = stats_of({3e-3});
  o.overlaps.push_back(v);
  const std::string with = measurements_to_json(o);
  const Measurements b = parse_measurements(with, "m.json");
  REQUIRE(b.overlaps.size() == 1);
  CHECK(b.overlaps[0].op.k == rel_approx(128, 1e-12));
  CHECK(b.overlaps[0].collective == CollectiveOp::reduce_scatter);
  CHECK(b.overlaps[0].group == "dp");
  CHECK(b.overlaps[0].bytes == 4096);
  CHECK(b.overlaps[0].calls == 7);
  CHECK(b.overlaps[0].alone.median_s == rel_approx(1.5e-3, 1e-12));
  CHECK(b.overlaps[0].overlapped.median_s == rel_approx(3e-3, 1e-12));
  CHECK(measurements_to_json(b) == with);
}

TEST_CASE("a bad measurements file names the JSON pointer and what is expected") {
  std::string text = measurements_to_json(sample());
  const auto at = text.find("\"gemm\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 6, "\"gemv\"");
  try {
    parse_measurements(text, "m.json");
    FAIL("accepted an unknown op kind");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("m.json") != std::string::npos);
    CHECK(msg.find("/ops/0/kind") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_measurements("{\"schema\": \"ctwin-measurements/0\"}", "m.json"), InputError);
}

TEST_CASE("serving iterations read back with their kind, replica and shape; a file without shapes still reads") {
  Measurements m = sample();
  StepMeasurement mixed;
  mixed.kind = "mixed";
  mixed.layout = {{"tp", 2}, {"pp", 1}};
  mixed.shape = IterationShape{1, 252, 0, 4, 256};
  mixed.stats = stats_of({2e-3});
  m.steps.push_back(mixed);
  StepMeasurement decode;
  decode.kind = "decode";
  decode.layout = {{"tp", 2}, {"pp", 1}};
  decode.shape = IterationShape{0, 0, 0, 8, 512};
  decode.stats = stats_of({1e-3});
  m.steps.push_back(decode);
  const std::string text = measurements_to_json(m);
  // The file's own words, as docs/measurements.md shows them.
  const auto j = nlohmann::json::parse(text);
  CHECK(j["steps"][1]["prefill"] == nlohmann::json{{"seqs", 1}, {"tokens", 252}, {"context", 0}});
  CHECK(j["steps"][1]["decode"] == nlohmann::json{{"batch", 4}, {"context", 256}});
  CHECK_FALSE(j["steps"][2].contains("prefill"));
  CHECK_FALSE(j["steps"][0].contains("decode"));
  const Measurements r = parse_measurements(text, "m.json");
  REQUIRE(r.steps.size() == 3);
  CHECK_FALSE(r.steps[0].shape.has_value());
  REQUIRE(r.steps[1].shape.has_value());
  CHECK(*r.steps[1].shape == IterationShape{1, 252, 0, 4, 256});
  CHECK(r.steps[1].kind == "mixed");
  CHECK(r.steps[1].layout.at("tp") == 2);
  REQUIRE(r.steps[2].shape.has_value());
  CHECK(*r.steps[2].shape == IterationShape{0, 0, 0, 8, 512});
  CHECK(measurements_to_json(r) == text);

  // A file from before serving iterations (a "prefill" step with only its layout) reads, shapeless.
  auto old = j;
  old["steps"] =
      nlohmann::json::array({{{"kind", "prefill"}, {"layout", {{"tp", 1}}}, {"stats", j["steps"][0]["stats"]}}});
  const Measurements o = parse_measurements(old.dump(), "old.json");
  REQUIRE(o.steps.size() == 1);
  CHECK(o.steps[0].kind == "prefill");
  CHECK_FALSE(o.steps[0].shape.has_value());
}

TEST_CASE("a serving step whose kind does not match its shape, or a bad shape, names the pointer") {
  Measurements m = sample();
  StepMeasurement d;
  d.kind = "decode";
  d.shape = IterationShape{0, 0, 0, 8, 512};
  d.stats = stats_of({1e-3});
  m.steps.push_back(d);
  auto j = nlohmann::json::parse(measurements_to_json(m));
  auto expect_error = [](const nlohmann::json& bad, const std::string& where) {
    try {
      parse_measurements(bad.dump(), "m.json");
      FAIL("accepted " << bad["steps"].dump());
    } catch (const InputError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(where) != std::string::npos, e.what());
    }
  };
  auto bad = j;
  bad["steps"][1]["kind"] = "prefill";
  expect_error(bad, "/steps/1/kind");
  bad = j;
  bad["steps"][1]["decode"]["batch"] = 0;
  expect_error(bad, "/steps/1/decode/batch");
  bad = j;
  bad["steps"][1]["decode"].erase("context");
  expect_error(bad, "/steps/1/decode/context");
  bad = j;
  bad["steps"][1]["prefill"] = {{"tokens", 4}, {"chunk", 2}};
  expect_error(bad, "/steps/1/prefill");
  bad = j;
  bad["steps"][0]["decode"] = {{"batch", 1}, {"context", 1}};
  expect_error(bad, "/steps/0/decode");
}
