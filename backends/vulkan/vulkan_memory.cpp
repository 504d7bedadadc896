// Device buffers. Every buffer lives in host-visible, host-coherent memory and stays mapped,
// so a tensor's words are readable and writable by the host in place (HostTensor::data points
// into the mapping) and uploads/readbacks are memcpy. On lavapipe and integrated GPUs this
// memory is the device memory; on a discrete GPU kernels then read and write across the bus,
// which is correct but slower than device-local memory with staging copies (a later step).
// Freed buffers return to a pool keyed by size class (8 classes per power of two), so host
// loops that allocate per iteration do not call the driver each time.
#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backends/vulkan/vulkan.h"

namespace ember::vk {

namespace {

constexpr VkDeviceSize kMinBytes = 256;
constexpr VkDeviceSize kPoolLimit = VkDeviceSize(512) << 20;  // free bytes kept for reuse

struct Pool {
  std::mutex mu;
  std::multimap<VkDeviceSize, Buffer*> free;
  VkDeviceSize free_bytes = 0;
  std::unordered_map<const void*, Buffer*> live;  // by mapping
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed, like the context
  return *p;
}

VkDeviceSize size_class(VkDeviceSize bytes) {
  VkDeviceSize b = std::max(bytes, kMinBytes);
  VkDeviceSize top = 1;
  while (top < b) top <<= 1;
  VkDeviceSize step = std::max<VkDeviceSize>(top / 16, kMinBytes);  // 8 classes in (top/2, top]
  return (b + step - 1) / step * step;
}

void destroy(Buffer* b) {
  Context& c = context();
  if (b->mapped) vkUnmapMemory(c.device, b->memory);
  if (b->buffer) vkDestroyBuffer(c.device, b->buffer, nullptr);
  if (b->memory) vkFreeMemory(c.device, b->memory, nullptr);
  delete b;
}

Buffer* create(VkDeviceSize bytes) {
  Context& c = context();
  auto* b = new Buffer;
  b->bytes = bytes;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  try {
    check(vkCreateBuffer(c.device, &bi, nullptr, &b->buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(c.device, b->buffer, &req);
    if (!(req.memoryTypeBits & (1u << c.buffer_memory_type)))
      throw BackendError("ember: Vulkan buffers cannot use the host-visible memory type on " + c.description);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = c.buffer_memory_type;
    VkResult r = vkAllocateMemory(c.device, &ai, nullptr, &b->memory);
    if (r != VK_SUCCESS)
      throw BackendError("ember: cannot allocate a Vulkan buffer of " + std::to_string(bytes) + " bytes (" +
                         result_name(r) + ")");
    check(vkBindBufferMemory(c.device, b->buffer, b->memory, 0), "vkBindBufferMemory");
    check(vkMapMemory(c.device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "vkMapMemory");
  } catch (...) {
    destroy(b);
    throw;
  }
  return b;
}

// Back to the pool (or freed when the pool is full).
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

std::shared_ptr<Buffer> buffer_acquire(VkDeviceSize bytes) {
  const VkDeviceSize cls = size_class(bytes);
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
  const VkDeviceSize bytes = static_cast<VkDeviceSize>(std::max<int64_t>(n, 1)) * 4;
  if (bytes > c.props.limits.maxStorageBufferRange)
    throw BackendError("ember: a tensor of " + std::to_string(n) + " elements (" + std::to_string(bytes) +
                       " bytes) exceeds the largest storage buffer of " + c.description + " (" +
                       std::to_string(c.props.limits.maxStorageBufferRange) + " bytes)");
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
  std::multimap<VkDeviceSize, Buffer*> drop;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    drop.swap(p.free);
    p.free_bytes = 0;
  }
  for (auto& kv : drop) destroy(kv.second);
}

}  // namespace ember::vk
