// libFuzzer target "mooncake_trace" (tests/fuzz/fuzz_entries.hpp; run with scripts/fuzz.sh mooncake_trace SECONDS).
#include "fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ctwin::fuzz::expected_outcome([&] { ctwin::fuzz::run_mooncake_trace(bytes); }, ctwin::fuzz::fuzz_steps_over_known());
  return 0;
}
