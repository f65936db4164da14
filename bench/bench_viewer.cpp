#include <stdexcept>

#include "bench.hpp"

namespace ctwin {

// Placeholder until the viewer benchmark lands.
nlohmann::ordered_json bench_viewer(const BenchOptions&) {
  throw std::runtime_error("the viewer benchmark is not built yet");
}

}  // namespace ctwin
