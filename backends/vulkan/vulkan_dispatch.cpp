// The Vulkan KernelRunner. The interpreter runs the host plan and hands each kernel here; the
// runner records the dispatch into a command buffer instead of running it, so a host plan's
// dispatches (a host loop of kernels included) go to the device in a few submits:
//   - memories are device buffers (allocate / bind_input); their tensors' owners are kept
//     alive by the batch until its fence signals, so no buffer is reused while queued work
//     still reads it;
//   - a pipeline barrier is recorded before a dispatch that reads or writes a buffer an earlier
//     dispatch of the same epoch wrote, or writes a buffer it read (RAW, WAW, WAR);
//   - the command buffer is submitted every kBatchDispatches dispatches and whenever the host
//     needs memory (synchronize: the interpreter calls it before host work on tensors, and
//     end_run at the end of every call), then the runner waits for it;
//   - scalars go in push constants (header words `threads` and `row`, then the params), or in
//     a small buffer when they do not fit (KernelBinary::params_in_buffer);
//   - dispatches above the device's group-count limit in x become 2-D grids (`row` threads per
//     grid row; the shader guards the flat id against `threads`);
//   - a kernel with a group dispatches one workgroup per group (gpu_runtime.h, grouped_threads).
#include <algorithm>
#include <cstring>

#include "backends/gpu_runtime.h"
#include "backends/vulkan/vulkan.h"

namespace ember::vk {

namespace {

constexpr int kBatchDispatches = 256;
constexpr uint32_t kSetsPerPool = 128;

struct Batch {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools;
  size_t pool = 0;                          // pools[pool] is the one sets come from
  std::vector<std::shared_ptr<void>> keep;  // buffers and pipelines the recorded work uses
  int dispatches = 0;
  bool recording = false;
};

void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

class Runner : public KernelRunner {
 public:
  Runner(std::unordered_map<int, KernelBinary> kernels, std::vector<int> written_inputs)
      : kernels_(std::move(kernels)), inputs_(written_inputs) {
    Context& c = context();
    VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    ci.queueFamilyIndex = c.queue_family;
    check(vkCreateCommandPool(c.device, &ci, nullptr, &cmd_pool_), "vkCreateCommandPool");
    count_object(1);
  }

  ~Runner() override {
    Context& c = context();
    try {
      wait_all();
    } catch (...) {
    }
    for (auto* list : {&free_, &in_flight_})
      for (auto& b : *list) destroy(c, *b);
    if (cur_) destroy(c, *cur_);
    vkDestroyCommandPool(c.device, cmd_pool_, nullptr);
    count_object(-1);
  }

  void begin_run() override { run_mu_.lock(); }

  void end_run(bool ok) override {
    try {
      synchronize();
      inputs_.finish(ok);
    } catch (...) {
      inputs_.finish(false);
      run_mu_.unlock();
      throw;
    }
    run_mu_.unlock();
  }

  HostTensor allocate(DType t, const std::vector<int64_t>& shape) override { return device_tensor(t, shape, true); }

  HostTensor bind_input(const Node* arg, const HostTensor& t) override {
    if (find_buffer(t.data)) return t;  // already device memory (a result of an earlier call)
    return inputs_.bind(arg, t, device_tensor(t.dtype, t.shape, false));
  }

