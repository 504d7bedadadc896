// Capture: the last frame read back from the window's framebuffer object (so headless and
// windowed capture the same pixels), PNG files through Debian's libpng, and recording every
// frame to a PNG sequence or to an MP4 through an ffmpeg process fed raw RGBA on a pipe.
#include <png.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <regex>

#include "window/window_internal.h"

namespace ember::window {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(),
                    [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
}

// The ffmpeg executable on $PATH, or "".
std::string find_ffmpeg() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty()) {
      std::string exe = dir + "/ffmpeg";
      if (::access(exe.c_str(), X_OK) == 0) return exe;
    }
    start = end + 1;
  }
  return "";
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void make_parent_dirs(const std::string& file) {
  fs::path parent = fs::path(file).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw WindowError("ember: cannot create the directory " + parent.string() + ": " + ec.message());
}

// Blocks SIGPIPE on this thread for a scope and discards one raised in it: an ffmpeg that died
// is an error to report, not a signal that ends the process (Python ignores SIGPIPE, C++
// programs do not).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// libpng reports errors by longjmp; this keeps the C++ objects out of the jumped-over frames.
struct PngFile {
  FILE* f = nullptr;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char error[256] = {};
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* pf = static_cast<PngFile*>(png_get_error_ptr(png));
  std::snprintf(pf->error, sizeof pf->error, "%s", msg);
  png_longjmp(png, 1);
}
void on_png_warning(png_structp, png_const_charp) {}

// 0 on success; otherwise pf.error says why.
int png_write_rows(PngFile& pf, const uint8_t* rgba, int w, int h, int compression) {
  if (setjmp(png_jmpbuf(pf.png))) return 1;
  png_init_io(pf.png, pf.f);
  png_set_compression_level(pf.png, compression);
  png_set_IHDR(pf.png, pf.info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8, PNG_COLOR_TYPE_RGBA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(pf.png, pf.info);
  for (int y = 0; y < h; ++y) png_write_row(pf.png, const_cast<png_bytep>(rgba + size_t(y) * size_t(w) * 4));
  png_write_end(pf.png, nullptr);
  return 0;
}

}  // namespace

void write_png(const std::string& path, const uint8_t* rgba, int w, int h, int compression) {
  make_parent_dirs(path);
  PngFile pf;
  pf.f = std::fopen(path.c_str(), "wb");
  if (!pf.f) throw WindowError("ember: cannot write " + path + ": " + std::strerror(errno));
  pf.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &pf, on_png_error, on_png_warning);
  pf.info = pf.png ? png_create_info_struct(pf.png) : nullptr;
  int rc = pf.info ? png_write_rows(pf, rgba, w, h, compression) : 1;
  if (pf.png) png_destroy_write_struct(&pf.png, pf.info ? &pf.info : nullptr);
  const bool closed_ok = std::fclose(pf.f) == 0;
  if (rc != 0 || !closed_ok)
    throw WindowError("ember: cannot write the PNG " + path + ": " +
                      (pf.error[0] ? std::string(pf.error) : std::string(std::strerror(errno))));
}

std::vector<uint8_t> WindowImpl::read_fbo(int* width, int* height) {
  // The FBO keeps the last frame's size until the next draw, even if the window was resized.
  GLint w = 0, h = 0;
  glGetNamedRenderbufferParameteriv(color_rb, GL_RENDERBUFFER_WIDTH, &w);
  glGetNamedRenderbufferParameteriv(color_rb, GL_RENDERBUFFER_HEIGHT, &h);
  *width = w;
  *height = h;
  std::vector<uint8_t> flipped(size_t(w) * size_t(h) * 4);
  GLint align = 4;  // headless, this is the backend's context: its pixel-store state is left as found
  glGetIntegerv(GL_PACK_ALIGNMENT, &align);
  glBindFramebuffer(GL_READ_FRAMEBUFFER, fbo);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, flipped.data());
  glBindFramebuffer(GL_READ_FRAMEBUFFER, 0);
  glPixelStorei(GL_PACK_ALIGNMENT, align);
  gl::check_error("reading back a window frame");
  std::vector<uint8_t> out(flipped.size());
  const size_t row = size_t(w) * 4;
  for (int y = 0; y < h; ++y) std::memcpy(&out[size_t(y) * row], &flipped[size_t(h - 1 - y) * row], row);
  for (size_t i = 3; i < out.size(); i += 4) out[i] = 255;  // frames are opaque
  return out;
}

std::vector<uint8_t> Window::pixels(int* width, int* height) {
  WindowImpl& w = *impl_;
  if (w.closed) {
    if (w.cached_pixels.empty())
      throw WindowError("ember: window \"" + w.opts.title + "\" was closed before any frame was drawn");
    *width = w.cached_w;
    *height = w.cached_h;
    return w.cached_pixels;
  }
  if (w.frames_ended == 0)
    throw WindowError("ember: no frame of window \"" + w.opts.title +
                      "\" has been drawn yet; a frame is drawn by the next win.frame() call");
  Current cur(w);
  return w.read_fbo(width, height);
}

