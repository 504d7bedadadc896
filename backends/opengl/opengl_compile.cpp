// Kernels to GL programs: the glsl dialect's OpenGL variant for a kernel on this context, the
// driver's GLSL compiler and linker, and program binaries (GL_ARB_get_program_binary, core in
// 4.1) in the compile cache: memory cache, then `<key>.glbin` on disk (a format word and the
// driver's bytes), keyed by the source, the renderer, vendor and GL/GLSL versions, and Ember's
// version, with the shader source kept next to it as `<key>.glsl`. A binary the driver rejects
// (a driver update) is rebuilt from source. Drivers with no binary format (GL_NUM_PROGRAM_
// BINARY_FORMATS == 0), or EMBER_OPENGL_PROGRAM_BINARY=0, cache nothing on disk.
// Mesa's program binaries hold the linked NIR; llvmpipe's LLVM code for it is built at the first
// dispatch and kept in Mesa's own shader cache ($MESA_SHADER_CACHE_DIR, ~/.cache/mesa_shader_cache).
//
// Concurrency. GL calls stay on the thread holding the context (a Scope); the backend prints the
// shaders on a thread pool first. A program's missing shaders are compiled as one batch: every
// glCompileShader and glLinkProgram is issued before any status is read, so a driver with
// GL_KHR_parallel_shader_compile (or the ARB form; Context::parallel_compile, its thread count
// set to compile_jobs()) compiles them on its own threads, and completion is polled with
// GL_COMPLETION_STATUS_KHR. Without the extension the same calls run one after another (each
// compile finishes inside its call). Mesa exposes the extension on every gallium driver,
// llvmpipe included (its front end compiles on the GL thread; the driver's part of the compile
// runs on Mesa's shader-compiler threads): EMBER_DEBUG=time prints each shader's start and end.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/compile_cache.h"
#include "backends/gpu_runtime.h"
#include "backends/opengl/opengl.h"