  void synchronize() override {
    if (cur_ && cur_->recording) submit();
    wait_all();
  }

  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& params,
                  const std::vector<int64_t>& dims) override {
    const KernelBinary& kb = compiled_kernel(kernels_, kernel, memories.size(), params.size());
    const int64_t threads = grouped_threads(kernel, dims);  // whole workgroups for a kernel with a group
    if (threads == 0) return;
    Context& c = context();
    const GpuGrid grid = dispatch_grid(kernel, threads, local_size(kernel, glsl_dialect().group_size),
                                       c.props.limits.maxComputeWorkGroupCount[0],
                                       c.props.limits.maxComputeWorkGroupCount[1], "Vulkan", c.description);
    check_loop_limit(kernel, kb.loops, params, c.loop_limit, c.description);

    std::vector<Buffer*> bufs(memories.size());
    std::vector<VkBuffer> handles(memories.size());
    for (size_t i = 0; i < memories.size(); ++i) {
      bufs[i] = find_buffer(memories[i]->data);
      EMBER_INTERNAL_ASSERT(bufs[i], "kernel #" << kernel->index << ": memory " << i
                                                << " is not a Vulkan buffer (allocated outside the runner)");
      handles[i] = bufs[i]->buffer;
    }

    begin_batch();
    Batch& b = *cur_;
    // Barrier against earlier dispatches of this epoch.
    if (need_barrier_ || epoch_.conflicts(kb.access, handles, handles.size())) {
      memory_barrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
      epoch_.clear();
      need_barrier_ = false;
    }
    epoch_.add(kb.access, handles, handles.size());

    // Header and params.
    std::vector<uint32_t> words;
    words.reserve(params.size() + kGpuHeaderWords);
    words.push_back(static_cast<uint32_t>(threads));
    words.push_back(grid.row);
    words.insert(words.end(), params.begin(), params.end());
    std::shared_ptr<Buffer> param_buf;
    if (kb.params_in_buffer) {
      param_buf = buffer_acquire(words.size() * 4);
      std::memcpy(param_buf->mapped, words.data(), words.size() * 4);
      b.keep.push_back(param_buf);
    }

    // Descriptor set.
    const Pipeline& p = *kb.pipeline;
    VkDescriptorSet set = allocate_set(c, b, p.set_layout);
    std::vector<VkDescriptorBufferInfo> infos(static_cast<size_t>(p.bindings));
    std::vector<VkWriteDescriptorSet> writes(static_cast<size_t>(p.bindings));
    for (size_t i = 0; i < infos.size(); ++i) {
      if (i < bufs.size()) {
        infos[i] = {bufs[i]->buffer, 0, static_cast<VkDeviceSize>(std::max<int64_t>(memories[i]->size(), 1)) * 4};
      } else {
        infos[i] = {param_buf->buffer, 0, words.size() * 4};
      }
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    if (!writes.empty()) vkUpdateDescriptorSets(c.device, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);

    vkCmdBindPipeline(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (!kb.params_in_buffer)
      vkCmdPushConstants(b.cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(words.size() * 4),
                         words.data());
    vkCmdDispatch(b.cmd, grid.gx, grid.gy, 1);
    for (HostTensor* m : memories) b.keep.push_back(m->owner);
    b.keep.push_back(kb.pipeline);
    if (++b.dispatches >= kBatchDispatches) submit();
  }

 private:
  void destroy(Context& c, Batch& b) {
    for (VkDescriptorPool p : b.pools) vkDestroyDescriptorPool(c.device, p, nullptr);
    if (b.fence) vkDestroyFence(c.device, b.fence, nullptr);
    if (b.cmd) vkFreeCommandBuffers(c.device, cmd_pool_, 1, &b.cmd);
  }

  void begin_batch() {
    if (cur_ && cur_->recording) return;
    Context& c = context();
    if (!cur_) {
      if (!free_.empty()) {
        cur_ = std::move(free_.back());
        free_.pop_back();
      } else {
        cur_ = std::make_unique<Batch>();
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = cmd_pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        check(vkAllocateCommandBuffers(c.device, &ai, &cur_->cmd), "vkAllocateCommandBuffers");
        VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        check(vkCreateFence(c.device, &fi, nullptr, &cur_->fence), "vkCreateFence");
      }
    }
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cur_->cmd, &bi), "vkBeginCommandBuffer");
    cur_->recording = true;
    // Work submitted earlier may still write what this command buffer reads.
    epoch_.clear();
    need_barrier_ = !in_flight_.empty();
  }

  VkDescriptorSet allocate_set(Context& c, Batch& b, VkDescriptorSetLayout layout) {
    for (;;) {
      if (b.pool == b.pools.size()) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
        VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        pi.maxSets = kSetsPerPool;
        pi.poolSizeCount = 1;
        pi.pPoolSizes = &size;
        VkDescriptorPool pool;
        check(vkCreateDescriptorPool(c.device, &pi, nullptr, &pool), "vkCreateDescriptorPool");
        b.pools.push_back(pool);
      }
      VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      ai.descriptorPool = b.pools[b.pool];
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &layout;
      VkDescriptorSet set;
      VkResult r = vkAllocateDescriptorSets(c.device, &ai, &set);
      if (r == VK_SUCCESS) return set;
      if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
      ++b.pool;  // full: the next pool (created above when there is none)
    }
  }

  void submit() {
    Context& c = context();
    Batch& b = *cur_;
    // Device writes become visible to the host once the fence signals.
    memory_barrier(b.cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT);
    check(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
    b.recording = false;
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b.cmd;
    {
      std::lock_guard<std::mutex> lock(c.queue_mutex);
      check(vkQueueSubmit(c.queue, 1, &si, b.fence), "vkQueueSubmit");
    }
    in_flight_.push_back(std::move(cur_));
  }

  void wait_all() {
    if (in_flight_.empty()) return;
    Context& c = context();
    std::vector<VkFence> fences;
    for (auto& b : in_flight_) fences.push_back(b->fence);
    VkResult r = vkWaitForFences(c.device, static_cast<uint32_t>(fences.size()), fences.data(), VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) {
      in_flight_.clear();  // the device is lost; the batches' objects are leaked, not reused
      check(r, "vkWaitForFences");
    }
    check(vkResetFences(c.device, static_cast<uint32_t>(fences.size()), fences.data()), "vkResetFences");
    for (auto& b : in_flight_) {
      for (VkDescriptorPool p : b->pools) vkResetDescriptorPool(c.device, p, 0);
      b->pool = 0;
      b->keep.clear();
      b->dispatches = 0;
      vkResetCommandBuffer(b->cmd, 0);
      free_.push_back(std::move(b));
    }
    in_flight_.clear();
  }

  std::unordered_map<int, KernelBinary> kernels_;
  std::mutex run_mu_;                // one run at a time (begin_run .. end_run)
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> cur_;
  std::vector<std::unique_ptr<Batch>> in_flight_, free_;
  DispatchHazards<VkBuffer> epoch_;  // since the last barrier of the current command buffer
  bool need_barrier_ = false;
  WrittenInputs inputs_;
};

}  // namespace

std::unique_ptr<KernelRunner> make_runner(std::unordered_map<int, KernelBinary> kernels, std::vector<int> written_inputs) {
  return std::make_unique<Runner>(std::move(kernels), std::move(written_inputs));
}

}  // namespace ember::vk