void Window::screenshot(const std::string& path) {
  int w = 0, h = 0;
  std::vector<uint8_t> px = pixels(&w, &h);
  write_png(path, px.data(), w, h, 6);
}

void Window::record(const std::string& path, int fps) {
  WindowImpl& w = *impl_;
  if (w.closed) throw WindowError("ember: record() on a closed window \"" + w.opts.title + "\"");
  if (fps <= 0 || fps > 1000) throw WindowError("ember: record fps must be 1..1000, got " + std::to_string(fps));
  w.finish_recording();
  w.record_index = 0;
  w.record_pattern.clear();
  if (ends_with(path, ".mp4")) {
    const std::string exe = find_ffmpeg();
    if (exe.empty())
      throw WindowError("ember: recording to " + path +
                        " needs ffmpeg on PATH (Debian: apt-get install ffmpeg); record to a directory or a "
                        "'frame_%05d.png' pattern for a PNG sequence instead");
    make_parent_dirs(path);
    const int fw = std::max(w.fb_w, 2) / 2 * 2, fh = std::max(w.fb_h, 2) / 2 * 2;  // yuv420p needs even sides
    const std::string cmd = shell_quote(exe) + " -loglevel error -y -f rawvideo -pix_fmt rgba -s " +
                            std::to_string(fw) + "x" + std::to_string(fh) + " -framerate " + std::to_string(fps) +
                            " -i - -pix_fmt yuv420p " + shell_quote(path);
    w.ffmpeg = ::popen(cmd.c_str(), "w");
    if (!w.ffmpeg) throw WindowError("ember: cannot start ffmpeg for " + path + ": " + std::strerror(errno));
    w.record_w = fw;
    w.record_h = fh;
  } else if (path.find('%') != std::string::npos) {
    static const std::regex one_int("^[^%]*%0?[0-9]*d[^%]*$");
    if (!std::regex_match(path, one_int))
      throw WindowError("ember: a record pattern holds exactly one integer conversion such as %05d, got \"" + path +
                        "\"");
    w.record_pattern = path;
  } else {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec || !fs::is_directory(path))
      throw WindowError("ember: cannot record into the directory " + path + (ec ? ": " + ec.message() : ""));
    w.record_pattern = (fs::path(path) / "frame_%05d.png").string();
  }
  w.recording = true;
}

int64_t Window::stop_recording() {
  WindowImpl& w = *impl_;
  const int64_t n = w.record_index;
  w.finish_recording();
  return n;
}

bool Window::recording() const { return impl_->recording; }

void WindowImpl::capture_frame() {
  if (!recording) return;
  int pw = 0, ph = 0;
  std::vector<uint8_t> px = read_fbo(&pw, &ph);  // inside end_frame's Current
  if (ffmpeg) {
    // Frames keep the size recording started with: crop or pad (black) after a resize.
    std::vector<uint8_t> out(size_t(record_w) * size_t(record_h) * 4, 0);
    const int cw = std::min(record_w, pw), ch = std::min(record_h, ph);
    for (int y = 0; y < ch; ++y)
      std::memcpy(&out[size_t(y) * record_w * 4], &px[size_t(y) * pw * 4], size_t(cw) * 4);
    bool written = false;
    {
      NoSigpipe guard;
      written = std::fwrite(out.data(), 1, out.size(), ffmpeg) == out.size() && std::fflush(ffmpeg) == 0;
    }
    if (!written) {
      finish_recording();
      throw WindowError("ember: ffmpeg stopped taking frames (see its error output above)");
    }
  } else {
    char name[4096];
    std::snprintf(name, sizeof name, record_pattern.c_str(), static_cast<int>(record_index));
    write_png(name, px.data(), pw, ph, 1);
  }
  ++record_index;
}

void WindowImpl::finish_recording() {
  if (ffmpeg) {
    int rc = 0;
    {
      NoSigpipe guard;  // pclose writes what stdio still buffers
      rc = ::pclose(ffmpeg);
    }
    ffmpeg = nullptr;
    recording = false;
    if (rc != 0)
      throw WindowError("ember: ffmpeg failed (" +
                        (rc > 0 && WIFEXITED(rc) ? "exit status " + std::to_string(WEXITSTATUS(rc))
                         : rc > 0 && WIFSIGNALED(rc) ? "killed by signal " + std::to_string(WTERMSIG(rc))
                                                     : "pclose returned " + std::to_string(rc)) +
                        ")");
  }
  recording = false;
}

}  // namespace ember::window
