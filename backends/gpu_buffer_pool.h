// The size-classed pool of mapped device buffers shared by the Vulkan and OpenGL backends. Freed
// buffers return to the pool keyed by size class (8 classes per power of two, 256 bytes at the
// least), up to 512 MiB of free bytes, so host loops that allocate per iteration do not call the
// driver each time; live buffers are found by their mapping (a tensor's data pointer), and
// tensors are made over them.
// `Buffer` has `void* mapped` and `bytes` (its size type is the pool's); the backend supplies how
// one is created (throwing BackendError when the driver refuses) and destroyed.
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/error.h"

namespace ember {

template <class Buffer>
class GpuBufferPool {
 public:
  using Size = decltype(Buffer::bytes);
  using Create = Buffer* (*)(Size bytes);
  using Destroy = void (*)(Buffer* b);
  // `reclaim`, when given, runs after a failed create has trimmed the pool and before the one
  // retry (a backend whose deletions are deferred frees them there).
  GpuBufferPool(Create create, Destroy destroy, void (*reclaim)() = nullptr)
      : create_(create), destroy_(destroy), reclaim_(reclaim) {}

  // A buffer of at least `bytes` (its size class), from the pool or new; back to the pool when
  // the last owner lets go (or destroyed when the pool is full). Needs no context to release.
  std::shared_ptr<Buffer> acquire(Size bytes) {
    const Size cls = size_class(bytes);
    Buffer* b = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(cls);
      if (it != free_.end()) {
        b = it->second;
        free_.erase(it);
        free_bytes_ -= b->bytes;
      }
    }
    if (!b) {
      try {
        b = create_(cls);
      } catch (const BackendError&) {
        trim();  // out of memory: give the pooled buffers back and try once more
        if (reclaim_) reclaim_();
        b = create_(cls);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[b->mapped] = b;
    }
    return std::shared_ptr<Buffer>(b, [this](Buffer* x) { release(x); });
  }

  // A tensor whose words live in a fresh buffer (zero-filled when `zero`) and which owns it.
  // Throws BackendError when it takes more than `max_bytes`, the largest `block` ("storage
  // buffer") of `device`.
  HostTensor tensor(DType t, const std::vector<int64_t>& shape, bool zero, Size max_bytes, const char* block,
                    const std::string& device) {
    int64_t n = 1;
    for (int64_t d : shape) {
      EMBER_INTERNAL_ASSERT(d >= 0, "negative dimension " << d << " in an allocation");
      n *= d;
    }
    const Size bytes = static_cast<Size>(std::max<int64_t>(n, 1)) * 4;
    if (bytes > max_bytes)
      throw BackendError("ember: a tensor of " + std::to_string(n) + " elements (" + std::to_string(bytes) +
                         " bytes) exceeds the largest " + block + " of " + device + " (" + std::to_string(max_bytes) +
                         " bytes)");
    std::shared_ptr<Buffer> b = acquire(bytes);
    if (zero) std::memset(b->mapped, 0, static_cast<size_t>(bytes));
    return own(t, shape, std::move(b));
  }

  // A tensor of `shape` over the words of `b` (an acquired buffer), keeping `b` alive.
  static HostTensor own(DType t, const std::vector<int64_t>& shape, std::shared_ptr<Buffer> b) {
    HostTensor h;
    h.dtype = t;
    h.shape = shape;
    h.data = static_cast<uint32_t*>(b->mapped);
    h.owner = std::shared_ptr<void>(b, b.get());
    return h;
  }

  // The live buffer whose mapping starts at `data`, or null (host memory).
  Buffer* find(const void* data) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(data);
    return it == live_.end() ? nullptr : it->second;
  }

  // Destroys the pooled free buffers.
  void trim() {
    std::multimap<Size, Buffer*> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop.swap(free_);
      free_bytes_ = 0;
    }
    for (auto& kv : drop) destroy_(kv.second);
  }

 private:
  static constexpr Size kMinBytes = 256;
  static constexpr Size kPoolLimit = Size(512) << 20;  // free bytes kept for reuse

  static Size size_class(Size bytes) {
    Size b = std::max(bytes, kMinBytes);
    Size top = 1;
    while (top < b) top <<= 1;
    Size step = std::max<Size>(top / 16, kMinBytes);  // 8 classes in (top/2, top]
    return (b + step - 1) / step * step;
  }

  void release(Buffer* b) {
    std::unique_lock<std::mutex> lock(mu_);
    live_.erase(b->mapped);
    if (free_bytes_ + b->bytes > kPoolLimit) {
      lock.unlock();
      destroy_(b);
      return;
    }
    free_.emplace(b->bytes, b);
    free_bytes_ += b->bytes;
  }

  Create create_;
  Destroy destroy_;
  void (*reclaim_)();
  std::mutex mu_;
  std::multimap<Size, Buffer*> free_;
  Size free_bytes_ = 0;
  std::unordered_map<const void*, Buffer*> live_;  // by mapping
};

}  // namespace ember
