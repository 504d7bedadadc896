// The cuda backend (cuda.h). compile: the distinct kernels of the lowered program printed in the
// cuda dialect as one translation unit, compiled by NVRTC once per program to CUBIN for the
// device's compute capability (PTX for the newest architecture NVRTC knows when the device is
// newer, which the driver then compiles), kept in the compile cache on disk under a key of the
// text, the NVRTC version and options and the architecture, and loaded as one module. The
// runner launches each kernel on the context's one stream without waiting: launches on a stream
// run in order, so no barriers are needed between dependent ones; the host waits only in
// synchronize (before the interpreter touches memory, and at the end of each run). Each launch's
// argument is the kernel's EmberArgs<memories, params> struct (codegen/dialect_cuda.cpp), built
// in the launch's parameter buffer: device pointers, the int64 thread count, the param words.
// EMBER_DEBUG=time prints NVRTC's time for the program's translation unit and its kernel count.
// First run on an H100 on 2026-11-27 (tools/gpu-check): every backend-parametrized test passes.
#include "backends/cuda/cuda.h"

#ifdef EMBER_WITH_CUDA
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backends/compile_cache.h"
#include "backends/compile_jobs.h"
#include "backends/cuda/cuda_memory.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "backends/gpu_kernel.h"
#include "backends/gpu_runtime.h"
#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"

namespace ember::cuda {

namespace {

// The math ops as CUDA's builtins: the program's option, or EMBER_CUDA_FAST_MATH=1 (NVRTC's
// --use_fast_math, which flushes subnormals and approximates division: Ember's functions would
// not keep their bounds under it).
bool fast_math(const CodegenOptions& o) {
  const char* e = std::getenv("EMBER_CUDA_FAST_MATH");
  return o.fast_math || (e && std::string(e) == "1");
}

// A loaded module: unloaded when the last runner using it goes.
struct Module {
  CUmodule module = nullptr;
  ~Module() {
    if (!module) return;
    Context& c = context();
    c.d.CtxSetCurrent(c.ctx);
    c.d.ModuleUnload(module);
  }
};

struct Kernel {
  CUfunction fn = nullptr;
  std::string symbol;
  uint32_t block = 0;   // threads per block
  int nmem = 0, nparams = 0;
  std::shared_ptr<Module> module;
};

// The EmberArgs<M, P> layout: M' = max(M, 1) pointers, int64 threads, P' = max(P, 1) words.
struct ArgsLayout {
  size_t threads_at = 0, params_at = 0, size = 0;
};
ArgsLayout args_layout(int nmem, int nparams) {
  ArgsLayout l;
  l.threads_at = 8 * static_cast<size_t>(std::max(nmem, 1));
  l.params_at = l.threads_at + 8;
  l.size = (l.params_at + 4 * static_cast<size_t>(std::max(nparams, 1)) + 7) / 8 * 8;
  return l;
}
constexpr size_t kMaxArgsBytes = 4096;  // the kernel parameter limit of every CUDA architecture

// The architecture a device runs: CUBIN for its own compute capability when NVRTC knows it, PTX
// for the newest one NVRTC knows when the device is newer.
struct Target {
  int arch = 0;
  bool cubin = true;
};
Target target_for(int cc) {
  const std::vector<int> archs = nvrtc_archs();
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) return {cc, true};
  if (!archs.empty() && cc > archs.back()) return {archs.back(), false};
  throw BackendError("ember: NVRTC " + nvrtc_version() + " cannot compile for sm_" + std::to_string(cc) +
                     " (the device " + context().name + " is older than every architecture it knows)");
}

class Runner : public KernelRunner {
 public:
  Runner(std::unordered_map<int, Kernel> kernels, std::vector<int> written_inputs)
      : kernels_(std::move(kernels)), inputs_(written_inputs) {}

  // One run at a time (begin_run .. end_run): threads calling one program share this runner's
  // written inputs and the memories its queued launches keep alive.
  void begin_run() override { run_mu_.lock(); }

  void end_run(bool ok) override {
    std::lock_guard<std::mutex> unlock_at_exit(run_mu_, std::adopt_lock);  // begin_run's lock
    try {
      synchronize();
      inputs_.finish(ok);
    } catch (...) {
      inputs_.finish(false);
      keep_.clear();
      throw;
    }
  }

