// Strong ids: a GpuId cannot be passed where a LinkId is expected.
// Models refer to each other through ids into plain arrays, never through pointers.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace ctwin {

template <class Tag, class Rep = std::uint32_t>
struct Id {
  using rep_type = Rep;
  Rep value = std::numeric_limits<Rep>::max();

  constexpr Id() = default;
  constexpr explicit Id(Rep v) : value(v) {}
  static constexpr Id none() { return Id{}; }
  constexpr bool valid() const { return value != std::numeric_limits<Rep>::max(); }
  constexpr auto operator<=>(const Id&) const = default;
};

}  // namespace ctwin

template <class Tag, class Rep>
struct std::hash<ctwin::Id<Tag, Rep>> {
  std::size_t operator()(ctwin::Id<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value); }
};
