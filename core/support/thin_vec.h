// ThinVec<T>: a vector one pointer wide, null while empty. For lists most IR nodes leave empty
// (a kernel's params and memories, a dimension's dim users): a std::vector costs 24 bytes of
// every Node, and Node's size is memory every pass walks. Reads like a std::vector (and converts
// to one); T must be trivially copyable.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <vector>

namespace ember {

template <typename T>
class ThinVec {
  static_assert(std::is_trivially_copyable_v<T>, "ThinVec holds trivially copyable values");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = size_t;

  ThinVec() = default;
  ThinVec(std::initializer_list<T> v) { assign(v.begin(), v.end()); }
  ThinVec(const std::vector<T>& v) { assign(v.data(), v.data() + v.size()); }  // NOLINT: reads like a vector
  ThinVec(const ThinVec& o) { assign(o.begin(), o.end()); }
  ThinVec(ThinVec&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  ThinVec& operator=(const ThinVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  ThinVec& operator=(ThinVec&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ThinVec& operator=(const std::vector<T>& v) {
    assign(v.data(), v.data() + v.size());
    return *this;
  }
  ThinVec& operator=(std::initializer_list<T> v) {
    assign(v.begin(), v.end());
    return *this;
  }
  ~ThinVec() { std::free(h_); }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: a copy

  size_t size() const { return h_ ? h_->size : 0; }
  size_t capacity() const { return h_ ? h_->cap : 0; }
  bool empty() const { return size() == 0; }
  T* data() { return h_ ? h_->items() : nullptr; }
  const T* data() const { return h_ ? h_->items() : nullptr; }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  T& operator[](size_t i) { return h_->items()[i]; }
  const T& operator[](size_t i) const { return h_->items()[i]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[size() - 1]; }
  const T& front() const { return (*this)[0]; }
  const T& back() const { return (*this)[size() - 1]; }

  void push_back(T v) {
    if (size() == capacity()) grow(size() + 1);
    h_->items()[h_->size++] = v;
  }
  void pop_back() { --h_->size; }
  void clear() {
    if (h_) h_->size = 0;
  }
  void resize(size_t n, T v = T()) {
    if (n > capacity()) grow(n);
    for (size_t i = size(); i < n; ++i) h_->items()[i] = v;
    if (h_) h_->size = static_cast<uint32_t>(n);
  }
  void reserve(size_t n) {
    if (n > capacity()) grow(n);
  }
  // Frees the storage (an emptied list of an erased node).
  void release() {
    std::free(h_);
    h_ = nullptr;
  }
  template <typename It>
  void assign(It first, It last) {
    const size_t n = static_cast<size_t>(std::distance(first, last));
    if (n == 0) {
      clear();
      return;
    }
    if (n > capacity()) {
      std::free(h_);
      h_ = nullptr;
      grow(n);
    }
    std::copy(first, last, h_->items());
    h_->size = static_cast<uint32_t>(n);
  }

  friend bool operator==(const ThinVec& a, const ThinVec& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const ThinVec& a, const std::vector<T>& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  struct Header {
    uint32_t size, cap;
    T* items() { return reinterpret_cast<T*>(this + 1); }
  };
  static_assert(alignof(T) <= alignof(Header) || sizeof(Header) % alignof(T) == 0, "ThinVec items follow the header");
  void grow(size_t want) {
    const size_t cap = std::max<size_t>(want, std::max<size_t>(2, capacity() * 2));
    auto* h = static_cast<Header*>(std::realloc(h_, sizeof(Header) + cap * sizeof(T)));
    if (!h) throw std::bad_alloc();
    if (!h_) h->size = 0;
    h->cap = static_cast<uint32_t>(cap);
    h_ = h;
  }
  Header* h_ = nullptr;
};

}  // namespace ember