  // Zero-filled on the stream: the host waits for the memset (synchronize) before touching it.
  HostTensor allocate(DType t, const std::vector<int64_t>& shape) override {
    HostTensor h = device_tensor(t, shape, true);
    keep_.push_back(h.owner);
    pending_ = true;
    return h;
  }

  HostTensor bind_input(const Node* arg, const HostTensor& t) override {
    if (find_buffer(t.data)) return t;  // already device memory (a result of an earlier call)
    // The caller's words are copied in on the host (WrittenInputs). Nothing queued uses the
    // fresh buffer; a device without concurrent managed access forbids any host access to
    // managed memory while kernels run, so the stream is drained first there.
    if (!context().concurrent_managed) synchronize();
    return inputs_.bind(arg, t, device_tensor(t.dtype, t.shape, false));
  }

  void synchronize() override {
    if (!pending_) return;
    Scope scope;
    Context& c = context();
    pending_ = false;
    const CUresult r = c.d.StreamSynchronize(c.stream);
    keep_.clear();
    check(r, "cuStreamSynchronize (a kernel failed)");
  }

  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& params,
                  const std::vector<int64_t>& dims) override {
    const Kernel& k = compiled_kernel(kernels_, kernel, memories.size(), params.size());
    const int64_t threads = grouped_threads(kernel, dims);  // whole groups for a kernel with a group
    if (threads == 0) return;
    Scope scope;
    Context& c = context();
    const int64_t blocks = (threads + k.block - 1) / k.block;
    if (blocks > c.max_grid_x)
      throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " needs " + std::to_string(blocks) +
                         " blocks of " + std::to_string(k.block) + " threads; " + c.description + " runs at most " +
                         std::to_string(c.max_grid_x));
    const ArgsLayout l = args_layout(k.nmem, k.nparams);
    std::vector<unsigned char> args(l.size, 0);
    for (size_t i = 0; i < memories.size(); ++i) {
      Buffer* b = find_buffer(memories[i]->data);
      EMBER_INTERNAL_ASSERT(b, "kernel #" << kernel->index << " memory " << i << " is not CUDA memory");
      const CUdeviceptr p = b->ptr;
      std::memcpy(&args[8 * i], &p, sizeof p);
      keep_.push_back(memories[i]->owner);
    }
    const long long n = threads;
    std::memcpy(&args[l.threads_at], &n, sizeof n);
    if (!params.empty()) std::memcpy(&args[l.params_at], params.data(), 4 * params.size());
    size_t size = args.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    check(c.d.LaunchKernel(k.fn, static_cast<unsigned>(blocks), 1, 1, k.block, 1, 1, 0, c.stream, nullptr, extra),
          ("cuLaunchKernel of " + k.symbol).c_str());
    pending_ = true;
  }

 private:
  std::unordered_map<int, Kernel> kernels_;
  WrittenInputs inputs_;
  std::vector<std::shared_ptr<void>> keep_;  // memories of queued launches (not reused until done)
  bool pending_ = false;
  std::mutex run_mu_;
};

// The device as the pipeline sees it: cuda_target() with the context's parallelism.
TargetInfo describe_device() {
  const Context& c = context();
  TargetInfo t = cuda_target();
  t.max_workgroup_threads = c.max_block_threads;
  t.shared_memory_bytes = c.max_shared_bytes;
  t.resident_threads = static_cast<int64_t>(c.sms) * c.max_sm_threads;
  t.subgroup_size = c.warp;
  return t;
}

class CudaBackend : public Backend {
 public:
  CudaBackend() : target_(describe_device()) {}  // throws BackendError when CUDA cannot run here

  const char* name() const override { return "cuda"; }
  const TargetInfo& target() const override { return target_; }  // one block per group

  std::string source(const Program& p, const CodegenOptions& o) override {
    return generate_kernels(p, cuda_dialect(fast_math(o)));
  }

