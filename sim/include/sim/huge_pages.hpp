// Large arrays backed by transparent huge pages. A step program of millions of ops fills hundreds
// of megabytes once: with 4 KiB pages each first touch is a page fault (about 218,000 of them for
// MT-NLG 530B's step, 2.6 s of system time on a virtual machine), with 2 MiB pages 512 times fewer.
// Linux only; elsewhere, and where the kernel leaves huge pages off, nothing changes.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ctwin {

// Advises the kernel to back the whole 2 MiB pages inside [p, p + bytes) with huge pages. Only
// pages not touched yet change; the contents and addresses stay as they are.
inline void advise_huge_pages(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1), end = (at + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)p;
  (void)bytes;
#endif
}

// v.reserve(n), the new room advised onto huge pages.
template <class Vector>
void reserve_huge(Vector& v, std::size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vector::value_type));
}

}  // namespace ctwin
