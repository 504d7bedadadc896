// The OpenGL Device of device.h: an OpenGL 4.3+ core context on Mesa's EGL surfaceless
// platform (no display or X server), entry points loaded with eglGetProcAddress. Buffers are
// shader storage buffers; a kernel is the GLSL source of a `glsl` export compiled by the
// driver; parameters go in a uniform block (or a storage buffer) refilled before each
// dispatch; a glMemoryBarrier(GL_ALL_BARRIER_BITS) follows every dispatch.
#define EGL_NO_X11
#define MESA_EGL_NO_X11_HEADERS
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/glcorearb.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "device.h"

namespace runner {

namespace {

// The GL entry points the runner uses: X(type, name).
#define RUNNER_GL_FUNCTIONS(X)                                                             \
  X(PFNGLGETERRORPROC, glGetError)                                                         \
  X(PFNGLGETSTRINGPROC, glGetString)                                                       \
  X(PFNGLGETINTEGERVPROC, glGetIntegerv)                                                   \
  X(PFNGLGETINTEGERI_VPROC, glGetIntegeri_v)                                               \
  X(PFNGLGENBUFFERSPROC, glGenBuffers)                                                     \
  X(PFNGLDELETEBUFFERSPROC, glDeleteBuffers)                                               \
  X(PFNGLBINDBUFFERPROC, glBindBuffer)                                                     \
  X(PFNGLBINDBUFFERBASEPROC, glBindBufferBase)                                             \
  X(PFNGLBUFFERDATAPROC, glBufferData)                                                     \
  X(PFNGLBUFFERSUBDATAPROC, glBufferSubData)                                               \
  X(PFNGLGETBUFFERSUBDATAPROC, glGetBufferSubData)                                         \
  X(PFNGLCOPYBUFFERSUBDATAPROC, glCopyBufferSubData)                                       \
  X(PFNGLCLEARBUFFERSUBDATAPROC, glClearBufferSubData)                                     \
  X(PFNGLCREATESHADERPROC, glCreateShader)                                                 \
  X(PFNGLSHADERSOURCEPROC, glShaderSource)                                                 \
  X(PFNGLCOMPILESHADERPROC, glCompileShader)                                               \
  X(PFNGLGETSHADERIVPROC, glGetShaderiv)                                                   \
  X(PFNGLGETSHADERINFOLOGPROC, glGetShaderInfoLog)                                         \
  X(PFNGLDELETESHADERPROC, glDeleteShader)                                                 \
  X(PFNGLCREATEPROGRAMPROC, glCreateProgram)                                               \
  X(PFNGLATTACHSHADERPROC, glAttachShader)                                                 \
  X(PFNGLLINKPROGRAMPROC, glLinkProgram)                                                   \
  X(PFNGLGETPROGRAMIVPROC, glGetProgramiv)                                                 \
  X(PFNGLGETPROGRAMINFOLOGPROC, glGetProgramInfoLog)                                       \
  X(PFNGLDELETEPROGRAMPROC, glDeleteProgram)                                               \
  X(PFNGLUSEPROGRAMPROC, glUseProgram)                                                     \
  X(PFNGLDISPATCHCOMPUTEPROC, glDispatchCompute)                                           \
  X(PFNGLMEMORYBARRIERPROC, glMemoryBarrier)                                               \
  X(PFNGLFINISHPROC, glFinish)

struct Gl {
#define RUNNER_GL_MEMBER(type, name) type name = nullptr;
  RUNNER_GL_FUNCTIONS(RUNNER_GL_MEMBER)
#undef RUNNER_GL_MEMBER
};

bool has_word(const char* list, const char* word) {
  if (!list) return false;
  const size_t n = std::strlen(word);
  for (const char* p = list; (p = std::strstr(p, word)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return true;
  return false;
}

[[noreturn]] void egl_fail(const std::string& what) {
  std::ostringstream os;
  os << "OpenGL via EGL surfaceless: " << what << " failed (EGL error 0x" << std::hex << eglGetError() << ")";
  throw std::runtime_error(os.str());
}

class GlDevice : public Device {
 public:
  GlDevice() {
    const char* client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!has_word(client, "EGL_MESA_platform_surfaceless") || !has_word(client, "EGL_EXT_platform_base"))
      throw std::runtime_error("OpenGL via EGL: no surfaceless platform (EGL_MESA_platform_surfaceless; Debian: libegl-mesa0)");
    auto get_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    if (!get_display) egl_fail("eglGetProcAddress(eglGetPlatformDisplayEXT)");
    dpy_ = get_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (dpy_ == EGL_NO_DISPLAY) egl_fail("eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA)");
    EGLint major = 0, minor = 0;
    if (!eglInitialize(dpy_, &major, &minor)) egl_fail("eglInitialize");
    if (!has_word(eglQueryString(dpy_, EGL_EXTENSIONS), "EGL_KHR_surfaceless_context"))
      throw std::runtime_error("OpenGL via EGL: the driver has no EGL_KHR_surfaceless_context");
    if (!eglBindAPI(EGL_OPENGL_API)) egl_fail("eglBindAPI(EGL_OPENGL_API)");
    EGLConfig config = EGL_NO_CONFIG_KHR;
    if (!has_word(eglQueryString(dpy_, EGL_EXTENSIONS), "EGL_KHR_no_config_context")) {
      const EGLint want[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
      EGLint n = 0;
      if (!eglChooseConfig(dpy_, want, &config, 1, &n) || n < 1) egl_fail("eglChooseConfig(EGL_OPENGL_BIT)");
    }
    const EGLint attrs[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 3, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                            EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
    ctx_ = eglCreateContext(dpy_, config, EGL_NO_CONTEXT, attrs);
    if (ctx_ == EGL_NO_CONTEXT) egl_fail("eglCreateContext(OpenGL 4.3 core)");
    if (!eglMakeCurrent(dpy_, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx_)) egl_fail("eglMakeCurrent");
#define RUNNER_GL_LOAD(type, name)                                                  \
  gl_.name = reinterpret_cast<type>(eglGetProcAddress(#name));                      \
  if (!gl_.name) throw std::runtime_error("OpenGL: cannot load " #name);
    RUNNER_GL_FUNCTIONS(RUNNER_GL_LOAD)
#undef RUNNER_GL_LOAD
    glGenBuffers_(params_buf_);
  }

  ~GlDevice() override {
    if (gl_.glDeleteBuffers) {
      for (auto& [id, b] : buffers_) gl_.glDeleteBuffers(1, &b);
      gl_.glDeleteBuffers(1, &params_buf_);
      for (auto& [k, p] : programs_) gl_.glDeleteProgram(p.program);
    }
    eglMakeCurrent(dpy_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(dpy_, ctx_);
    eglTerminate(dpy_);
  }

  std::string describe() const override {
    return std::string("OpenGL ") + reinterpret_cast<const char*>(gl_.glGetString(GL_VERSION)) + " on " +
           reinterpret_cast<const char*>(gl_.glGetString(GL_RENDERER)) + " (EGL surfaceless)";
  }

  void create_buffer(int id, size_t words) override {
    GLuint b = 0;
    glGenBuffers_(b);
    gl_.glBindBuffer(GL_SHADER_STORAGE_BUFFER, b);
    gl_.glBufferData(GL_SHADER_STORAGE_BUFFER, GLsizeiptr(words * 4), nullptr, GL_DYNAMIC_COPY);
    check("glBufferData (" + std::to_string(words * 4) + " bytes)");
    buffers_[id] = b;
  }

  void write(int id, size_t offset, const uint32_t* data, size_t words) override {
    gl_.glMemoryBarrier(GL_ALL_BARRIER_BITS);
    gl_.glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffers_.at(id));
    gl_.glBufferSubData(GL_SHADER_STORAGE_BUFFER, GLintptr(offset * 4), GLsizeiptr(words * 4), data);
    check("glBufferSubData");
  }

  void read(int id, size_t offset, uint32_t* data, size_t words) override {
    gl_.glMemoryBarrier(GL_ALL_BARRIER_BITS);
    gl_.glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffers_.at(id));
    gl_.glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, GLintptr(offset * 4), GLsizeiptr(words * 4), data);
    check("glGetBufferSubData");
  }

  void load_kernel(int k, const KernelSpec& ks, const Manifest& m) override {
    if (ks.params.kind == "push_constant" || ks.params.kind == "cbuffer" || ks.params.kind == "word_array")
      throw std::runtime_error("kernel " + ks.name + ": parameters in a " + ks.params.kind +
                               " are not OpenGL's; --gl runs a `glsl` export");
    const std::string path = m.dir + "/" + ks.file;
    std::ifstream f(path);
    if (!f) throw std::runtime_error("kernel " + ks.name + ": cannot open " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string src = ss.str();
    if (src.compare(0, 4, "\x03\x02\x23\x07") == 0)
      throw std::runtime_error("kernel " + ks.name + ": " + path + " is SPIR-V; --gl runs a `glsl` export");
    GLuint sh = gl_.glCreateShader(GL_COMPUTE_SHADER);
    const char* text = src.c_str();
    gl_.glShaderSource(sh, 1, &text, nullptr);
    gl_.glCompileShader(sh);
    GLint ok = 0;
    gl_.glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
      char log[4096] = {0};
      gl_.glGetShaderInfoLog(sh, sizeof log, nullptr, log);
      gl_.glDeleteShader(sh);
      throw std::runtime_error("kernel " + ks.name + ": " + path + " does not compile as OpenGL compute GLSL:\n" + log);
    }
    Program p;
    p.program = gl_.glCreateProgram();
    gl_.glAttachShader(p.program, sh);
    gl_.glLinkProgram(p.program);
    gl_.glDeleteShader(sh);
    gl_.glGetProgramiv(p.program, GL_LINK_STATUS, &ok);
    if (!ok) {
      char log[4096] = {0};
      gl_.glGetProgramInfoLog(p.program, sizeof log, nullptr, log);
      throw std::runtime_error("kernel " + ks.name + ": link failed:\n" + std::string(log));
    }
    p.bindings = ks.bindings;
    p.params = ks.params;
    programs_[k] = p;
    check("loading kernel " + ks.name);
  }

  void dispatch(int k, const std::array<uint32_t, 3>& groups, const std::vector<uint8_t>& params) override {
    const Program& p = programs_.at(k);
    for (int a = 0; a < 3; ++a) {
      GLint lim = 0;
      gl_.glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, GLuint(a), &lim);
      if (groups[a] > uint32_t(lim))
        throw std::runtime_error("dispatch of " + std::to_string(groups[a]) + " groups along axis " + std::to_string(a) +
                                 ", the device allows " + std::to_string(lim));
    }
    gl_.glUseProgram(p.program);
    for (const auto& b : p.bindings) gl_.glBindBufferBase(GL_SHADER_STORAGE_BUFFER, GLuint(b.binding), buffers_.at(b.buffer));
    if (p.params.kind != "none" && !params.empty()) {
      const GLenum target = p.params.kind == "storage_buffer" ? GL_SHADER_STORAGE_BUFFER : GL_UNIFORM_BUFFER;
      gl_.glBindBuffer(target, params_buf_);
      gl_.glBufferData(target, GLsizeiptr(params.size()), params.data(), GL_STREAM_DRAW);  // orphans the last one
      gl_.glBindBufferBase(target, GLuint(std::max(p.params.binding, 0)), params_buf_);
    }
    gl_.glDispatchCompute(groups[0], groups[1], groups[2]);
    gl_.glMemoryBarrier(GL_ALL_BARRIER_BITS);
    check("glDispatchCompute");
  }

  void copy(int src, size_t src_offset, int dst, size_t dst_offset, size_t words) override {
    gl_.glBindBuffer(GL_COPY_READ_BUFFER, buffers_.at(src));
    gl_.glBindBuffer(GL_COPY_WRITE_BUFFER, buffers_.at(dst));
    gl_.glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, GLintptr(src_offset * 4), GLintptr(dst_offset * 4),
                            GLsizeiptr(words * 4));
    gl_.glMemoryBarrier(GL_ALL_BARRIER_BITS);
    check("glCopyBufferSubData");
  }

  void fill(int id, size_t offset, size_t words, uint32_t value) override {
    gl_.glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffers_.at(id));
    gl_.glClearBufferSubData(GL_SHADER_STORAGE_BUFFER, GL_R32UI, GLintptr(offset * 4), GLsizeiptr(words * 4), GL_RED_INTEGER,
                             GL_UNSIGNED_INT, &value);
    gl_.glMemoryBarrier(GL_ALL_BARRIER_BITS);
    check("glClearBufferSubData");
  }

  void finish() override {
    gl_.glFinish();
    check("glFinish");
  }

 private:
  struct Program {
    GLuint program = 0;
    std::vector<BindingSpec> bindings;
    ParamBlock params;
  };
  EGLDisplay dpy_ = EGL_NO_DISPLAY;
  EGLContext ctx_ = EGL_NO_CONTEXT;
  Gl gl_;
  std::map<int, GLuint> buffers_;
  std::map<int, Program> programs_;
  GLuint params_buf_ = 0;

  void glGenBuffers_(GLuint& b) {
    gl_.glGenBuffers(1, &b);
  }

  void check(const std::string& what) {
    const GLenum e = gl_.glGetError();
    if (e != GL_NO_ERROR) {
      std::ostringstream os;
      os << "OpenGL: " << what << " failed (GL error 0x" << std::hex << e << ")";
      throw std::runtime_error(os.str());
    }
  }
};

}  // namespace

std::unique_ptr<Device> make_gl_device() { return std::make_unique<GlDevice>(); }

}  // namespace runner
