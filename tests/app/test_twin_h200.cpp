// The digital twin on real GPU measurements, replayed in CI without a GPU: ctwin-realrun measured
// scenarios/twin/h200-fit.json (Llama-3.2-1B) and h200-heldout.json (a 3B-shaped model, longer
// sequences, BF16 and FP8) on one H200 (scenarios/twin/measured/, docs/realrun-cuda.md).
// Calibrating on the fit file must predict the held-out steps within 10%, as on the CPU twin;
// the built-in H200 profile, fitted to end-to-end published runs with FlashAttention, cannot
// (realrun's own attention kernel is far slower: docs/realrun-cuda.md says by how much).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "ctwin_cli.hpp"

using ctwin::test::cli;
using ctwin::test::temp_dir;

namespace {

nlohmann::json validate(const std::string& meas, const std::string& profile) {
  const auto r = cli("validate " + meas + " --profile " + profile + " --json");
  REQUIRE_MESSAGE(r.status == 0, r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("H200 twin: calibrate on the measured 1B step, predict the measured 3B BF16 and FP8 steps within 10%" *
          doctest::test_suite("slow")) {
  const auto profile = (temp_dir() / "h200-twin.json").string();
  std::filesystem::remove(profile);
  const auto fit = cli("calibrate scenarios/twin/measured/h200-fit.json -o " + profile);
  REQUIRE_MESSAGE(fit.status == 0, fit.err);
  for (const char* held :
       {"scenarios/twin/measured/h200-heldout.json", "scenarios/twin/measured/h200-heldout-fp8.json"}) {
    CAPTURE(held);
    const auto j = validate(held, profile);
    CHECK(j["step"]["max_abs_error_pct"].get<double>() < 10.0);
    // The in-sample kernels the two share (the LM head, attention) come from the fit's table.
    CHECK(j["op"]["mean_abs_error_pct"].get<double>() < 25.0);
  }
  // The fit file itself, in sample: its kernels answered from the measured table.
  const auto self = validate("scenarios/twin/measured/h200-fit.json", profile);
  CHECK(self["op"]["max_abs_error_pct"].get<double>() < 1e-6);
  CHECK(self["step"]["max_abs_error_pct"].get<double>() < 10.0);
}
