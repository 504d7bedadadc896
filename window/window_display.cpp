// show(): what an image may be, where its pixels come from, and how they are drawn.
// f32 and u8 images go into a texture of their size (R32F, RGB/RGBA 32F or UNORM8) and are
// sampled with GL_NEAREST or GL_LINEAR (clamp to edge). u32/i32 tensors (0..255 per channel),
// and images larger than the driver's textures, are read straight from a storage buffer by the
// same fragment shader, which then filters by hand exactly as GL_LINEAR does. The shader
// normalizes (range= for f32, /255 otherwise), applies the colormap to single-channel images
// and writes opaque RGB (alpha is not shown). (A shader reading the storage buffer for every
// image was simpler but ran ~20 ms per 512x512 frame on llvmpipe; the texture path costs less.)
// Device path: a tensor of the OpenGL backend is copied on the device from the backend's own
// buffer into the texture (bound as GL_PIXEL_UNPACK_BUFFER for glTextureSubImage2D), or bound
// as the storage buffer itself: never through host memory. It needs the backend's buffer names
// in the window's context (headless windows draw in the backend's context; windowed ones share it).
// Host path: everything else (NumPy arrays, CPU and Vulkan tensors; GL tensors when the contexts
// cannot share) is uploaded once at show().
// The image is letterboxed: the largest rectangle of the image's aspect that fits, centred.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "window/window_internal.h"

namespace ember::window {

namespace {

// shaders/display.vert, display.frag and colormap.glsl, embedded by CMake (shaders/README.md).
const char* kVertex =
#include "shaders/display.vert.inc"
    ;
const char* kFragment =
#include "shaders/display.frag.inc"
    ;
const char* kColormap =
#include "shaders/colormap.glsl.inc"
    ;

// A shader of one or more source strings (GL concatenates them: display.frag then colormap.glsl).
GLuint compile_shader(GLenum kind, std::initializer_list<const char*> sources) {
  GLuint s = glCreateShader(kind);
  std::vector<const char*> srcs(sources);
  glShaderSource(s, static_cast<GLsizei>(srcs.size()), srcs.data(), nullptr);
  glCompileShader(s);
  GLint ok = 0;
  glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char log[2048] = {};
    glGetShaderInfoLog(s, sizeof log, nullptr, log);
    glDeleteShader(s);
    throw InternalError(std::string("ember: the window's display shader does not compile: ") + log);
  }
  return s;
}

int64_t element_bytes(PixelFormat f) { return f == PixelFormat::u8 ? 1 : 4; }

}  // namespace

const char* pixel_format_name(PixelFormat f) {
  switch (f) {
    case PixelFormat::f32: return "float32";
    case PixelFormat::u8: return "uint8";
    case PixelFormat::u32: return "uint32";
    case PixelFormat::i32: return "int32";
  }
  return "?";
}

Image make_image(const void* data, const std::vector<int64_t>& shape, PixelFormat format, const std::string& what) {
  auto shape_str = [&] {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
  };
  const bool rank_ok = shape.size() == 2 || shape.size() == 3;
  const int64_t c = shape.size() == 3 ? shape[2] : 1;
  if (!rank_ok || !(c == 1 || c == 3 || c == 4))
    throw ShapeError(what + ": expected an image shaped [H, W], [H, W, 1], [H, W, 3] or [H, W, 4], got shape " +
                     shape_str());
  if (shape[0] <= 0 || shape[1] <= 0)
    throw ShapeError(what + ": expected an image with at least one pixel, got shape " + shape_str());
  const int64_t limit = int64_t(1) << 14;
  if (shape[0] > limit || shape[1] > limit)
    throw ShapeError(what + ": an image side is at most " + std::to_string(limit) + " pixels, got shape " + shape_str());
  Image img;
  img.data = data;
  img.height = shape[0];
  img.width = shape[1];
  img.channels = c;
  img.format = format;
  return img;
}

Image image_of(const HostTensor& t) {
  PixelFormat f;
  switch (t.dtype) {
    case DType::f32: f = PixelFormat::f32; break;
    case DType::u32: f = PixelFormat::u32; break;
    case DType::i32: f = PixelFormat::i32; break;
    default:
      throw TypeError(std::string("win.show: expected an f32 tensor (values 0..1 after range=) or u32/i32 (0..255 per "
                                  "channel), got ") + dtype_name(t.dtype));
  }
  Image img = make_image(t.data, t.shape, f, "win.show");
  img.owner = t.owner;
  return img;
}

