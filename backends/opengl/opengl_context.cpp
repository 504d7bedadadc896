// The OpenGL context: one per process, created on first use, GL 4.5 core. With a display
// ($DISPLAY or $WAYLAND_DISPLAY) it belongs to a hidden GLFW window (the window runtime shares
// it: opengl.h); without one, or when GLFW cannot open the display, it is an EGL context on
// Mesa's surfaceless platform (EGL_MESA_platform_surfaceless), which needs no X server.
// $EMBER_OPENGL_CONTEXT=glfw|egl forces one path. GL entry points come from the glad loader
// generated at configure time, loaded through the context's own proc-address function.
#define GLFW_INCLUDE_NONE
#define EGL_NO_X11
#define MESA_EGL_NO_X11_HEADERS
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLFW/glfw3.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backends/gpu_runtime.h"
#include "backends/opengl/opengl.h"

#ifndef EMBER_VERSION
#define EMBER_VERSION "unknown"
#endif

namespace ember::gl {

namespace {

thread_local int t_depth = 0;  // Scopes open on this thread

std::string& glfw_error() {
  static std::string* s = new std::string;
  return *s;
}
void on_glfw_error(int code, const char* what) { glfw_error() = what ? what : "GLFW error " + std::to_string(code); }

const char* egl_error_name(EGLint e) {
  switch (e) {
#define EMBER_EGL_ERROR(x) case x: return #x;
    EMBER_EGL_ERROR(EGL_SUCCESS) EMBER_EGL_ERROR(EGL_NOT_INITIALIZED) EMBER_EGL_ERROR(EGL_BAD_ACCESS)
    EMBER_EGL_ERROR(EGL_BAD_ALLOC) EMBER_EGL_ERROR(EGL_BAD_ATTRIBUTE) EMBER_EGL_ERROR(EGL_BAD_CONFIG)
    EMBER_EGL_ERROR(EGL_BAD_CONTEXT) EMBER_EGL_ERROR(EGL_BAD_CURRENT_SURFACE) EMBER_EGL_ERROR(EGL_BAD_DISPLAY)
    EMBER_EGL_ERROR(EGL_BAD_MATCH) EMBER_EGL_ERROR(EGL_BAD_PARAMETER) EMBER_EGL_ERROR(EGL_BAD_SURFACE)
#undef EMBER_EGL_ERROR
    default: return "EGL error";
  }
}
std::string egl_fail(const std::string& what) {
  return "ember: OpenGL via EGL surfaceless: " + what + " failed (" + egl_error_name(eglGetError()) + ")";
}

bool has_word(const char* list, const char* word) {
  if (!list) return false;
  const size_t n = std::strlen(word);
  for (const char* p = list; (p = std::strstr(p, word)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
  return false;
}

// A hidden 4.5 core window; "" on success, else why not.
std::string create_glfw(Context& c) {
  glfwSetErrorCallback(on_glfw_error);
  glfw_error().clear();
  if (!glfwInit()) return "ember: OpenGL via GLFW: cannot initialize GLFW (" + glfw_error() + ")";
  glfwDefaultWindowHints();
  glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 4);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 5);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* w = glfwCreateWindow(16, 16, "ember", nullptr, nullptr);
  if (!w) return "ember: OpenGL via GLFW: cannot create a hidden OpenGL 4.5 core window (" + glfw_error() + ")";
  glfwMakeContextCurrent(w);
  if (!gladLoadGL(reinterpret_cast<GLADloadfunc>(glfwGetProcAddress))) {
    glfwMakeContextCurrent(nullptr);
    glfwDestroyWindow(w);
    return "ember: OpenGL via GLFW: cannot load the OpenGL 4.5 entry points";
  }
  c.kind = Context::Kind::glfw;
  c.glfw_window = w;
  return "";
}

// A surfaceless 4.5 core EGL context; "" on success, else why not.
std::string create_egl(Context& c) {
  const char* client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  if (!has_word(client, "EGL_MESA_platform_surfaceless") || !has_word(client, "EGL_EXT_platform_base"))
    return "ember: OpenGL via EGL: the EGL library has no surfaceless platform (EGL_MESA_platform_surfaceless; "
           "Debian: libegl-mesa0)";
  auto get_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
  if (!get_display) return egl_fail("eglGetProcAddress(eglGetPlatformDisplayEXT)");
  EGLDisplay dpy = get_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
  if (dpy == EGL_NO_DISPLAY) return egl_fail("eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA)");
  EGLint major = 0, minor = 0;
  if (!eglInitialize(dpy, &major, &minor)) return egl_fail("eglInitialize");
  const char* ext = eglQueryString(dpy, EGL_EXTENSIONS);
  if (!has_word(ext, "EGL_KHR_surfaceless_context")) {
    eglTerminate(dpy);
    return "ember: OpenGL via EGL: the driver has no EGL_KHR_surfaceless_context";
  }
  if (!eglBindAPI(EGL_OPENGL_API)) {
    eglTerminate(dpy);
    return egl_fail("eglBindAPI(EGL_OPENGL_API)");
  }
  EGLConfig config = EGL_NO_CONFIG_KHR;
  if (!has_word(ext, "EGL_KHR_no_config_context")) {
    const EGLint want[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_NONE};
    EGLint n = 0;
    if (!eglChooseConfig(dpy, want, &config, 1, &n) || n < 1) {
      eglTerminate(dpy);
      return egl_fail("eglChooseConfig(EGL_OPENGL_BIT)");
    }
  }
  const EGLint attrs[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                          EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
  EGLContext ctx = eglCreateContext(dpy, config, EGL_NO_CONTEXT, attrs);
  if (ctx == EGL_NO_CONTEXT) {
    std::string why = egl_fail("eglCreateContext(OpenGL 4.5 core)");
    eglTerminate(dpy);
    return why;
  }
  if (!eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
    std::string why = egl_fail("eglMakeCurrent");
    eglDestroyContext(dpy, ctx);
    eglTerminate(dpy);
    return why;
  }
  if (!gladLoadGL(reinterpret_cast<GLADloadfunc>(eglGetProcAddress))) {
    eglMakeCurrent(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(dpy, ctx);
    eglTerminate(dpy);
    return "ember: OpenGL via EGL: cannot load the OpenGL 4.5 entry points";
  }
  c.kind = Context::Kind::egl;
  c.egl_display = dpy;
  c.egl_context = ctx;
  return "";
}

const char* gl_string(GLenum e) {
  const GLubyte* s = glGetString(e);
  return s ? reinterpret_cast<const char*>(s) : "?";
}

bool has_gl_extension(const char* name) {
  GLint n = 0;
  glGetIntegerv(GL_NUM_EXTENSIONS, &n);
  for (GLint i = 0; i < n; ++i) {
    const GLubyte* e = glGetStringi(GL_EXTENSIONS, static_cast<GLuint>(i));
    if (e && std::strcmp(reinterpret_cast<const char*>(e), name) == 0) return true;
  }
  return false;
}

// The context's properties and limits (the context is current).
void describe(Context& c) {
  c.renderer = gl_string(GL_RENDERER);
  c.version = gl_string(GL_VERSION);
  c.vendor = gl_string(GL_VENDOR);
  c.glsl_version = gl_string(GL_SHADING_LANGUAGE_VERSION);
  c.description = c.renderer + " via OpenGL " + c.version +
                  (c.kind == Context::Kind::glfw ? ", GLFW hidden window" : ", EGL surfaceless");
  c.device_key = c.renderer + "|" + c.vendor + "|" + c.version + "|" + c.glsl_version + "|" + EMBER_VERSION;
  if (c.renderer.rfind("llvmpipe", 0) == 0) c.loop_limit = 65535;  // LP_MAX_TGSI_LOOP_ITERATIONS, as lavapipe
  glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &c.binary_formats);
  c.float_atomic_add = has_gl_extension("GL_NV_shader_atomic_float");
  if (has_gl_extension("GL_KHR_parallel_shader_compile") && glMaxShaderCompilerThreadsKHR) {
    c.parallel_compile = Context::ParallelCompile::khr;
    glMaxShaderCompilerThreadsKHR(static_cast<GLuint>(compile_jobs()));
  } else if (has_gl_extension("GL_ARB_parallel_shader_compile") && glMaxShaderCompilerThreadsARB) {
    c.parallel_compile = Context::ParallelCompile::arb;
    glMaxShaderCompilerThreadsARB(static_cast<GLuint>(compile_jobs()));
  }
  glGetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &c.max_storage_blocks);
  GLint64 bytes = 0;
  glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &bytes);
  c.max_storage_bytes = bytes;
  glGetIntegerv(GL_MAX_UNIFORM_BLOCK_SIZE, &c.max_uniform_block_bytes);
  glGetIntegerv(GL_UNIFORM_BUFFER_OFFSET_ALIGNMENT, &c.uniform_alignment);
  if (c.uniform_alignment <= 0) c.uniform_alignment = 256;
  for (GLuint i = 0; i < 3; ++i) glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &c.max_groups[i]);
  glGetIntegerv(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, &c.max_group_invocations);
  glGetIntegeri_v(GL_MAX_COMPUTE_WORK_GROUP_SIZE, 0, &c.max_group_size_x);
  glGetIntegerv(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, &c.max_shared_bytes);
  while (glGetError() != GL_NO_ERROR) {
  }
  // At info level (EMBER_LOG=info, the `ember` logger), and on stderr with EMBER_DEBUG=time.
  const bool info = log_enabled(LogLevel::info);
  if (info || env_has("EMBER_DEBUG", "time")) {
    auto say = [&](const std::string& text) {
      if (info) log_message(LogLevel::info, text);
      else std::fprintf(stderr, "ember: %s\n", text.c_str());
    };
    say("OpenGL context: " + c.description + "; shaders compiled " +
        (c.parallel_compile == Context::ParallelCompile::none
             ? "one after another (no GL_KHR/ARB_parallel_shader_compile)"
             : "in parallel by the driver (GL_" +
                   std::string(c.parallel_compile == Context::ParallelCompile::khr ? "KHR" : "ARB") +
                   "_parallel_shader_compile, " + std::to_string(compile_jobs()) + " threads)"));
    if (c.binary_formats == 0 || env_str("EMBER_OPENGL_PROGRAM_BINARY") == "0")
      say(std::string("OpenGL: ") +
          (c.binary_formats == 0 ? "the driver offers no program binary format"
                                 : "program binaries turned off (EMBER_OPENGL_PROGRAM_BINARY=0)") +
          "; compiled programs are not cached on disk (each new process compiles its shaders)");
  }
}