namespace ember::gl {

namespace {

constexpr char kBinaryMagic[8] = {'E', 'M', 'B', 'G', 'L', 'B', '0', '1'};

std::string program_log(GLuint program) {
  GLint n = 0;
  glGetProgramiv(program, GL_INFO_LOG_LENGTH, &n);
  std::string log(static_cast<size_t>(std::max(n, 1)), '\0');
  glGetProgramInfoLog(program, n, nullptr, log.data());
  return log.c_str();
}

bool linked(GLuint program) {
  GLint ok = GL_FALSE;
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  return ok == GL_TRUE;
}

// A program from `bytes` (magic, format, driver binary); 0 when the driver rejects it.
GLuint load_binary(const std::string& bytes) {
  const size_t head = sizeof kBinaryMagic + 4;
  if (bytes.size() <= head || std::memcmp(bytes.data(), kBinaryMagic, sizeof kBinaryMagic) != 0) return 0;
  GLenum format = 0;
  std::memcpy(&format, bytes.data() + sizeof kBinaryMagic, 4);
  GLuint p = glCreateProgram();
  glProgramBinary(p, format, bytes.data() + head, static_cast<GLsizei>(bytes.size() - head));
  const bool ok = glGetError() == GL_NO_ERROR && linked(p);
  if (!ok) {
    glDeleteProgram(p);
    return 0;
  }
  return p;
}

std::string save_binary(GLuint program) {
  GLint length = 0;
  glGetProgramiv(program, GL_PROGRAM_BINARY_LENGTH, &length);
  if (length <= 0) return "";
  std::string bytes(sizeof kBinaryMagic + 4 + static_cast<size_t>(length), '\0');
  GLenum format = 0;
  GLsizei got = 0;
  glGetProgramBinary(program, length, &got, &format, bytes.data() + sizeof kBinaryMagic + 4);
  if (glGetError() != GL_NO_ERROR || got <= 0) return "";
  std::memcpy(bytes.data(), kBinaryMagic, sizeof kBinaryMagic);
  std::memcpy(bytes.data() + sizeof kBinaryMagic, &format, 4);
  bytes.resize(sizeof kBinaryMagic + 4 + static_cast<size_t>(got));
  return bytes;
}

// Writes the source of a kernel that failed to `<key>.glsl` in the cache directory for reading;
// returns where it went.
std::string keep_failed_source(const std::string& key, const std::string& source) {
  try {
    const std::string path = disk_entry_path(key, "glsl");
    write_file_atomic(path, source);
    return path;
  } catch (const BackendError&) {
    return "(not written: no cache directory)";
  }
}

// One shader of a batch being compiled and linked by the driver.
struct Pending {
  size_t index = 0;  // in the batch
  std::string key;
  GLuint shader = 0, program = 0;
};

std::string shader_log(GLuint shader) {
  GLint n = 0;
  glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &n);
  std::string log(static_cast<size_t>(std::max(n, 1)), '\0');
  glGetShaderInfoLog(shader, n, nullptr, log.data());
  return log.c_str();
}

// Whether the driver has finished `p` (always true without the parallel-compile extension,
// where every call finishes its work before it returns).
bool completed(const Pending& p) {
  if (context().parallel_compile == Context::ParallelCompile::none) return true;
  GLint done = GL_TRUE;
  glGetProgramiv(p.program, GL_COMPLETION_STATUS_KHR, &done);
  return done == GL_TRUE;
}

// The linked program of `p`; throws CompileError with the driver's log (the shader's source
// kept in the cache directory for reading).
GLuint finish_link(Pending& p, const std::string& source) {
  GLint ok = GL_FALSE;
  glGetShaderiv(p.shader, GL_COMPILE_STATUS, &ok);
  if (ok != GL_TRUE) {
    const std::string log = shader_log(p.shader);
    throw CompileError("ember: the OpenGL driver (" + context().renderer + ") failed to compile a generated GLSL kernel\n"
                       "  source: " + keep_failed_source(p.key, source) + "\n" + first_lines(log, 30));
  }
  if (!linked(p.program)) {
    const std::string log = program_log(p.program);
    throw CompileError("ember: the OpenGL driver (" + context().renderer + ") failed to link a generated GLSL kernel\n"
                       "  source: " + keep_failed_source(p.key, source) + "\n" + first_lines(log, 30));
  }
  glDetachShader(p.program, p.shader);
  glDeleteShader(p.shader);
  p.shader = 0;
  const GLuint program = p.program;
  p.program = 0;
  return program;
}

std::string program_key(const std::string& source) {
  std::string keyed = source;
  keyed += '\0';
  keyed += "opengl";
  keyed += '\0' + context().device_key;
  return "gl-" + content_hash(keyed);
}

}  // namespace

GlProgram::~GlProgram() {
  if (program) defer_delete_program(program);
}

const char* program_source_name(ProgramSource s) {
  switch (s) {
    case ProgramSource::memory: return "in memory";
    case ProgramSource::disk: return "binary cache hit";
    default: return "compiled";
  }
}

