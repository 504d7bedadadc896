// Owning handles for isl objects (core/analysis only: passes never see isl). Isl<T> frees its
// object when it goes out of scope; take() hands ownership to an __isl_take parameter, copy()
// makes a new reference for one, get() lends it to an __isl_keep one.
#pragma once
#include <isl/aff.h>
#include <isl/ctx.h>
#include <isl/id.h>
#include <isl/local_space.h>
#include <isl/map.h>
#include <isl/options.h>
#include <isl/set.h>
#include <isl/space.h>
#include <isl/val.h>

#include <utility>

namespace ember {

template <class T>
struct IslOps;

#define EMBER_ISL_OPS(T)                                              \
  template <>                                                         \
  struct IslOps<isl_##T> {                                            \
    static void free(isl_##T* p) { isl_##T##_free(p); }               \
    static isl_##T* copy(isl_##T* p) { return isl_##T##_copy(p); }   \
  };
EMBER_ISL_OPS(space)
EMBER_ISL_OPS(local_space)
EMBER_ISL_OPS(set)
EMBER_ISL_OPS(basic_set)
EMBER_ISL_OPS(map)
EMBER_ISL_OPS(aff)
EMBER_ISL_OPS(pw_aff)
EMBER_ISL_OPS(val)
EMBER_ISL_OPS(id)
#undef EMBER_ISL_OPS

template <class T>
class Isl {
 public:
  Isl() = default;
  explicit Isl(T* p) : p_(p) {}
  Isl(const Isl& o) : p_(o.p_ ? IslOps<T>::copy(o.p_) : nullptr) {}
  Isl(Isl&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Isl& operator=(Isl o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Isl() {
    if (p_) IslOps<T>::free(p_);
  }
  T* get() const { return p_; }
  T* copy() const { return p_ ? IslOps<T>::copy(p_) : nullptr; }
  T* take() { return std::exchange(p_, nullptr); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

// One isl context; every object made in it must be gone before it is.
class IslCtx {
 public:
  IslCtx() : ctx_(isl_ctx_alloc()) { isl_options_set_on_error(ctx_, ISL_ON_ERROR_CONTINUE); }
  IslCtx(const IslCtx&) = delete;
  IslCtx& operator=(const IslCtx&) = delete;
  ~IslCtx() { isl_ctx_free(ctx_); }
  isl_ctx* get() const { return ctx_; }

 private:
  isl_ctx* ctx_;
};

}  // namespace ember