void release_current(Context& c) {
  if (c.kind == Context::Kind::glfw) glfwMakeContextCurrent(nullptr);
  else eglMakeCurrent(static_cast<EGLDisplay>(c.egl_display), EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
}

void create(Context& c) {
  const std::string force = env_str("EMBER_OPENGL_CONTEXT");
  if (!force.empty() && force != "glfw" && force != "egl")
    throw BackendError("ember: EMBER_OPENGL_CONTEXT=" + force + " (expected glfw or egl)");
  const bool display = !env_str("DISPLAY").empty() || !env_str("WAYLAND_DISPLAY").empty();
  std::string why;
  bool ok = false;
  if (force == "glfw" || (force.empty() && display)) {
    why = create_glfw(c);
    ok = why.empty();
  }
  if (!ok && force != "glfw") {
    std::string egl = create_egl(c);
    ok = egl.empty();
    why = why.empty() ? egl : why + "; " + egl;
  }
  if (!ok) throw BackendError(why);
  describe(c);
  release_current(c);
}

// Creates the context holding its lock (nothing else may use it before it is complete).
void create_locked(Context& c) {
  std::lock_guard<std::recursive_mutex> lock(c.mu);
  create(c);
}

// Names whose deletion waits for the next Scope.
struct Holder {
  std::mutex doomed_mu;
  std::vector<GLuint> doomed_buffers, doomed_programs;
};
Holder& holder() {
  static Holder* h = new Holder;  // never destroyed
  return *h;
}

}  // namespace