  std::unique_ptr<KernelRunner> compile(const Program& p, CompileInfo& info) override {
    info.link.clear();
    CompileTimeline timeline;
    Context& c = context();
    const KernelClasses classes = group_kernels(p);
    const Dialect& dialect = cuda_dialect(fast_math(info.codegen));
    const std::vector<DistinctKernel> distinct = generate_distinct_kernels(classes, dialect);
    // Equal texts are one function (distinct classes may print alike).
    std::vector<std::string> texts;
    std::unordered_map<std::string, size_t> by_symbol;
    for (const DistinctKernel& k : distinct)
      if (by_symbol.emplace(k.code.symbol, texts.size()).second) texts.push_back(k.code.source);
    info.codegen_ms = timeline.now_ms();
    info.distinct_kernels = static_cast<int>(texts.size());
    for (const DistinctKernel& k : distinct)
      check_workgroup_limits(k.kernels[0], c.max_block_threads, c.max_block_x, c.max_shared_bytes, c.description);

    std::unordered_map<int, Kernel> kernels;
    if (!texts.empty()) {
      const std::string unit = translation_unit(texts, dialect);
      const Target t = target_for(c.cc);
      std::string keyed = unit + '\0' + nvrtc_version() + '\0' + std::to_string(t.arch) + (t.cubin ? " cubin" : " ptx");
      for (const std::string& o : nvrtc_options(t.arch, t.cubin)) keyed += '\0' + o;
      const std::string key = "cuda-" + content_hash(keyed);
      const char* ext = t.cubin ? "cubin" : "ptx";
      std::string image;
      const double start = timeline.now_ms();
      bool hit = false;
      {
        std::lock_guard<std::mutex> lock(cache_key_mutex(key));
        hit = disk_entry_read(key, ext, image);
        if (!hit) {
          image = nvrtc_compile(unit, "ember_" + p.name + ".cu", t.arch, t.cubin).image;
          try {
            const std::string tmp = cache_temp_path(key, std::string(".") + ext);
            write_file_atomic(tmp, image);
            disk_entry_commit(key, ext, tmp);
          } catch (const BackendError& e) {
            cache_unwritable(e.what());
          }
        }
      }
      auto module = std::make_shared<Module>();
      {
        Scope scope;
        check(c.d.ModuleLoadDataEx(&module->module, image.data(), 0, nullptr, nullptr),
              t.cubin ? "cuModuleLoadDataEx (CUBIN)" : "cuModuleLoadDataEx (PTX, compiled by the driver)");
      }
      const double end = timeline.now_ms();
      if (timeline.enabled()) {
        char text[256];
        std::snprintf(text, sizeof text, "cuda module %-16s nvrtc->%s sm_%d %8.3f ms (%s)", key.substr(5, 16).c_str(),
                      ext, t.arch, end - start, hit ? "cached" : "compiled");
        timeline.unit(text, start, end, classes.kernels.size());
      }
      info.compiled_kernels = hit ? 0 : info.distinct_kernels;
      info.translation_units = hit ? 0 : 1;
      info.cache_key = key;
      std::vector<Kernel> fns(texts.size());
      for (const DistinctKernel& k : distinct) {
        Kernel& f = fns[by_symbol.at(k.code.symbol)];
        if (f.fn) continue;
        f.symbol = k.code.symbol;
        f.block = local_size(k.kernels[0], dialect.group_size);
        f.nmem = static_cast<int>(k.kernels[0]->memories().size());
        f.nparams = static_cast<int>(k.kernels[0]->params().size());
        if (args_layout(f.nmem, f.nparams).size > kMaxArgsBytes)
          throw BackendError("ember: kernel " + f.symbol + " has " + std::to_string(f.nmem) + " memories and " +
                             std::to_string(f.nparams) + " params: more than CUDA's " + std::to_string(kMaxArgsBytes) +
                             " bytes of kernel arguments");
        f.module = module;
        Scope scope;
        check(c.d.ModuleGetFunction(&f.fn, module->module, f.symbol.c_str()), "cuModuleGetFunction");
      }
      for (const DistinctKernel& k : distinct)
        for (const Node* n : k.kernels) kernels.emplace(n->index, fns[by_symbol.at(k.code.symbol)]);
    }
    info.cache_hit = info.compiled_kernels == 0;
    info.compile_ms = timeline.now_ms() - info.codegen_ms;
    log_compile(p, classes.kernels.size(), info, c.description);
    return std::make_unique<Runner>(std::move(kernels), written_inputs(p));
  }

 private:
  TargetInfo target_;
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDA
