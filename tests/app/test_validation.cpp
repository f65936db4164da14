#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "scenario.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {
double predicted_metric(const Scenario& sc, const TrainingResult& r);  // app/cmd_validate.cpp
}

using namespace ctwin;

// Each scenario under scenarios/validation/ reproduces a published measurement (its source is
// in the file and in docs/validation.md). One set of per-GPU defaults serves all of them.
TEST_CASE("every validation case is within 10% of its published figure, and the mean within 5%") {
  const auto dir = std::filesystem::path(CTWIN_SOURCE_DIR) / "scenarios" / "validation";
  double sum = 0;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    const Scenario sc = load_scenario(e.path().string());
    REQUIRE(sc.validation.present());
    const auto r = simulate_training(sc.model, sc.training, build_cluster(sc.cluster), {});
    const double err = (predicted_metric(sc, r) - sc.validation.published) / sc.validation.published;
    CAPTURE(e.path().filename().string());
    CAPTURE(err);
    CHECK(std::fabs(err) <= 0.10);
    sum += std::fabs(err);
    ++n;
  }
  CHECK(n >= 9);
  CHECK(sum / n <= 0.05);
}