Context& context() { return process_context(create_locked); }

bool program_binaries() { return context().binary_formats > 0 && env_str("EMBER_OPENGL_PROGRAM_BINARY") != "0"; }

std::string unavailable_reason() { return unavailable_reason_of(context); }

Scope::Scope() {
  Context& c = context();
  c.mu.lock();
  if (t_depth++ > 0) return;
  outer_ = true;
  if (c.kind == Context::Kind::glfw) {
    prev_[0] = glfwGetCurrentContext();
    if (prev_[0] != c.glfw_window) glfwMakeContextCurrent(static_cast<GLFWwindow*>(c.glfw_window));
  } else {
    eglBindAPI(EGL_OPENGL_API);  // the thread's current API selects which current context EGL reports
    prev_[0] = eglGetCurrentDisplay();
    prev_[1] = eglGetCurrentContext();
    prev_[2] = eglGetCurrentSurface(EGL_DRAW);
    prev_[3] = eglGetCurrentSurface(EGL_READ);
    if (prev_[1] != c.egl_context &&
        !eglMakeCurrent(static_cast<EGLDisplay>(c.egl_display), EGL_NO_SURFACE, EGL_NO_SURFACE,
                        static_cast<EGLContext>(c.egl_context))) {
      --t_depth;
      c.mu.unlock();
      throw BackendError(egl_fail("eglMakeCurrent"));
    }
  }
  delete_deferred();
}

