// The OpenGL KernelRunner. The interpreter runs the host plan and hands each kernel here; the
// runner issues it into the context's command stream and returns, so a host plan's dispatches (a
// host loop of kernels included) queue up in the driver until the host needs memory:
//   - a run holds the context (a Scope from begin_run to end_run): one thread issues GL
//     commands at a time, and the context is current on it;
//   - memories are persistently mapped buffers (allocate / bind_input, opengl_memory.cpp); their
//     tensors' owners are kept until the next synchronize, so no buffer is reused while a queued
//     dispatch still uses it;
//   - shader storage writes are incoherent in GL: glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT)
//     goes before a dispatch that reads or writes a buffer an earlier dispatch wrote, or writes a
//     buffer one read (RAW, WAW, WAR), since the last barrier;
//   - before the host touches memory (synchronize: the interpreter calls it before host work on
//     tensors, and end_run at the end of every call) the runner issues
//     glMemoryBarrier(GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT), a fence, and waits for it; host writes
//     through the coherent mappings are seen by every command issued after them;
//   - scalars go in a std140 uniform block (header words `threads` and `row`, then the params),
//     each dispatch's words in a fresh slot of a persistently mapped uniform-buffer ring that is
//     recycled after the fence;
//   - dispatches above the device's group-count limit in x become 2-D grids (`row` threads per
//     grid row; the shader guards the flat id against `threads`).
// EMBER_DEBUG=time also times each kernel's first dispatch in a runner (llvmpipe builds its
// machine code there).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <unordered_set>

#include "backends/gpu_runtime.h"
#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

constexpr int64_t kRingBytes = 64 * 1024;  // one uniform-buffer chunk of the params ring
constexpr int kFlushDispatches = 256;      // glFlush this often so a GPU starts early

class Runner : public KernelRunner {
 public:
  Runner(std::unordered_map<int, KernelProgram> kernels, std::vector<int> written_inputs)
      : kernels_(std::move(kernels)), time_(debug_time()), inputs_(written_inputs) {}

  ~Runner() override {
    // Nothing is queued once a run has ended; the ring's buffers go back to the pool.
    ring_.clear();
  }

  void begin_run() override {
    scope_ = std::make_unique<Scope>();
    last_program_ = 0;
  }

  void end_run(bool ok) override {
    try {
      synchronize();
      inputs_.finish(ok);
    } catch (...) {
      glFinish();  // nothing may still use the buffers released here
      inputs_.finish(false);
      keep_.clear();
      scope_.reset();
      throw;
    }
    scope_.reset();
  }

  HostTensor allocate(DType t, const std::vector<int64_t>& shape) override {
    Scope s;
    return device_tensor(t, shape, true);
  }

  HostTensor bind_input(const Node* arg, const HostTensor& t) override {
    if (find_buffer(t.data)) return t;  // already device memory (a result of an earlier call)
    Scope s;
    return inputs_.bind(arg, t, device_tensor(t.dtype, t.shape, false));
  }