void WindowImpl::create_gl_objects() {
  GLuint vs = compile_shader(GL_VERTEX_SHADER, {kVertex});
  GLuint fs = compile_shader(GL_FRAGMENT_SHADER, {kFragment, kColormap});
  program = glCreateProgram();
  glAttachShader(program, vs);
  glAttachShader(program, fs);
  glLinkProgram(program);
  glDeleteShader(vs);
  glDeleteShader(fs);
  GLint ok = 0;
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  if (!ok) {
    char log[2048] = {};
    glGetProgramInfoLog(program, sizeof log, nullptr, log);
    throw InternalError(std::string("ember: the window's display program does not link: ") + log);
  }
  glCreateVertexArrays(1, &vao);
  glCreateBuffers(1, &host_ssbo);
  glCreateFramebuffers(1, &fbo);
  ensure_framebuffer();
  gl::check_error("creating the window's GL objects");
}

void WindowImpl::destroy_gl_objects() {
  if (program) glDeleteProgram(program);
  if (vao) glDeleteVertexArrays(1, &vao);
  if (host_ssbo) glDeleteBuffers(1, &host_ssbo);
  if (fbo) glDeleteFramebuffers(1, &fbo);
  if (texture) glDeleteTextures(1, &texture);
  texture = 0;
  if (color_rb) glDeleteRenderbuffers(1, &color_rb);
  program = vao = host_ssbo = fbo = color_rb = 0;
  while (glGetError() != GL_NO_ERROR) {
  }
}