Scope::~Scope() {
  Context& c = context();
  if (outer_) {
    if (c.kind == Context::Kind::glfw) {
      if (prev_[0] != c.glfw_window) glfwMakeContextCurrent(static_cast<GLFWwindow*>(prev_[0]));
    } else if (prev_[1] != c.egl_context) {
      if (prev_[1] == EGL_NO_CONTEXT || prev_[0] == EGL_NO_DISPLAY)
        eglMakeCurrent(static_cast<EGLDisplay>(c.egl_display), EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
      else
        eglMakeCurrent(static_cast<EGLDisplay>(prev_[0]), static_cast<EGLSurface>(prev_[2]),
                       static_cast<EGLSurface>(prev_[3]), static_cast<EGLContext>(prev_[1]));
    }
  }
  --t_depth;
  c.mu.unlock();
}

void defer_delete_buffer(GLuint name) {
  Holder& h = holder();
  std::lock_guard<std::mutex> lock(h.doomed_mu);
  h.doomed_buffers.push_back(name);
}

void defer_delete_program(GLuint name) {
  Holder& h = holder();
  std::lock_guard<std::mutex> lock(h.doomed_mu);
  h.doomed_programs.push_back(name);
}

void delete_deferred() {
  Holder& h = holder();
  std::vector<GLuint> buffers, programs;
  {
    std::lock_guard<std::mutex> lock(h.doomed_mu);
    buffers.swap(h.doomed_buffers);
    programs.swap(h.doomed_programs);
  }
  if (!buffers.empty()) glDeleteBuffers(static_cast<GLsizei>(buffers.size()), buffers.data());
  for (GLuint p : programs) glDeleteProgram(p);
}

void check_error(const char* what) {
  GLenum e = glGetError();
  if (e == GL_NO_ERROR) return;
  const char* name = e == GL_INVALID_ENUM ? "GL_INVALID_ENUM"
                     : e == GL_INVALID_VALUE ? "GL_INVALID_VALUE"
                     : e == GL_INVALID_OPERATION ? "GL_INVALID_OPERATION"
                     : e == GL_OUT_OF_MEMORY ? "GL_OUT_OF_MEMORY"
                     : e == GL_INVALID_FRAMEBUFFER_OPERATION ? "GL_INVALID_FRAMEBUFFER_OPERATION"
                                                             : "GL error";
  while (glGetError() != GL_NO_ERROR) {
  }
  char code[16];
  std::snprintf(code, sizeof code, "0x%04x", e);
  throw BackendError(std::string("ember: OpenGL error ") + name + " (" + code + ") in " + what + " on " +
                     context().description);
}

}  // namespace ember::gl
