// A map from 64-bit ids (request ids; any but INT64_MIN) to small values: open addressing with linear
// probing over a power-of-two table at most half full, deletion by backward shift. The serving
// loop looks a request up on every allocation; std::unordered_map's node per entry costs a cache
// miss there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sim/random.hpp"

namespace ctwin::detail {

template <class V>
class FlatIdMap {
 public:
  FlatIdMap() : slots_(16) {}

  V* find(std::int64_t id) {
    for (std::size_t i = home(id);; i = next(i)) {
      Slot& s = slots_[i];
      if (s.id == kEmpty) return nullptr;
      if (s.id == id) return &s.value;
    }
  }
  const V* find(std::int64_t id) const { return const_cast<FlatIdMap*>(this)->find(id); }

  // The value of id, default-constructed when new. The reference holds until the next insert or erase.
  V& operator[](std::int64_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = home(id);
    for (; slots_[i].id != kEmpty; i = next(i))
      if (slots_[i].id == id) return slots_[i].value;
    slots_[i].id = id;
    slots_[i].value = V{};
    ++size_;
    return slots_[i].value;
  }

  // Removes id when present; true when it was.
  bool erase(std::int64_t id) {
    std::size_t i = home(id);
    for (; slots_[i].id != id; i = next(i))
      if (slots_[i].id == kEmpty) return false;
    // Pull later entries of the probe run back over the hole, unless their home lies after it.
    for (std::size_t j = next(i);; j = next(j)) {
      if (slots_[j].id == kEmpty) break;
      const std::size_t h = home(slots_[j].id);
      if (((j - h) & mask()) >= ((j - i) & mask())) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i].id = kEmpty;
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::int64_t kEmpty = std::numeric_limits<std::int64_t>::min();
  struct Slot {
    std::int64_t id = kEmpty;
    V value{};
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t next(std::size_t i) const { return (i + 1) & mask(); }
  std::size_t home(std::int64_t id) const {
    return static_cast<std::size_t>(mix64(static_cast<std::uint64_t>(id))) & mask();
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (Slot& s : old)
      if (s.id != kEmpty) (*this)[s.id] = std::move(s.value);
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace ctwin::detail
