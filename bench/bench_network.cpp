#include <stdexcept>

#include "bench.hpp"

namespace ctwin {

// Placeholder until the network benchmark lands.
nlohmann::ordered_json bench_network(const BenchOptions&) {
  throw std::runtime_error("the network benchmark is not built yet");
}

}  // namespace ctwin
