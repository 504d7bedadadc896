// The Vulkan Device of device.h, on the raw API through the loader. All buffers are
// host-visible and coherent (simple, and right for a runner that proves an export). Commands
// are recorded into one command buffer with a full compute/transfer barrier before each (and one
// to the host at the end) and submitted when the host needs memory (read, finish) or after
// kMaxRecorded commands. Each
// kernel gets one descriptor set (its buffers never change); parameters go in push constants,
// or, for a parameter buffer, into a slice of a host-visible ring bound with a dynamic offset.
#include <vulkan/vulkan.h>

#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include "device.h"

namespace runner {

namespace {

constexpr int kMaxRecorded = 4096;
constexpr VkDeviceSize kRingBytes = 1 << 20;

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw std::runtime_error(std::string("Vulkan: ") + what + " failed (VkResult " + std::to_string(r) + ")");
}

struct Buf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint32_t* mapped = nullptr;
  size_t words = 0;
};

struct Kernel {
  VkShaderModule module = VK_NULL_HANDLE;
  std::vector<VkDescriptorSetLayout> set_layouts;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;
  ParamBlock params;
  bool dynamic = false;  // parameters in a ring slice (dynamic offset), not push constants
};

class VulkanDevice : public Device {
 public:
  VulkanDevice() {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "ember export_runner";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    check(vkCreateInstance(&ici, nullptr, &instance_), "vkCreateInstance (is a Vulkan driver installed? Debian: mesa-vulkan-drivers)");
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance_, &n, nullptr);
    if (n == 0) throw std::runtime_error("Vulkan: no physical device");
    std::vector<VkPhysicalDevice> devs(n);
    vkEnumeratePhysicalDevices(instance_, &n, devs.data());
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < n; ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devs[i], &p);
      const int score = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 3
                        : p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 2 : 1;
      if (compute_family(devs[i]) >= 0 && score > best_score) best = int(i), best_score = score;
    }
    if (best < 0) throw std::runtime_error("Vulkan: no device with a compute queue");
    phys_ = devs[best];
    vkGetPhysicalDeviceProperties(phys_, &props_);
    vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
    family_ = uint32_t(compute_family(phys_));
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family_;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    check(vkCreateDevice(phys_, &dci, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, family_, 0, &queue_);
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family_;
    check(vkCreateCommandPool(device_, &pci, nullptr, &cmd_pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = cmd_pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &cai, &cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vkCreateFence(device_, &fci, nullptr, &fence_), "vkCreateFence");
    ring_ = make_buffer(kRingBytes / 4, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT);
  }

  ~VulkanDevice() override {
    if (!device_) return;
    vkDeviceWaitIdle(device_);
    for (auto& [k, kr] : kernels_) {
      vkDestroyDescriptorPool(device_, kr.pool, nullptr);
      vkDestroyPipeline(device_, kr.pipeline, nullptr);
      vkDestroyPipelineLayout(device_, kr.layout, nullptr);
      for (auto l : kr.set_layouts) vkDestroyDescriptorSetLayout(device_, l, nullptr);
      vkDestroyShaderModule(device_, kr.module, nullptr);
    }
    buffers_.emplace(-1, ring_);  // ids are manifest buffer indices, never negative
    for (auto& [id, b] : buffers_) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      vkFreeMemory(device_, b.memory, nullptr);
    }
    vkDestroyFence(device_, fence_, nullptr);
    vkDestroyCommandPool(device_, cmd_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
    vkDestroyInstance(instance_, nullptr);
  }

  std::string describe() const override {
    return std::string("Vulkan ") + std::to_string(VK_VERSION_MAJOR(props_.apiVersion)) + "." +
           std::to_string(VK_VERSION_MINOR(props_.apiVersion)) + " on " + props_.deviceName;
  }

  void create_buffer(int id, size_t words) override {
    buffers_[id] = make_buffer(words, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                          VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  }

  void write(int id, size_t offset, const uint32_t* data, size_t words) override {
    finish();
    std::memcpy(buffers_.at(id).mapped + offset, data, words * 4);
  }

  void read(int id, size_t offset, uint32_t* data, size_t words) override {
    finish();
    std::memcpy(data, buffers_.at(id).mapped + offset, words * 4);
  }

  void load_kernel(int k, const KernelSpec& ks, const Manifest& m) override {
    if (ks.params.kind == "cbuffer" || ks.params.kind == "word_array")
      throw std::runtime_error("kernel " + ks.name + ": parameters in a " + ks.params.kind +
                               " are not Vulkan's; the Vulkan runner runs a `spirv` export");
    const std::string path = m.dir + "/" + ks.file;
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("kernel " + ks.name + ": cannot open " + path);
    std::string code((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (code.size() < 20 || code.size() % 4 || *reinterpret_cast<const uint32_t*>(code.data()) != 0x07230203u)
      throw std::runtime_error("kernel " + ks.name + ": " + path + " is not a SPIR-V module (the Vulkan runner needs a `spirv` export)");
    Kernel kr;
    kr.params = ks.params;
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = code.size();
    smi.pCode = reinterpret_cast<const uint32_t*>(code.data());
    check(vkCreateShaderModule(device_, &smi, nullptr, &kr.module), "vkCreateShaderModule");

    // Descriptor bindings per set: the storage buffers, plus a dynamic parameter buffer.
    std::map<int, std::vector<VkDescriptorSetLayoutBinding>> sets;
    for (const auto& b : ks.bindings) {
      VkDescriptorSetLayoutBinding lb{};
      lb.binding = uint32_t(b.binding);
      lb.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      lb.descriptorCount = 1;
      lb.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
      sets[b.set].push_back(lb);
    }
    kr.dynamic = ks.params.kind == "storage_buffer" || ks.params.kind == "uniform_block";
    if (kr.dynamic) {
      if (ks.params.binding < 0) throw std::runtime_error("kernel " + ks.name + ": its parameter buffer has no binding");
      VkDescriptorSetLayoutBinding lb{};
      lb.binding = uint32_t(ks.params.binding);
      lb.descriptorType = param_type(kr);
      lb.descriptorCount = 1;
      lb.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
      sets[ks.params.set].push_back(lb);
    }
    const int nsets = sets.empty() ? 0 : sets.rbegin()->first + 1;
    for (int s = 0; s < nsets; ++s) {
      VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
      auto& v = sets[s];
      li.bindingCount = uint32_t(v.size());
      li.pBindings = v.data();
      VkDescriptorSetLayout l;
      check(vkCreateDescriptorSetLayout(device_, &li, nullptr, &l), "vkCreateDescriptorSetLayout");
      kr.set_layouts.push_back(l);
    }
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(ks.params.size)};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = uint32_t(kr.set_layouts.size());
    pli.pSetLayouts = kr.set_layouts.data();
    if (ks.params.kind == "push_constant" && ks.params.size > 0) {
      if (uint32_t(ks.params.size) > props_.limits.maxPushConstantsSize)
        throw std::runtime_error("kernel " + ks.name + ": " + std::to_string(ks.params.size) + " bytes of push constants, the device allows " +
                                 std::to_string(props_.limits.maxPushConstantsSize));
      pli.pushConstantRangeCount = 1;
      pli.pPushConstantRanges = &pcr;
    }
    check(vkCreatePipelineLayout(device_, &pli, nullptr, &kr.layout), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpi.stage = VkPipelineShaderStageCreateInfo{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.module = kr.module;
    cpi.stage.pName = ks.entry.c_str();
    cpi.layout = kr.layout;
    check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpi, nullptr, &kr.pipeline),
          ("vkCreateComputePipelines for kernel " + ks.name).c_str());

    // One descriptor set per set number, written once.
    if (nsets) {
      VkDescriptorPoolSize sizes[3] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, uint32_t(ks.bindings.size() + 1)},
                                       {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC, 1},
                                       {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC, 1}};
      VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      dpi.maxSets = uint32_t(nsets);
      dpi.poolSizeCount = 3;
      dpi.pPoolSizes = sizes;
      check(vkCreateDescriptorPool(device_, &dpi, nullptr, &kr.pool), "vkCreateDescriptorPool");
      VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      dai.descriptorPool = kr.pool;
      dai.descriptorSetCount = uint32_t(nsets);
      dai.pSetLayouts = kr.set_layouts.data();
      kr.sets.resize(nsets);
      check(vkAllocateDescriptorSets(device_, &dai, kr.sets.data()), "vkAllocateDescriptorSets");
      std::vector<VkDescriptorBufferInfo> infos;
      infos.reserve(ks.bindings.size() + 1);
      std::vector<VkWriteDescriptorSet> writes;
      for (const auto& b : ks.bindings) {
        const Buf& buf = buffers_.at(b.buffer);
        infos.push_back({buf.buffer, 0, VK_WHOLE_SIZE});
        VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = kr.sets[b.set];
        w.dstBinding = uint32_t(b.binding);
        w.descriptorCount = 1;
        w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w.pBufferInfo = &infos.back();
        writes.push_back(w);
      }
      if (kr.dynamic) {
        infos.push_back({ring_.buffer, 0, VkDeviceSize(std::max(ks.params.size, 4))});
        VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = kr.sets[ks.params.set];
        w.dstBinding = uint32_t(ks.params.binding);
        w.descriptorCount = 1;
        w.descriptorType = param_type(kr);
        w.pBufferInfo = &infos.back();
        writes.push_back(w);
      }
      vkUpdateDescriptorSets(device_, uint32_t(writes.size()), writes.data(), 0, nullptr);
    }
    kernels_[k] = kr;
  }

  void dispatch(int k, const std::array<uint32_t, 3>& groups, const std::vector<uint8_t>& params) override {
    const Kernel& kr = kernels_.at(k);
    for (int a = 0; a < 3; ++a)
      if (groups[a] > props_.limits.maxComputeWorkGroupCount[a])
        throw std::runtime_error("dispatch of " + std::to_string(groups[a]) + " groups along axis " + std::to_string(a) +
                                 ", the device allows " + std::to_string(props_.limits.maxComputeWorkGroupCount[a]));
    uint32_t dyn_offset = 0;
    if (kr.dynamic) {
      const VkDeviceSize align = std::max<VkDeviceSize>(
          256, kr.params.kind == "storage_buffer" ? props_.limits.minStorageBufferOffsetAlignment
                                                  : props_.limits.minUniformBufferOffsetAlignment);
      ring_pos_ = (ring_pos_ + align - 1) / align * align;
      if (ring_pos_ + params.size() > kRingBytes) {
        finish();  // the ring is free again once the recorded work is done
        ring_pos_ = 0;
      }
      std::memcpy(reinterpret_cast<uint8_t*>(ring_.mapped) + ring_pos_, params.data(), params.size());
      dyn_offset = uint32_t(ring_pos_);
      ring_pos_ += params.size();
    }
    begin_command();
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kr.pipeline);
    for (size_t s = 0; s < kr.sets.size(); ++s) {
      const bool has_dyn = kr.dynamic && int(s) == kr.params.set;
      vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kr.layout, uint32_t(s), 1, &kr.sets[s], has_dyn ? 1 : 0,
                              has_dyn ? &dyn_offset : nullptr);
    }
    if (kr.params.kind == "push_constant" && !params.empty())
      vkCmdPushConstants(cmd_, kr.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, uint32_t(params.size()), params.data());
    vkCmdDispatch(cmd_, groups[0], groups[1], groups[2]);
  }

  void copy(int src, size_t src_offset, int dst, size_t dst_offset, size_t words) override {
    begin_command();
    VkBufferCopy r{src_offset * 4, dst_offset * 4, words * 4};
    vkCmdCopyBuffer(cmd_, buffers_.at(src).buffer, buffers_.at(dst).buffer, 1, &r);
  }

  void fill(int id, size_t offset, size_t words, uint32_t value) override {
    begin_command();
    vkCmdFillBuffer(cmd_, buffers_.at(id).buffer, offset * 4, words * 4, value);
  }

  void finish() override {
    if (!recording_) return;
    // The fence only orders device accesses: make the writes visible to the host's reads too.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    check(vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit");
    check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(vkResetFences(device_, 1, &fence_), "vkResetFences");
    check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    recording_ = false;
    recorded_ = 0;
    ring_pos_ = 0;
  }

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties mem_props_{};
  uint32_t family_ = 0;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  int recorded_ = 0;
  std::map<int, Buf> buffers_;
  std::map<int, Kernel> kernels_;
  Buf ring_;
  VkDeviceSize ring_pos_ = 0;

  static VkDescriptorType param_type(const Kernel& kr) {
    return kr.params.kind == "storage_buffer" ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC;
  }

  static int compute_family(VkPhysicalDevice d) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(d, &n, fams.data());
    for (uint32_t i = 0; i < n; ++i)
      if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return int(i);
    return -1;
  }

  Buf make_buffer(size_t words, VkBufferUsageFlags usage) {
    Buf b;
    b.words = words;
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = VkDeviceSize(words) * 4;
    bci.usage = usage;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(device_, &bci, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int type = -1;
    for (uint32_t i = 0; i < mem_props_.memoryTypeCount && type < 0; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (mem_props_.memoryTypes[i].propertyFlags & want) == want) type = int(i);
    if (type < 0) throw std::runtime_error("Vulkan: no host-visible coherent memory type");
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = uint32_t(type);
    check(vkAllocateMemory(device_, &mai, nullptr, &b.memory), "vkAllocateMemory");
    check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
    void* p = nullptr;
    check(vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b.mapped = static_cast<uint32_t*>(p);
    return b;
  }

  // Starts recording if needed, then puts a barrier before the command: every command may read or
  // write what the one before wrote (dispatches, copies and fills alike), in this command buffer or
  // an earlier submission (a barrier's first scope is everything earlier in submission order).
  void begin_command() {
    if (recorded_ >= kMaxRecorded) finish();
    if (!recording_) {
      VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
      bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      check(vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
      recording_ = true;
    }
    {
      VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT;
      const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
      vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    }
    ++recorded_;
  }
};

}  // namespace

std::unique_ptr<Device> make_vulkan_device() { return std::make_unique<VulkanDevice>(); }

}  // namespace runner
