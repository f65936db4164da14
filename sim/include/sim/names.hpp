// One name table per enum: to_string and parsing both read it, so a name is spelled once.
// Tables list names in the order messages offer them ("expected one of ...").
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace ctwin {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E, std::size_t N>
struct NameTable {
  std::array<EnumName<E>, N> entries;
  std::array<std::string_view, N> names;  // the same names, for choice lists

  constexpr const char* name(E v) const {
    for (const auto& e : entries) {
      if (e.value == v) return e.name.data();
    }
    return "?";
  }
  constexpr std::optional<E> parse(std::string_view s) const {
    for (const auto& e : entries) {
      if (e.name == s) return e.value;
    }
    return std::nullopt;
  }
};

// make_names<Recompute>({{Recompute::none, "none"}, ...}): the names must be string literals.
template <class E, std::size_t N>
constexpr NameTable<E, N> make_names(const EnumName<E> (&entries)[N]) {
  NameTable<E, N> t{};
  for (std::size_t i = 0; i < N; ++i) {
    t.entries[i] = entries[i];
    t.names[i] = entries[i].name;
  }
  return t;
}

}  // namespace ctwin