KernelLayout kernel_layout(const Node* kernel, const CodegenOptions& o) {
  const Context& c = context();
  KernelLayout l;
  const size_t memories = kernel->memories().size();
  size_t limit = static_cast<size_t>(std::max(c.max_storage_blocks, 2));
  if (const char* e = std::getenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS"); e && std::atoi(e) >= 2)
    limit = std::min(limit, static_cast<size_t>(std::atoi(e)));
  l.spill_from = memories <= limit ? memories : limit - 2;
  const size_t spilled = memories - l.spill_from;
  // EMBER_OPENGL_NO_FLOAT_ATOMICS=1 forces the compare-and-swap lowering (tests use it).
  // Native float atomics declare a second (uint) view of every memory, and std430 blocks count
  // against the limit whether used or not: only when twice the memories fit.
  AbiLimits limits;
  limits.float_atomic_add = c.float_atomic_add && 2 * memories <= limit && !env_on("EMBER_OPENGL_NO_FLOAT_ATOMICS");
  limits.fast_math = o.fast_math;
  l.abi = kernel_abi(kernel, KernelApi::opengl, limits);
  // The arena's word offsets follow the params in the uniform block.
  const size_t param_bytes = l.abi.params.fields.size() * 4 + spilled * 4;
  if (param_bytes > static_cast<size_t>(c.max_uniform_block_bytes))
    throw BackendError("ember: kernel #" + std::to_string(kernel->index) + " takes " +
                       std::to_string(kernel->params().size()) + " scalar params; " + c.description +
                       " holds at most " + std::to_string(c.max_uniform_block_bytes / 4 - kGpuHeaderWords) +
                       " in a uniform block");
  check_workgroup_limits(kernel, c.max_group_invocations, c.max_group_size_x, c.max_shared_bytes, c.description);
  return l;
}

const Dialect& kernel_dialect(const KernelLayout& layout) { return abi_dialect(layout.abi); }

std::string shader_source(const GeneratedKernel& k, const Dialect& d, const KernelLayout& layout) {
  std::string body = k.source;
  const Node* kernel = k.kernel;
  const size_t n = kernel->memories().size();
  if (layout.spill_from < n) {
    // Declarations: the arena's two views where the first arena memory was declared.
    size_t at = std::string::npos;
    // Buffers of a kernel whose barriers order buffer writes are `coherent` (Dialect::coherent).
    const std::string coherent =
        body.find(") " + d.coherent + "buffer EmberM") != std::string::npos ? d.coherent : std::string();
    for (size_t i = layout.spill_from; i < n; ++i) {
      const std::string slot = std::to_string(i);
      const std::string decl = "layout(std430, binding = " + slot + ") " + coherent + "buffer EmberM" + slot + " { " +
                               d.mem_type[dtype_slot(kernel->memories()[i]->dtype)] + " m" + slot + "[]; };\n";
      const size_t pos = body.find(decl);
      EMBER_INTERNAL_ASSERT(pos != std::string::npos, "no declaration of memory " << i << " in " << k.symbol);
      body.erase(pos, decl.size());
      at = std::min(at, pos);
    }
    const std::string u = std::to_string(layout.spill_from), i1 = std::to_string(layout.spill_from + 1);
    body.insert(at, "layout(std430, binding = " + u + ") " + coherent +
                        "buffer EmberArenaU { uint ember_arena_u[]; };\n" +
                        "layout(std430, binding = " + i1 + ") " + coherent +
                        "buffer EmberArenaI { int ember_arena_i[]; };\n");
    // Offsets after the params in the uniform block.
    std::string offsets;
    for (size_t i = layout.spill_from; i < n; ++i) offsets += "  uint ember_o" + std::to_string(i) + ";\n";
    const size_t close = body.find("} ember_pc;");
    EMBER_INTERNAL_ASSERT(close != std::string::npos, "no uniform block in " << k.symbol);
    body.insert(close, offsets);
    // Accesses: m<i>[x] -> ember_arena_<v>[int(ember_pc.ember_o<i>) + (x)].
    auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (size_t i = layout.spill_from; i < n; ++i) {
      const std::string name = "m" + std::to_string(i) + "[";
      const std::string view = d.mem_type[dtype_slot(kernel->memories()[i]->dtype)] == "int" ? "ember_arena_i" : "ember_arena_u";
      const std::string open = view + "[int(ember_pc.ember_o" + std::to_string(i) + ") + (";
      for (size_t pos = body.find(name); pos != std::string::npos; pos = body.find(name, pos)) {
        if (pos > 0 && ident(body[pos - 1])) { pos += name.size(); continue; }
        int depth = 1;
        size_t end = pos + name.size();
        for (; end < body.size() && depth > 0; ++end) depth += body[end] == '[' ? 1 : body[end] == ']' ? -1 : 0;
        EMBER_INTERNAL_ASSERT(depth == 0, "unbalanced brackets after " << name << " in " << k.symbol);
        // body[end - 1] is the matching ']'.
        body.replace(end - 1, 1, ")]");
        body.replace(pos, name.size(), open);
        pos += open.size();
      }
    }
  }
  return generated_header(d, ": " + k.symbol, ", OpenGL") + unit_prelude(d, {&k.source}) + "\n" + body;
}

std::vector<ProgramBuild> compile_programs(const std::vector<std::string>& sources, const CompileTimeline& timeline) {
  const bool binaries = program_binaries();
  std::vector<ProgramBuild> out(sources.size());
  // The memory cache, then program binaries on disk. No per-key lock: GL work is serialized by
  // the Scope the caller holds, and one batch at a time runs in this process.
  std::vector<Pending> pending;
  for (size_t i = 0; i < sources.size(); ++i) {
    ProgramBuild& b = out[i];
    b.start_ms = timeline.now_ms();
    const std::string key = program_key(sources[i]);
    if (auto a = memory_cache_get(key)) {
      b.program = std::static_pointer_cast<GlProgram>(a);
      b.from = ProgramSource::memory;
    } else {
      std::string bytes;
      if (binaries && disk_entry_check(key, "glbin") && read_file(disk_entry_path(key, "glbin"), bytes)) {
        auto p = std::make_shared<GlProgram>();
        p->program = load_binary(bytes);
        if (p->program) {
          b.program = p;
          b.from = ProgramSource::disk;
          memory_cache_put(key, p);
        } else {
          disk_entry_corrupt(key, "glbin", "the driver rejected the program binary");  // rebuilt below
        }
      }
    }
    if (b.program) {
      b.end_ms = timeline.now_ms();
      continue;
    }
    b.from = ProgramSource::compiled;
    pending.push_back({i, key, 0, 0});
  }
  if (pending.empty()) return out;

  // Issue every compile, then every link, before reading any status (see the file comment).
  auto release = [&] {  // on an error: the batch's GL objects
    for (Pending& p : pending) {
      if (p.program) glDeleteProgram(p.program);
      if (p.shader) glDeleteShader(p.shader);
      p.program = p.shader = 0;
    }
  };
  for (Pending& p : pending) {
    out[p.index].start_ms = timeline.now_ms();
    p.shader = glCreateShader(GL_COMPUTE_SHADER);
    const char* text = sources[p.index].c_str();
    const GLint length = static_cast<GLint>(sources[p.index].size());
    glShaderSource(p.shader, 1, &text, &length);
    glCompileShader(p.shader);
  }
  for (Pending& p : pending) {
    p.program = glCreateProgram();
    if (binaries) glProgramParameteri(p.program, GL_PROGRAM_BINARY_RETRIEVABLE_HINT, GL_TRUE);
    glAttachShader(p.program, p.shader);
    glLinkProgram(p.program);
  }
  // Collect them as they complete (in order without the extension), each saved as a binary.
  std::vector<char> done(pending.size(), 0);
  size_t left = pending.size();
  try {
    while (left) {
      bool progress = false;
      for (size_t j = 0; j < pending.size(); ++j) {
        if (done[j] || !completed(pending[j])) continue;
        Pending& p = pending[j];
        auto prog = std::make_shared<GlProgram>();
        prog->program = finish_link(p, sources[p.index]);
        ProgramBuild& b = out[p.index];
        b.program = prog;
        b.end_ms = timeline.now_ms();
        if (binaries) {
          const std::string binary = save_binary(prog->program);
          if (!binary.empty()) {
            try {
              write_file_atomic(disk_entry_path(p.key, "glsl"), sources[p.index]);
              std::string tmp = cache_temp_path(p.key, ".glbin");
              write_file_atomic(tmp, binary);
              disk_entry_commit(p.key, "glbin", tmp);
            } catch (const BackendError& e) {  // a read-only cache directory only costs compile time
              cache_unwritable(e.what());
            }
          }
        }
        memory_cache_put(p.key, prog);
        done[j] = 1;
        --left;
        progress = true;
      }
      if (!progress) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (...) {
    release();
    throw;
  }
  return out;
}

std::shared_ptr<GlProgram> compile_program(const std::string& source, ProgramSource* from) {
  std::vector<ProgramBuild> b = compile_programs({source}, CompileTimeline());
  *from = b[0].from;
  return b[0].program;
}

}  // namespace ember::gl
