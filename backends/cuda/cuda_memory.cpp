// Buffers of the cuda backend: CUDA managed memory (cuMemAllocManaged), so a tensor's words have
// one address that kernels and the host both use (HostTensor::data is the device pointer) and the
// interpreter's host-pointer model holds as on the other GPU backends; the driver migrates pages
// to whichever side touches them (the device while kernels run a host loop, the host only when it
// reads a value). The host touches memory only after the runner synchronized its stream.
// Freed buffers return to the size-classed pool (backends/gpu_buffer_pool.h). Zero-filling is a
// memset on the stream, so a fresh buffer is not first migrated to the host.
#include "backends/cuda/cuda_memory.h"

#ifdef EMBER_WITH_CUDA
#include <algorithm>
#include <utility>

#include "backends/gpu_buffer_pool.h"

namespace ember::cuda {

namespace {

Buffer* create(int64_t bytes) {
  Scope scope;
  Context& c = context();
  auto* b = new Buffer;
  b->bytes = bytes;
  CUdeviceptr p = 0;
  const CUresult r = c.d.MemAllocManaged(&p, static_cast<size_t>(bytes), CU_MEM_ATTACH_GLOBAL);
  if (r != CUDA_SUCCESS) {
    delete b;
    check(r, ("cuMemAllocManaged of " + std::to_string(bytes) + " bytes").c_str());
  }
  b->ptr = p;
  b->mapped = reinterpret_cast<void*>(p);
  return b;
}

void destroy(Buffer* b) {
  // A pooled buffer is destroyed only when no queued launch uses it (runners keep the tensors of
  // their launches until they synchronize); cuMemFree also waits for the device.
  Context& c = context();
  c.d.CtxSetCurrent(c.ctx);
  c.d.MemFree(b->ptr);
  delete b;
}

GpuBufferPool<Buffer>& pool() {
  static auto* p = new GpuBufferPool<Buffer>(create, destroy);  // never destroyed, like the context
  return *p;
}

}  // namespace

HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t bytes = std::max<int64_t>(n, 1) * 4;
  std::shared_ptr<Buffer> b = pool().acquire(bytes);
  if (zero) {
    Scope scope;
    Context& c = context();
    check(c.d.MemsetD32Async(b->ptr, 0, static_cast<size_t>(std::max<int64_t>(n, 1)), c.stream), "cuMemsetD32Async");
  }
  return GpuBufferPool<Buffer>::own(t, shape, std::move(b));
}

Buffer* find_buffer(const void* data) { return pool().find(data); }

void buffer_pool_trim() { pool().trim(); }

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDA

namespace ember::cuda {

int buffer_device(const void* data) {
#ifdef EMBER_WITH_CUDA
  if (find_buffer(data)) return context().ordinal;
#endif
  (void)data;
  return -1;
}

void synchronize_stream() {
#ifdef EMBER_WITH_CUDA
  if (unavailable_reason().empty()) {
    Scope scope;
    Context& c = context();
    check(c.d.StreamSynchronize(c.stream), "cuStreamSynchronize");
  }
#endif
}

}  // namespace ember::cuda
