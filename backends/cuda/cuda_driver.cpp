// The driver API loaded at run time (cuda_driver.h) and the process-wide context; why CUDA is
// unavailable when it is (cuda.h: unavailable_reason, device_description).
#include "backends/cuda/cuda.h"

#ifdef EMBER_WITH_CUDA
#include <dlfcn.h>

#include <cstdlib>

#include "backends/cuda/cuda_driver.h"
#include "backends/gpu_runtime.h"
#endif

namespace ember::cuda {

#ifdef EMBER_WITH_CUDA

namespace {

template <class F>
void load(void* lib, F& f, const char* symbol) {
  f = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!f)
    throw BackendError(std::string("ember: the CUDA driver (libcuda.so.1) has no ") + symbol +
                       " (a driver older than the CUDA 12 API Ember uses)");
}

void load_driver(Driver& d) {
  // EMBER_CUDA_DRIVER names another library (tests point it at a missing file to check the
  // message without a driver).
  const char* path = std::getenv("EMBER_CUDA_DRIVER");
  if (!path || !*path) path = "libcuda.so.1";
  d.library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!d.library) {
    const char* why = dlerror();
    throw BackendError(std::string("ember: CUDA is not available: the NVIDIA driver library ") + path +
                       " could not be loaded (" + (why ? why : "not found") +
                       "); install the NVIDIA driver to use the cuda backend");
  }
  void* l = d.library;
  load(l, d.GetErrorName, "cuGetErrorName");
  load(l, d.GetErrorString, "cuGetErrorString");
  load(l, d.Init, "cuInit");
  load(l, d.DriverGetVersion, "cuDriverGetVersion");
  load(l, d.DeviceGetCount, "cuDeviceGetCount");
  load(l, d.DeviceGet, "cuDeviceGet");
  load(l, d.DeviceGetName, "cuDeviceGetName");
  load(l, d.DeviceGetAttribute, "cuDeviceGetAttribute");
  load(l, d.DeviceTotalMem, "cuDeviceTotalMem_v2");
  load(l, d.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(l, d.CtxSetCurrent, "cuCtxSetCurrent");
  load(l, d.StreamCreate, "cuStreamCreate");
  load(l, d.StreamSynchronize, "cuStreamSynchronize");
  load(l, d.ModuleLoadDataEx, "cuModuleLoadDataEx");
  load(l, d.ModuleGetFunction, "cuModuleGetFunction");
  load(l, d.ModuleUnload, "cuModuleUnload");
  load(l, d.LaunchKernel, "cuLaunchKernel");
  load(l, d.MemAllocManaged, "cuMemAllocManaged");
  load(l, d.MemFree, "cuMemFree_v2");
  load(l, d.MemsetD32Async, "cuMemsetD32Async");
  load(l, d.MemcpyAsync, "cuMemcpyAsync");
}

Driver* g_driver = nullptr;  // set once the context exists (check() names errors through it)

int attribute(Context& c, CUdevice_attribute a, const char* what) {
  int v = 0;
  check(c.d.DeviceGetAttribute(&v, a, c.device), what);
  return v;
}

void create(Context& c) {
  load_driver(c.d);
  g_driver = &c.d;
  const CUresult init = c.d.Init(0);
  if (init == CUDA_ERROR_NO_DEVICE)
    throw BackendError("ember: CUDA is not available: the NVIDIA driver found no CUDA device");
  check(init, "cuInit");
  int count = 0;
  check(c.d.DeviceGetCount(&count), "cuDeviceGetCount");
  if (count == 0) throw BackendError("ember: CUDA is not available: the NVIDIA driver found no CUDA device");
  // EMBER_CUDA_DEVICE picks the device (default 0).
  const char* pick = std::getenv("EMBER_CUDA_DEVICE");
  c.ordinal = pick && *pick ? std::atoi(pick) : 0;
  if (c.ordinal < 0 || c.ordinal >= count)
    throw BackendError("ember: EMBER_CUDA_DEVICE=" + std::string(pick) + " but there are " + std::to_string(count) +
                       " CUDA devices");
  check(c.d.DeviceGet(&c.device, c.ordinal), "cuDeviceGet");
  char name[256] = {};
  check(c.d.DeviceGetName(name, sizeof name - 1, c.device), "cuDeviceGetName");
  c.name = name;
  check(c.d.DriverGetVersion(&c.driver_version), "cuDriverGetVersion");
  c.cc = 10 * attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability") +
         attribute(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  c.sms = attribute(c, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  c.max_block_threads = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "threads per block");
  c.max_sm_threads = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per multiprocessor");
  c.warp = attribute(c, CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size");
  c.max_block_x = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "block size");
  c.max_grid_x = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "grid size");
  c.max_shared_bytes = attribute(c, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block");
  c.concurrent_managed = attribute(c, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "managed access") != 0;
  if (!attribute(c, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "managed memory"))
    throw BackendError("ember: CUDA device " + c.name + " has no managed memory, which Ember's tensors live in");
  size_t total = 0;
  check(c.d.DeviceTotalMem(&total, c.device), "cuDeviceTotalMem");
  c.total_bytes = static_cast<int64_t>(total);
  check(c.d.DevicePrimaryCtxRetain(&c.ctx, c.device), "cuDevicePrimaryCtxRetain");
  check(c.d.CtxSetCurrent(c.ctx), "cuCtxSetCurrent");
  check(c.d.StreamCreate(&c.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const std::string driver = std::to_string(c.driver_version / 1000) + "." + std::to_string(c.driver_version % 1000 / 10);
  c.description = c.name + ", sm_" + std::to_string(c.cc) + ", " + std::to_string(c.sms) + " SMs, CUDA driver " + driver;
  c.device_key = c.name + "|sm_" + std::to_string(c.cc) + "|" + std::to_string(c.driver_version);
}

}  // namespace

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_driver) {
    g_driver->GetErrorName(r, &name);
    g_driver->GetErrorString(r, &text);
  }
  throw BackendError(std::string("ember: CUDA ") + what + " failed: " + (name ? name : "error " + std::to_string(r)) +
                     (text ? std::string(" (") + text + ")" : std::string()));
}

Context& context() { return process_context<Context>(create); }

Scope::Scope() {
  Context& c = context();
  check(c.d.CtxSetCurrent(c.ctx), "cuCtxSetCurrent");
}

std::string unavailable_reason() {
  return unavailable_reason_of([] { context(); });
}

std::string device_description() { return context().description; }

#else  // !EMBER_WITH_CUDA

std::string unavailable_reason() {
  return "ember: backend 'cuda' is not built into this Ember (configure with -DEMBER_WITH_CUDA=ON with the CUDA "
         "Toolkit installed; CMake looks in /usr/local/cuda)";
}

std::string device_description() { throw BackendError(unavailable_reason()); }

std::unique_ptr<Backend> make_backend() { throw BackendError(unavailable_reason()); }

#endif

}  // namespace ember::cuda
