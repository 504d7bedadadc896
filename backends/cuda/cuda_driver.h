// The CUDA driver API as the cuda backend uses it (cuda.h only for types and enums; built with
// EMBER_WITH_CUDA): the functions loaded with dlopen("libcuda.so.1") into a table, so Ember builds,
// imports and runs its other backends where no driver is installed, and the process-wide context
// (the device's primary context, made current on each calling thread by Scope) with one stream.
#pragma once
#ifdef EMBER_WITH_CUDA
#include <cuda.h>

#include <string>

namespace ember::cuda {

// The driver entry points Ember calls, by their ABI names (cuda.h maps e.g. cuMemFree to
// cuMemFree_v2; these are the functions behind those names).
struct Driver {
  void* library = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem_v2) DeviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuModuleLoadDataEx) ModuleLoadDataEx = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuMemAllocManaged) MemAllocManaged = nullptr;
  decltype(&::cuMemFree_v2) MemFree = nullptr;
  decltype(&::cuMemsetD32Async) MemsetD32Async = nullptr;
  decltype(&::cuMemcpyAsync) MemcpyAsync = nullptr;
};

// The process-wide context. Created on first use and never destroyed (tensors held by Python
// may outlive every static).
struct Context {
  Driver d;
  CUdevice device = 0;
  int ordinal = 0;           // the device's number (DLPack device id)
  CUcontext ctx = nullptr;   // the primary context
  CUstream stream = nullptr; // every launch, memset and copy of Ember goes here, in order
  int cc = 0;                // compute capability, 90 for sm_90
  int driver_version = 0;    // 13000 for CUDA 13.0
  int sms = 0;
  int max_block_threads = 0, max_block_x = 0, max_grid_x = 0;
  int max_sm_threads = 0;    // resident threads per SM (2048 on sm_90)
  int warp = 0;              // threads per warp
  int max_shared_bytes = 0;  // static shared memory per block
  bool concurrent_managed = false;  // the host may touch managed memory while kernels run
  int64_t total_bytes = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string description;   // name, sm_XX, SMs, driver version
  std::string device_key;    // identifies device + driver in cache keys
};

// The context, created on first use; throws BackendError with the reason CUDA cannot run here
// (no libcuda.so.1, no device, a driver error) on every call when it could not be created.
Context& context();
// Throws BackendError naming `what` when `r` is not CUDA_SUCCESS.
void check(CUresult r, const char* what);

// Makes the context current on the calling thread (the driver's current context is per thread).
struct Scope {
  Scope();
};

}  // namespace ember::cuda
#endif  // EMBER_WITH_CUDA
