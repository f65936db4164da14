// A move-only callable stored inline (no heap allocation) for small captures.
// Events are scheduled millions of times per second; std::function's allocation and
// copyability cost too much there.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace ctwin {

template <class Signature, std::size_t Capacity = 48>
class InplaceFunction;

template <class R, class... Args, std::size_t Capacity>
class InplaceFunction<R(Args...), Capacity> {
 public:
  InplaceFunction() = default;

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, InplaceFunction> && std::is_invocable_r_v<R, D&, Args...>>>
  InplaceFunction(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly, as with std::function
    static_assert(sizeof(D) <= Capacity, "capture too large for InplaceFunction; capture an index instead");
    static_assert(alignof(D) <= alignof(std::max_align_t));
    static_assert(std::is_nothrow_move_constructible_v<D>);
    ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
    ops_ = &kOps<D>;
  }

  InplaceFunction(InplaceFunction&& o) noexcept { take(o); }
  InplaceFunction& operator=(InplaceFunction&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  InplaceFunction(const InplaceFunction&) = delete;
  InplaceFunction& operator=(const InplaceFunction&) = delete;
  ~InplaceFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }

  void reset() {
    if (ops_) {
      ops_->destroy(storage_);
      ops_ = nullptr;
    }
  }

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* dst, void* src);
    void (*destroy)(void*);
  };
  template <class D>
  static constexpr Ops kOps{[](void* p, Args&&... a) -> R { return (*static_cast<D*>(p))(std::forward<Args>(a)...); },
                            [](void* dst, void* src) {
                              ::new (dst) D(std::move(*static_cast<D*>(src)));
                              static_cast<D*>(src)->~D();
                            },
                            [](void* p) { static_cast<D*>(p)->~D(); }};

  void take(InplaceFunction& o) {
    if (o.ops_) {
      o.ops_->move(storage_, o.storage_);
      ops_ = o.ops_;
      o.ops_ = nullptr;
    }
  }

  alignas(std::max_align_t) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace ctwin
