#include <stdexcept>

#include "bench.hpp"

namespace ctwin {

// Placeholder until the training benchmark lands.
nlohmann::ordered_json bench_training(const BenchOptions&) {
  throw std::runtime_error("the training benchmark is not built yet");
}

}  // namespace ctwin
