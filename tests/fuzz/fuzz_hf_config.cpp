// libFuzzer target "hf_config" (tests/fuzz/fuzz_entries.hpp; run with scripts/fuzz.sh hf_config SECONDS).
#include "fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ctwin::fuzz::expected_outcome([&] { ctwin::fuzz::run_hf_config(bytes, std::filesystem::temp_directory_path()); },
                                ctwin::fuzz::fuzz_steps_over_known());
  return 0;
}
