// The OpenGL backend's internals (DESIGN §4), one concern per file:
//   opengl_context.cpp   the process-wide GL 4.5 core context (hidden GLFW window when a
//                        display exists, else EGL surfaceless), its limits, and Scope
//   opengl_memory.cpp    buffers: immutable storage, persistently mapped and coherent, pooled;
//                        tensors over them
//   opengl_compile.cpp   GLSL -> program objects through the driver, program binaries in the
//                        compile cache when the driver has a binary format
//   opengl_dispatch.cpp  the KernelRunner: dispatches with glMemoryBarrier between dependent
//                        ones, params in a uniform-buffer ring, a fence before host reads
//   opengl_backend.cpp   the Backend: kernels printed in the glsl dialect's OpenGL variant
// The host plan runs in the interpreter (no C++ compiler is involved); kernels go through the
// driver's GLSL compiler only.
//
// Sharing with a window (the window runtime displays from these buffers without copies). The
// context and every buffer are owned here, in one place: gl::context() and the buffer pool.
//   - With a display, the context belongs to a hidden GLFW window (Context::glfw_window). A
//     visible window is created with that window as its share argument,
//     glfwCreateWindow(w, h, title, nullptr, context().glfw_window), so the two contexts form a
//     share group: buffer and program names are valid in both.
//   - Without a display (EGL surfaceless) there is nothing to show; headless rendering happens
//     in this context itself (framebuffer objects), inside a gl::Scope.
//   - gl::find_buffer(tensor.data)->name is the GL buffer holding a device tensor's words; bind
//     it (SSBO, texture buffer, pixel-unpack buffer) in the window's context after the runner
//     has returned (every run ends with its dispatches complete).
//   - GL calls on Ember's context happen inside a gl::Scope (the context lock, made current on
//     the calling thread and the thread's previous context restored after). A window that
//     renders in its own context on the main thread needs no lock; one that uses Ember's
//     context takes a Scope. The window runtime must never call glfwTerminate while Ember runs.
#pragma once
#include <glad/gl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/compile_jobs.h"
#include "backends/gpu_kernel.h"
#include "backends/kernel_abi.h"
#include "codegen/c_printer.h"
#include "codegen/dialect.h"

namespace ember::gl {

// The process-wide GL context. Created on first use and never destroyed (tensors held by
// Python may outlive every static).
struct Context {
  enum class Kind { glfw, egl };
  Kind kind = Kind::egl;
  void* glfw_window = nullptr;  // GLFWwindow* (Kind::glfw)
  void* egl_display = nullptr;  // EGLDisplay (Kind::egl)
  void* egl_context = nullptr;  // EGLContext (Kind::egl)

  std::string renderer, version, vendor, glsl_version;
  std::string description;      // "llvmpipe (LLVM 15.0.6, 256 bits) via OpenGL 4.5 (Core Profile) Mesa 22.3.6, EGL surfaceless"
  std::string device_key;       // identifies renderer + driver in cache keys
  int binary_formats = 0;       // GL_NUM_PROGRAM_BINARY_FORMATS
  bool float_atomic_add = false;  // GL_NV_shader_atomic_float
  // GL_KHR_parallel_shader_compile or GL_ARB_parallel_shader_compile: the driver compiles on its
  // own threads (as many as compile_jobs()) and reports completion (opengl_compile.cpp).
  enum class ParallelCompile { none, khr, arb };
  ParallelCompile parallel_compile = ParallelCompile::none;
  int max_storage_blocks = 0;   // GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS
  int64_t max_storage_bytes = 0;  // GL_MAX_SHADER_STORAGE_BLOCK_SIZE
  int max_uniform_block_bytes = 0;
  int uniform_alignment = 256;  // GL_UNIFORM_BUFFER_OFFSET_ALIGNMENT
  int max_groups[3] = {65535, 65535, 65535};
  int max_group_invocations = 1024;   // GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS
  int max_group_size_x = 1024;        // GL_MAX_COMPUTE_WORK_GROUP_SIZE[0]
  int max_shared_bytes = 32768;       // GL_MAX_COMPUTE_SHARED_MEMORY_SIZE
  // Most loop iterations (summed over all loops) one invocation may run; 0: no limit. Mesa's
  // llvmpipe silently ends every loop of a shader after 65535 back-edges in total.
  int64_t loop_limit = 0;

