// The cuda backend's buffers (cuda_memory.cpp): managed memory, pooled; tensors over them.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_driver.h"
#include "core/interp/interp.h"

namespace ember::cuda {

#ifdef EMBER_WITH_CUDA
// One managed allocation: `mapped` is its address on both sides (the device pointer).
struct Buffer {
  void* mapped = nullptr;
  int64_t bytes = 0;
  CUdeviceptr ptr = 0;
};
// A tensor over a pooled buffer (zero-filled on the stream when `zero`) that owns it.
HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero);
// The live buffer whose memory starts at `data`, or null (host memory).
Buffer* find_buffer(const void* data);
// Frees the pooled free buffers.
void buffer_pool_trim();
#endif

// The CUDA device number of a tensor's memory when it is one of the cuda backend's buffers, else
// -1 (DLPack: kDLCUDA vs kDLCPU). Never creates the context.
int buffer_device(const void* data);
// Waits for every launch queued on the backend's stream (DLPack export of a cuda tensor); nothing
// when CUDA is unavailable.
void synchronize_stream();

}  // namespace ember::cuda