  void synchronize() override {
    if (!pending_) return;
    Scope s;
    glMemoryBarrier(GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT);
    GLsync fence = glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0);
    GLenum r = GL_TIMEOUT_EXPIRED;
    GLbitfield flags = GL_SYNC_FLUSH_COMMANDS_BIT;
    while (fence && r == GL_TIMEOUT_EXPIRED) {
      r = glClientWaitSync(fence, flags, 1000000000ull);  // 1 s at a time
      flags = 0;
    }
    if (fence) glDeleteSync(fence);
    pending_ = false;
    keep_.clear();
    hazards_.clear();
    ring_used_ = 0;
    ring_offset_ = 0;
    dispatches_ = 0;
    if (!fence || r == GL_WAIT_FAILED) {
      check_error("glClientWaitSync");
      throw BackendError("ember: waiting for OpenGL dispatches failed on " + context().description);
    }
    check_error("the dispatches of a run");
  }

  void run_kernel(const Node* kernel, const std::vector<HostTensor*>& memories, const std::vector<uint32_t>& params,
                  const std::vector<int64_t>& dims) override {
    const KernelProgram& kp = compiled_kernel(kernels_, kernel, memories.size(), params.size());
    const int64_t threads = grouped_threads(kernel, dims);  // whole workgroups for a kernel with a group
    if (threads == 0) return;
    Scope scope;
    Context& c = context();
    const GpuGrid grid = dispatch_grid(kernel, threads, local_size(kernel, glsl_dialect().group_size),
                                       static_cast<uint64_t>(c.max_groups[0]), static_cast<uint64_t>(c.max_groups[1]),
                                       "OpenGL", c.description);
    check_loop_limit(kernel, kp.loops, params, c.loop_limit, c.description);

    std::vector<GLuint> names(memories.size());
    std::vector<GLsizeiptr> sizes(memories.size());
    for (size_t i = 0; i < memories.size(); ++i) {
      Buffer* b = find_buffer(memories[i]->data);
      EMBER_INTERNAL_ASSERT(b, "kernel #" << kernel->index << ": memory " << i
                                          << " is not an OpenGL buffer (allocated outside the runner)");
      names[i] = b->name;
      sizes[i] = static_cast<GLsizeiptr>(std::max<int64_t>(memories[i]->size(), 1) * 4);
    }

    // Memories past the driver's binding limit: copied into an arena (KernelLayout), fenced by
    // barriers on both sides (earlier shader writes -> copies in; this dispatch -> copies out).
    const size_t spill = kp.spill_from;
    std::vector<uint32_t> arena_words;  // word offset of each arena memory
    std::shared_ptr<Buffer> arena;
    if (spill < memories.size()) {
      int64_t total = 0;
      for (size_t i = spill; i < memories.size(); ++i) {
        arena_words.push_back(static_cast<uint32_t>(total / 4));
        total += (sizes[i] + 15) / 16 * 16;
      }
      arena = buffer_acquire(total);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
      for (size_t i = spill; i < memories.size(); ++i)
        glCopyNamedBufferSubData(names[i], arena->name, 0, static_cast<GLintptr>(arena_words[i - spill]) * 4, sizes[i]);
      names.resize(spill + 2, arena->name);
      names[spill] = names[spill + 1] = arena->name;
      sizes.resize(spill + 2);
      sizes[spill] = sizes[spill + 1] = static_cast<GLsizeiptr>(total);
      hazards_.clear();
    }
    const std::vector<GLintptr> offsets(names.size(), 0);

    // A barrier against earlier dispatches whose writes this one depends on (or overwrites).
    const size_t bound = std::min(spill, names.size());  // slots with their own binding
    if (hazards_.conflicts(kp.access, names, bound)) {
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
      hazards_.clear();
    }
    hazards_.add(kp.access, names, bound);

    // Header and params into the next ring slot.
    const int64_t words = static_cast<int64_t>(params.size() + arena_words.size()) + kGpuHeaderWords;
    const int64_t bytes = (words * 4 + 15) / 16 * 16;  // a std140 block's size is a multiple of 16
    auto [ubo, offset, mapped] = ring_slot(c, bytes);
    uint32_t* w = static_cast<uint32_t*>(mapped);
    w[0] = static_cast<uint32_t>(threads);
    w[1] = grid.row;
    if (!params.empty()) std::memcpy(w + kGpuHeaderWords, params.data(), params.size() * 4);
    if (!arena_words.empty())
      std::memcpy(w + kGpuHeaderWords + params.size(), arena_words.data(), arena_words.size() * 4);

    const GLuint program = kp.program->program;
    if (program != last_program_) {
      glUseProgram(program);
      last_program_ = program;
    }
    glBindBufferRange(GL_UNIFORM_BUFFER, 0, ubo, static_cast<GLintptr>(offset), static_cast<GLsizeiptr>(bytes));
    if (!names.empty())
      glBindBuffersRange(GL_SHADER_STORAGE_BUFFER, 0, static_cast<GLsizei>(names.size()), names.data(), offsets.data(),
                         sizes.data());
    const bool time_it = time_ && !timed_.count(kernel->index);
    std::chrono::steady_clock::time_point t0;
    if (time_it) {
      glFinish();
      t0 = std::chrono::steady_clock::now();
    }
    glDispatchCompute(grid.gx, grid.gy, 1);
    pending_ = true;
    for (HostTensor* m : memories) keep_.push_back(m->owner);
    if (arena) {
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
      for (size_t i = spill; i < memories.size(); ++i)
        if (kp.access.writes_slot(i))
          glCopyNamedBufferSubData(arena->name, find_buffer(memories[i]->data)->name,
                                   static_cast<GLintptr>(arena_words[i - spill]) * 4, 0,
                                   static_cast<GLsizeiptr>(std::max<int64_t>(memories[i]->size(), 1) * 4));
      keep_.push_back(arena);
      hazards_.clear();  // the barrier above ordered this dispatch against everything after it
    }
    if (time_it) {
      glFinish();
      timed_.insert(kernel->index);
      std::fprintf(stderr, "ember: shader %-22s first dispatch %8.3f ms (%lld threads)\n", kp.symbol.c_str(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                   static_cast<long long>(threads));
    }
    if (++dispatches_ % kFlushDispatches == 0) glFlush();
  }

 private:
  // A uniform-buffer slot of `bytes` at the context's offset alignment: (buffer, offset, mapping).
  // Chunks fill in order and are recycled at synchronize, so a chunk still at offset 0 is used
  // by no queued dispatch.
  std::tuple<GLuint, int64_t, void*> ring_slot(const Context& c, int64_t bytes) {
    const int64_t align = c.uniform_alignment;
    int64_t off = (ring_offset_ + align - 1) / align * align;
    for (;;) {
      if (ring_used_ == ring_.size()) ring_.push_back(buffer_acquire(std::max(kRingBytes, bytes)));
      if (off + bytes <= ring_[ring_used_]->bytes) break;
      if (off == 0) {  // a block larger than the chunk
        ring_[ring_used_] = buffer_acquire(bytes);
        break;
      }
      ++ring_used_;
      off = 0;
    }
    Buffer& b = *ring_[ring_used_];
    ring_offset_ = off + bytes;
    return {b.name, off, static_cast<char*>(b.mapped) + off};
  }

  std::unordered_map<int, KernelProgram> kernels_;
  const bool time_;
  std::unordered_set<int> timed_;    // kernels whose first dispatch was timed
  std::unique_ptr<Scope> scope_;     // held from begin_run to end_run
  bool pending_ = false;             // dispatches issued since the last synchronize
  int dispatches_ = 0;
  GLuint last_program_ = 0;
  std::vector<std::shared_ptr<void>> keep_;      // buffers queued dispatches use
  DispatchHazards<GLuint> hazards_;              // since the last barrier
  std::vector<std::shared_ptr<Buffer>> ring_;  // the params ring's chunks
  size_t ring_used_ = 0;
  int64_t ring_offset_ = 0;
  WrittenInputs inputs_;
};

}  // namespace

std::unique_ptr<KernelRunner> make_runner(std::unordered_map<int, KernelProgram> kernels, std::vector<int> written_inputs) {
  return std::make_unique<Runner>(std::move(kernels), std::move(written_inputs));
}

}  // namespace ember::gl
