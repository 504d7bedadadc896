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
// Freed buffers return to a pool keyed by size class (backends/gpu_buffer_pool.h), so host loops
// that allocate per iteration do not call the driver each time; names are deleted through
// defer_delete_buffer, so a tensor can be freed on any thread without the context.
#include "backends/gpu_buffer_pool.h"
#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

constexpr GLbitfield kMapFlags = GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;

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

// Released buffers need no context: names are deleted through defer_delete_buffer. After a
// failed allocation the deferred deletions run before the retry.
GpuBufferPool<Buffer>& pool() {
  static auto* p = new GpuBufferPool<Buffer>(create, destroy, delete_deferred);  // never destroyed, like the context
  return *p;
}

}  // namespace

std::shared_ptr<Buffer> buffer_acquire(int64_t bytes) { return pool().acquire(bytes); }

HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero) {
  const Context& c = context();
  return pool().tensor(t, shape, zero, c.max_storage_bytes, "shader storage block", c.description);
}

Buffer* find_buffer(const void* data) { return pool().find(data); }

void buffer_pool_trim() { pool().trim(); }

}  // namespace ember::gl