void WindowImpl::ensure_framebuffer() {
  GLint w = 0, h = 0;
  if (color_rb) {
    glGetNamedRenderbufferParameteriv(color_rb, GL_RENDERBUFFER_WIDTH, &w);
    glGetNamedRenderbufferParameteriv(color_rb, GL_RENDERBUFFER_HEIGHT, &h);
  }
  const int want_w = std::max(fb_w, 1), want_h = std::max(fb_h, 1);
  if (color_rb && w == want_w && h == want_h) return;
  if (color_rb) glDeleteRenderbuffers(1, &color_rb);
  glCreateRenderbuffers(1, &color_rb);
  glNamedRenderbufferStorage(color_rb, GL_RGBA8, want_w, want_h);
  glNamedFramebufferRenderbuffer(fbo, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color_rb);
  if (glCheckNamedFramebufferStatus(fbo, GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
    throw BackendError("ember: the window's framebuffer of " + std::to_string(want_w) + "x" + std::to_string(want_h) +
                       " is incomplete");
}

void WindowImpl::upload(const Image& img) {
  gl::Buffer* b = gl::find_buffer(img.data);
  const int64_t bytes = img.height * img.width * img.channels * element_bytes(img.format);
  const bool device = b && (headless || shares_backend) && b->bytes >= bytes;
  GLint max_side = 0;
  glGetIntegerv(GL_MAX_TEXTURE_SIZE, &max_side);
  use_texture = (img.format == PixelFormat::f32 || img.format == PixelFormat::u8) && img.width <= max_side &&
                img.height <= max_side;
  device_buffer = device ? b->name : 0;
  last_upload = device ? "device" : "host";
  // The backend's kernels wrote the buffer through image/storage stores: make those writes
  // visible to the pixel-unpack copy and to the display shader's storage-buffer reads.
  if (device) glMemoryBarrier(GL_PIXEL_BUFFER_BARRIER_BIT | GL_SHADER_STORAGE_BARRIER_BIT);
  if (use_texture) {
    const bool f = img.format == PixelFormat::f32;
    // One-channel u8 is filtered in float (R32F; the upload converts bytes to 0..1): an 8-bit
    // filter result would be quantized before the colormap, which magnifies the step.
    const GLenum internal = img.channels == 1 ? GL_R32F : img.channels == 3 ? (f ? GL_RGB32F : GL_RGB8)
                                                                           : (f ? GL_RGBA32F : GL_RGBA8);
    const GLenum layout = img.channels == 1 ? GL_RED : img.channels == 3 ? GL_RGB : GL_RGBA;
    if (!texture || texture_w != img.width || texture_h != img.height || texture_internal != internal) {
      if (texture) glDeleteTextures(1, &texture);
      glCreateTextures(GL_TEXTURE_2D, 1, &texture);
      glTextureStorage2D(texture, 1, internal, static_cast<GLsizei>(img.width), static_cast<GLsizei>(img.height));
      glTextureParameteri(texture, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
      glTextureParameteri(texture, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
      texture_w = img.width;
      texture_h = img.height;
      texture_internal = internal;
    }
    GLint align = 4;
    glGetIntegerv(GL_UNPACK_ALIGNMENT, &align);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, device ? b->name : 0);
    glTextureSubImage2D(texture, 0, 0, 0, static_cast<GLsizei>(img.width), static_cast<GLsizei>(img.height), layout,
                        f ? GL_FLOAT : GL_UNSIGNED_BYTE, device ? nullptr : img.data);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    glPixelStorei(GL_UNPACK_ALIGNMENT, align);
    gl::check_error("uploading an image to the window's texture");
    return;
  }
  if (device) return;  // the storage-buffer path reads the backend's buffer itself
  const int64_t padded = (bytes + 3) / 4 * 4;
  if (host_ssbo_bytes < padded) {
    glNamedBufferData(host_ssbo, padded, nullptr, GL_STREAM_DRAW);
    host_ssbo_bytes = padded;
  }
  glNamedBufferSubData(host_ssbo, 0, bytes, img.data);
  gl::check_error("uploading an image to the window");
}

ImageRect image_rect(const WindowImpl& w) {
  ImageRect r;
  if (!w.have_image || w.fb_w <= 0 || w.fb_h <= 0) return r;
  const double s = std::min(double(w.fb_w) / double(w.image.width), double(w.fb_h) / double(w.image.height));
  r.w = std::clamp(static_cast<int>(std::lround(w.image.width * s)), 1, w.fb_w);
  r.h = std::clamp(static_cast<int>(std::lround(w.image.height * s)), 1, w.fb_h);
  r.x = (w.fb_w - r.w) / 2;
  r.top = (w.fb_h - r.h) / 2;
  r.valid = true;
  return r;
}

void WindowImpl::draw_image() {
  const ImageRect r = image_rect(*this);
  if (!r.valid) return;
  const std::vector<std::array<float, 3>>& cmap = colormap_points(show_opts.colormap);
  glViewport(r.x, fb_h - r.top - r.h, r.w, r.h);
  glUseProgram(program);
  glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, device_buffer ? device_buffer : host_ssbo);
  glUniform3i(glGetUniformLocation(program, "u_size"), static_cast<GLint>(image.width),
              static_cast<GLint>(image.height), static_cast<GLint>(image.channels));
  glUniform1i(glGetUniformLocation(program, "u_format"), static_cast<GLint>(image.format));
  glUniform4f(glGetUniformLocation(program, "u_rect"), float(r.x), float(fb_h - r.top - r.h), float(r.w), float(r.h));
  glUniform1i(glGetUniformLocation(program, "u_linear"), show_opts.filter == Filter::linear ? 1 : 0);
  glUniform1i(glGetUniformLocation(program, "u_texture"), use_texture ? 1 : 0);
  glUniform1i(glGetUniformLocation(program, "u_tex"), 0);
  if (use_texture) {
    const GLint filt = show_opts.filter == Filter::linear ? GL_LINEAR : GL_NEAREST;
    glTextureParameteri(texture, GL_TEXTURE_MIN_FILTER, filt);
    glTextureParameteri(texture, GL_TEXTURE_MAG_FILTER, filt);
    glBindTextureUnit(0, texture);
  }
  glUniform2f(glGetUniformLocation(program, "u_range"), show_opts.range_lo, show_opts.range_hi);
  glUniform1i(glGetUniformLocation(program, "u_cmap_n"), static_cast<GLint>(cmap.size()));
  glUniform3fv(glGetUniformLocation(program, "u_cmap"), static_cast<GLsizei>(cmap.size()), cmap[0].data());
  glBindVertexArray(vao);
  glDisable(GL_BLEND);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_CULL_FACE);
  glDrawArrays(GL_TRIANGLES, 0, 3);
  glBindVertexArray(0);
  glBindTextureUnit(0, 0);
  glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, 0);
  glUseProgram(0);
  glViewport(0, 0, fb_w, fb_h);
  gl::check_error("drawing the shown image");
}

}  // namespace ember::window
