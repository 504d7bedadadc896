// Buffers. Each is immutable storage (glNamedBufferStorage) mapped once, persistently and
// coherently, for read and write (GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT), so a tensor's
// words are readable and writable by the host in place (HostTensor::data points into the
// mapping), uploads and readbacks are memcpy, and the interpreter's host-pointer model holds as
// on the CPU: host writes are seen by every later dispatch; dispatch writes are seen by the host
// after the runner's barrier and fence (opengl_dispatch.cpp).
// What that costs on a discrete GPU: the driver must keep such storage where both sides can
// reach it, in practice pinned system memory (or the small BAR window), so every kernel load
// and store crosses PCIe at a fraction of VRAM bandwidth, and coherence may turn off GPU-side
// caching. Device-local storage with explicit staging copies (glCopyNamedBufferSubData from a
// mapped staging buffer) is the fast layout there; on llvmpipe and integrated GPUs the mapping
// is the memory and costs nothing.
// Freed buffers return to a pool keyed by size class (8 classes per power of two), so host loops
// that allocate per iteration do not call the driver each time; names are deleted through
// defer_delete_buffer, so a tensor can be freed on any thread without the context.
#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

constexpr int64_t kMinBytes = 256;
constexpr int64_t kPoolLimit = int64_t(512) << 20;  // free bytes kept for reuse
constexpr GLbitfield kMapFlags = GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;

struct Pool {
  std::mutex mu;
  std::multimap<int64_t, Buffer*> free;
  int64_t free_bytes = 0;
  std::unordered_map<const void*, Buffer*> live;  // by mapping
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed, like the context
  return *p;
}

int64_t size_class(int64_t bytes) {
  int64_t b = std::max(bytes, kMinBytes);
  int64_t top = 1;
  while (top < b) top <<= 1;
  int64_t step = std::max<int64_t>(top / 16, kMinBytes);  // 8 classes in (top/2, top]
  return (b + step - 1) / step * step;
}

void destroy(Buffer* b) {
  if (b->name) defer_delete_buffer(b->name);  // deleting the buffer unmaps it
  delete b;
}

// Inside a Scope.
Buffer* create(int64_t bytes) {
  auto* b = new Buffer;
  b->bytes = bytes;
  while (glGetError() != GL_NO_ERROR) {
  }
  glCreateBuffers(1, &b->name);
  glNamedBufferStorage(b->name, static_cast<GLsizeiptr>(bytes), nullptr, kMapFlags);
  if (glGetError() != GL_NO_ERROR) {
    destroy(b);
    throw BackendError("ember: cannot allocate an OpenGL buffer of " + std::to_string(bytes) + " bytes on " +
                       context().description);
  }
  b->mapped = glMapNamedBufferRange(b->name, 0, static_cast<GLsizeiptr>(bytes), kMapFlags);
  if (!b->mapped) {
    destroy(b);
    check_error("glMapNamedBufferRange");
    throw BackendError("ember: cannot map an OpenGL buffer of " + std::to_string(bytes) + " bytes");
  }
  return b;
}

// Back to the pool (or deleted when the pool is full). Needs no context.
void release(Buffer* b) {
  Pool& p = pool();
  std::unique_lock<std::mutex> lock(p.mu);
  p.live.erase(b->mapped);
  if (p.free_bytes + b->bytes > kPoolLimit) {
    lock.unlock();
    destroy(b);
    return;
  }
  p.free.emplace(b->bytes, b);
  p.free_bytes += b->bytes;
}

}  // namespace

std::shared_ptr<Buffer> buffer_acquire(int64_t bytes) {
  const int64_t cls = size_class(bytes);
  Pool& p = pool();
  Buffer* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.free.find(cls);
    if (it != p.free.end()) {
      b = it->second;
      p.free.erase(it);
      p.free_bytes -= b->bytes;
    }
  }
  if (!b) {
    try {
      b = create(cls);
    } catch (const BackendError&) {
      buffer_pool_trim();  // out of memory: give the pooled buffers back and try once more
      delete_deferred();
      b = create(cls);
    }
  }
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.live[b->mapped] = b;
  }
  return std::shared_ptr<Buffer>(b, release);
}

HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero) {
  int64_t n = 1;
  for (int64_t d : shape) {
    EMBER_INTERNAL_ASSERT(d >= 0, "negative dimension " << d << " in an allocation");
    n *= d;
  }
  const Context& c = context();
  const int64_t bytes = std::max<int64_t>(n, 1) * 4;
  if (bytes > c.max_storage_bytes)
    throw BackendError("ember: a tensor of " + std::to_string(n) + " elements (" + std::to_string(bytes) +
                       " bytes) exceeds the largest shader storage block of " + c.description + " (" +
                       std::to_string(c.max_storage_bytes) + " bytes)");
  std::shared_ptr<Buffer> b = buffer_acquire(bytes);
  if (zero) std::memset(b->mapped, 0, static_cast<size_t>(bytes));
  HostTensor h;
  h.dtype = t;
  h.shape = shape;
  h.data = static_cast<uint32_t*>(b->mapped);
  h.owner = std::shared_ptr<void>(b, b.get());
  return h;
}

Buffer* find_buffer(const void* data) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.live.find(data);
  return it == p.live.end() ? nullptr : it->second;
}

void buffer_pool_trim() {
  Pool& p = pool();
  std::multimap<int64_t, Buffer*> drop;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    drop.swap(p.free);
    p.free_bytes = 0;
  }
  for (auto& kv : drop) destroy(kv.second);
}

}  // namespace ember::gl
