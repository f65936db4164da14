// Whether this test build runs under AddressSanitizer: its allocator pads and quarantines blocks
// (RSS says nothing of a normal build's), and its leak check reports libraries' allocations that
// outlive their shutdown (Open MPI's at MPI_Init).
#pragma once

namespace ctwin::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
#else
inline constexpr bool kAsan = false;
#endif

}  // namespace ctwin::test
