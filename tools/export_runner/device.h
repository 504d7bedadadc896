// What the plan executor needs from a GPU API: buffers of 32-bit words, kernels, dispatches,
// copies and fills, in order. Two implementations: Vulkan (vulkan_device.cpp, a `spirv`
// export) and OpenGL 4.3+ compute through EGL surfaceless (gl_device.cpp, a `glsl` export).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "manifest.h"

namespace runner {

class Device {
 public:
  virtual ~Device() = default;
  // The device's name and API, for the log.
  virtual std::string describe() const = 0;
  // Creates buffer `id` (a manifest buffer index) of `words` 32-bit words (at least 1).
  virtual void create_buffer(int id, size_t words) = 0;
  // Host <-> buffer transfers; read waits for all work recorded before it.
  virtual void write(int id, size_t offset, const uint32_t* data, size_t words) = 0;
  virtual void read(int id, size_t offset, uint32_t* data, size_t words) = 0;
  // Loads kernel `k` from the export folder; every buffer exists by then.
  virtual void load_kernel(int k, const KernelSpec& ks, const Manifest& m) = 0;
  // Records a dispatch of `groups` workgroups with the parameter block bytes `params`.
  virtual void dispatch(int k, const std::array<uint32_t, 3>& groups, const std::vector<uint8_t>& params) = 0;
  virtual void copy(int src, size_t src_offset, int dst, size_t dst_offset, size_t words) = 0;
  virtual void fill(int id, size_t offset, size_t words, uint32_t value) = 0;
  // Waits until all recorded work has finished.
  virtual void finish() = 0;
};

// Raw Vulkan through the loader: the first GPU, else the first device (lavapipe).
std::unique_ptr<Device> make_vulkan_device();
// OpenGL 4.3+ core through EGL on Mesa's surfaceless platform (no display needed).
std::unique_ptr<Device> make_gl_device();

}  // namespace runner
