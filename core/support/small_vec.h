// SmallVec<T, N>: a vector whose first N items live inside it, so a node's operands, uses and
// shape sit in the node's own cache lines instead of one heap block each. Passes walk the IR in
// program order; a heap block per list made every walk a random access per node, which cost
// more per node the larger the program (issue 17's growth). Reads like a std::vector and converts
// to one (a copy); T must be trivially copyable.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

namespace ember {

template <typename T, uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds trivially copyable values");
  static_assert(N > 0, "SmallVec needs inline room");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = size_t;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> v) { assign(v.begin(), v.end()); }
  SmallVec(const std::vector<T>& v) { assign(v.data(), v.data() + v.size()); }  // NOLINT: reads like a vector
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec& operator=(const std::vector<T>& v) {
    assign(v.data(), v.data() + v.size());
    return *this;
  }
  ~SmallVec() { release(); }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: a copy
  operator std::span<const T>() const { return {data(), size()}; }            // NOLINT: a view

  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  bool empty() const { return size_ == 0; }
  T* data() { return on_heap() ? heap_ : inline_; }
  const T* data() const { return on_heap() ? heap_ : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size_ - 1]; }

  void push_back(T v) {
    if (size_ == cap_) grow(size_ + 1);
    data()[size_++] = v;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_t n, T v = T()) {
    if (n > cap_) grow(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<uint32_t>(n);
  }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  // Back to empty inline storage (the emptied lists of an erased node give their heap back).
  void release() {
    if (on_heap()) std::free(heap_);
    size_ = 0;
    cap_ = N;
  }
  T* erase(T* pos) { return erase(pos, pos + 1); }
  T* erase(T* first, T* last) {
    std::memmove(first, last, static_cast<size_t>(end() - last) * sizeof(T));
    size_ -= static_cast<uint32_t>(last - first);
    return first;
  }
  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    if (n > cap_) {
      release();
      grow(n);
    }
    std::copy(first, last, data());
    size_ = static_cast<uint32_t>(n);
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const SmallVec& a, const std::vector<T>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  bool on_heap() const { return cap_ > N; }
  void take(SmallVec& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.on_heap()) {
      heap_ = o.heap_;
    } else {
      std::memcpy(inline_, o.inline_, sizeof(inline_));
    }
    o.size_ = 0;
    o.cap_ = N;
  }
  void grow(size_t want) {
    const size_t cap = std::max<size_t>(want, static_cast<size_t>(cap_) * 2);
    T* h = static_cast<T*>(std::malloc(cap * sizeof(T)));
    if (!h) throw std::bad_alloc();
    std::memcpy(h, data(), size_ * sizeof(T));
    if (on_heap()) std::free(heap_);
    heap_ = h;
    cap_ = static_cast<uint32_t>(cap);
  }
  // The size first: a node's `users.size()` and first entry share a cache line.
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  union {
    T inline_[N];
    T* heap_;
  };
};

}  // namespace ember
