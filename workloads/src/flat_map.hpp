// A hash map for small keys and values: open addressing with linear probing over a power-of-two
// table at most half full, deletion by backward shift. The serving loop looks up a request's KV
// state on every allocation and a block by its token identity on every prefix lookup;
// std::unordered_map's node per entry costs a cache miss there.
// KeyTraits gives `static K empty()` (a key never used, marking a free slot) and
// `static std::uint64_t hash(const K&)`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "sim/random.hpp"

namespace ctwin::detail {

template <class K, class V, class KeyTraits>
class FlatMap {
 public:
  FlatMap() : slots_(16) {}

  // Room for n keys without growing (no allocation while it holds at most n).
  void reserve(std::size_t n) {
    std::size_t cap = slots_.size();
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }

  V* find(const K& k) {
    for (std::size_t i = home(k);; i = next(i)) {
      Slot& s = slots_[i];
      if (s.key == KeyTraits::empty()) return nullptr;
      if (s.key == k) return &s.value;
    }
  }
  const V* find(const K& k) const { return const_cast<FlatMap*>(this)->find(k); }

  // The value of k, default-constructed when new. The reference holds until the next insert or erase.
  V& operator[](const K& k) { return *slot_for(k, V{}).first; }

  // Inserts k -> v unless k is present; true when inserted.
  bool insert(const K& k, V v) { return slot_for(k, std::move(v)).second; }

  // Removes k when present; true when it was.
  bool erase(const K& k) {
    std::size_t i = home(k);
    for (; !(slots_[i].key == k); i = next(i))
      if (slots_[i].key == KeyTraits::empty()) return false;
    // Pull later entries of the probe run back over the hole, unless their home lies after it.
    for (std::size_t j = next(i);; j = next(j)) {
      if (slots_[j].key == KeyTraits::empty()) break;
      const std::size_t h = home(slots_[j].key);
      if (((j - h) & mask()) >= ((j - i) & mask())) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i].key = KeyTraits::empty();
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    K key = KeyTraits::empty();
    V value{};
  };
  std::size_t mask() const { return slots_.size() - 1; }
  std::size_t next(std::size_t i) const { return (i + 1) & mask(); }
  std::size_t home(const K& k) const { return static_cast<std::size_t>(KeyTraits::hash(k)) & mask(); }
  // k's slot, filled with v when k is new; whether it was new.
  std::pair<V*, bool> slot_for(const K& k, V v) {
    if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
    std::size_t i = home(k);
    for (; !(slots_[i].key == KeyTraits::empty()); i = next(i))
      if (slots_[i].key == k) return {&slots_[i].value, false};
    slots_[i].key = k;
    slots_[i].value = std::move(v);
    ++size_;
    return {&slots_[i].value, true};
  }
  void rehash(std::size_t cap) {
    std::vector<Slot> old(cap);
    old.swap(slots_);
    size_ = 0;
    for (Slot& s : old)
      if (!(s.key == KeyTraits::empty())) slot_for(s.key, std::move(s.value));
  }
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

struct IdKey {
  static constexpr std::int64_t empty() { return std::numeric_limits<std::int64_t>::min(); }
  static std::uint64_t hash(std::int64_t id) { return mix64(static_cast<std::uint64_t>(id)); }
};

// Request id (any but INT64_MIN) -> V.
template <class V>
using FlatIdMap = FlatMap<std::int64_t, V, IdKey>;

}  // namespace ctwin::detail
