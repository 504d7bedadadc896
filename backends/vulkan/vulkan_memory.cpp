// Device buffers. Every buffer lives in host-visible, host-coherent memory and stays mapped,
// so a tensor's words are readable and writable by the host in place (HostTensor::data points
// into the mapping) and uploads/readbacks are memcpy. On lavapipe and integrated GPUs this
// memory is the device memory; on a discrete GPU kernels then read and write across the bus,
// which is correct but slower than device-local memory with staging copies (a later step).
// Freed buffers return to a pool keyed by size class (backends/gpu_buffer_pool.h), so host
// loops that allocate per iteration do not call the driver each time.
#include "backends/gpu_buffer_pool.h"
#include "backends/vulkan/vulkan.h"

namespace ember::vk {

namespace {

void destroy(Buffer* b) {
  Context& c = context();
  if (b->mapped) vkUnmapMemory(c.device, b->memory);
  if (b->buffer) vkDestroyBuffer(c.device, b->buffer, nullptr);
  if (b->memory) vkFreeMemory(c.device, b->memory, nullptr);
  delete b;
  count_object(-1);
}

Buffer* create(VkDeviceSize bytes) {
  Context& c = context();
  auto* b = new Buffer;
  count_object(1);
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

GpuBufferPool<Buffer>& pool() {
  static auto* p = new GpuBufferPool<Buffer>(create, destroy);  // never destroyed, like the context
  return *p;
}

}  // namespace

std::shared_ptr<Buffer> buffer_acquire(VkDeviceSize bytes) { return pool().acquire(bytes); }

HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero) {
  const Context& c = context();
  return pool().tensor(t, shape, zero, c.props.limits.maxStorageBufferRange, "storage buffer", c.description);
}

Buffer* find_buffer(const void* data) { return pool().find(data); }

void buffer_pool_trim() { pool().trim(); }

}  // namespace ember::vk