  std::recursive_mutex mu;  // one thread issues GL commands at a time (Scope)
};

// The context; throws ember::BackendError with the reason when none can be created. Creating it
// takes a Scope internally; callers issuing GL commands take their own.
Context& context();
// "" when a GL 4.5 context can be created, else why not (never throws).
std::string unavailable_reason();
// Whether linked programs go to the disk cache as program binaries: the driver has a binary
// format and $EMBER_OPENGL_PROGRAM_BINARY is not 0.
bool program_binaries();

// Locks the context and makes it current on this thread for the Scope's life; the outermost
// Scope of a thread restores whatever context was current before (usually none), so any thread
// may use Ember and a window may keep its own context current between Ember's calls. Objects
// whose deletion was deferred (defer_delete) are deleted on entry.
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool outer_ = false;
  void* prev_[4] = {nullptr, nullptr, nullptr, nullptr};  // the thread's previous context
};

// Buffer or program names to delete at the next Scope: destructors run on any thread, maybe
// holding Python's lock, and never wait for the context.
void defer_delete_buffer(GLuint name);
void defer_delete_program(GLuint name);
void delete_deferred();  // inside a Scope

// Throws BackendError naming `what` if the GL error flag is set.
void check_error(const char* what);

// A storage buffer with immutable storage, mapped persistently and coherently for its whole
// life (see opengl_memory.cpp). Freed buffers go back to a pool by size class; a buffer is only
// pooled once no queued dispatch uses it (runners hold tensors' owners until they synchronize).
struct Buffer {
  GLuint name = 0;
  void* mapped = nullptr;
  int64_t bytes = 0;
};
std::shared_ptr<Buffer> buffer_acquire(int64_t bytes);  // inside a Scope
// A tensor whose words live in a fresh buffer (zero-filled when `zero`). Inside a Scope.
HostTensor device_tensor(DType t, const std::vector<int64_t>& shape, bool zero);
// The live buffer whose mapping starts at `data`, or null (host memory).
Buffer* find_buffer(const void* data);
// Drops the pooled free buffers.
void buffer_pool_trim();

// A linked compute program (memory-cached per source; deleted through defer_delete_program).
struct GlProgram {
  GLuint program = 0;
  ~GlProgram();
};
// How a program was obtained.
enum class ProgramSource { memory, disk, compiled };
const char* program_source_name(ProgramSource s);

// How a kernel's memories are bound on this context. Slots below `spill_from` have their own
// storage-buffer binding. A kernel with more memories than the driver binds per shader (16 on
// llvmpipe and many GPUs) keeps the last ones in a scratch "arena" buffer per dispatch instead:
// the runner copies them in (glCopyNamedBufferSubData), binds the arena at `spill_from` (a uint
// view) and `spill_from + 1` (an int view), passes each one's word offset after the params, and
// copies back the ones the kernel writes. $EMBER_OPENGL_MAX_STORAGE_BUFFERS lowers the limit
// (tests use it to run every program through the arena).
struct KernelLayout {
  KernelAbi abi;                  // bindings and the uniform block (backends/kernel_abi.h, shared with em.export)
  size_t spill_from = 0;          // == kernel->memories.size() when nothing spills
};
// Throws BackendError when the kernel takes more params than a uniform block holds.
KernelLayout kernel_layout(const Node* kernel, const CodegenOptions& o);
const Dialect& kernel_dialect(const KernelLayout& layout);
// The whole shader of one printed kernel (a comment, the prelude, the kernel), with arena
// memories' declarations and accesses rewritten (m<i>[x] -> ember_arena_u[int(ember_pc.ember_o<i>) + (x)]).
std::string shader_source(const GeneratedKernel& k, const Dialect& d, const KernelLayout& layout);
// The program for a shader: from the memory cache, a program binary in the disk cache (when
// Context::program_binaries) or the driver's compiler. Inside a Scope. Throws CompileError.
std::shared_ptr<GlProgram> compile_program(const std::string& source, ProgramSource* from);
// The same for distinct shaders at once: the ones to compile are compiled and linked as one batch
// (in parallel where the driver can, see opengl_compile.cpp); start and end on `timeline`.
struct ProgramBuild {
  std::shared_ptr<GlProgram> program;
  ProgramSource from = ProgramSource::compiled;
  double start_ms = 0, end_ms = 0;
};
std::vector<ProgramBuild> compile_programs(const std::vector<std::string>& sources, const CompileTimeline& timeline);

// One compiled kernel as the runner dispatches it.
struct KernelProgram {
  std::shared_ptr<GlProgram> program;
  std::string symbol;
  size_t spill_from = 0;  // KernelLayout::spill_from
  MemoryAccess access;
  std::vector<LoopBound> loops;
};
// The KernelRunner of a compiled program (opengl_dispatch.cpp). `written_inputs`: argument
// positions the program stores into, copied back to the caller's memory after each run.
std::unique_ptr<KernelRunner> make_runner(std::unordered_map<int, KernelProgram> kernels, std::vector<int> written_inputs);

// make_backend("opengl").
std::unique_ptr<Backend> make_backend();

}  // namespace ember::gl
