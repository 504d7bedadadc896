// The window runtime from C++ (window/window.h, window/ui.h): a headless window shows an f32
// image through a colormap and reads back the expected colours; image checks name expected vs
// actual; ui calls outside a frame throw WindowError; scripted key input. Skips without OpenGL.
#ifdef EMBER_WITH_WINDOW
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "backends/opengl/opengl.h"
#include "window/ui.h"
#include "window/window.h"

namespace ember::window {
namespace {

#define SKIP_WITHOUT_OPENGL()                                                   \
  do {                                                                          \
    std::string why = gl::unavailable_reason();                                 \
    if (!why.empty()) GTEST_SKIP() << "OpenGL unavailable: " << why;            \
  } while (0)

WindowOptions headless(int w, int h) {
  WindowOptions o;
  o.width = w;
  o.height = h;
  o.title = "cpp";
  o.headless = true;
  o.overlay = false;
  return o;
}

TEST(Window, ShowsAColormappedImage) {
  SKIP_WITHOUT_OPENGL();
  Window win(headless(8, 4));
  std::vector<float> img = {0.f, 0.25f, 0.5f, 1.f, 1.f, 0.5f, 0.25f, 0.f};  // 2x4
  ShowOptions opts;
  opts.colormap = "viridis";
  ASSERT_TRUE(win.frame());
  win.show(make_image(img.data(), {2, 4}, PixelFormat::f32, "test"), opts);
  ASSERT_TRUE(win.frame());
  EXPECT_EQ(win.last_upload(), "host");
  int w = 0, h = 0;
  std::vector<uint8_t> px = win.pixels(&w, &h);
  ASSERT_EQ(w, 8);
  ASSERT_EQ(h, 4);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 8; ++x) {
      const float v = img[size_t(y / 2) * 4 + size_t(x / 2)];
      const auto c = colormap_color("viridis", v);
      for (int k = 0; k < 3; ++k)
        EXPECT_NEAR(px[(size_t(y) * 8 + size_t(x)) * 4 + size_t(k)], std::lround(c[k] * 255), 2) << x << "," << y;
    }
}

TEST(Window, ImageChecksNameExpectedAndActual) {
  float x = 0;
  try {
    make_image(&x, {4, 5, 2}, PixelFormat::f32, "show");
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("got shape (4, 5, 2)"), std::string::npos) << e.what();
  }
  HostTensor t;
  t.dtype = DType::boolean;
  t.shape = {2, 2};
  t.data = reinterpret_cast<uint32_t*>(&x);
  EXPECT_THROW(image_of(t), TypeError);
}

TEST(Window, UiOutsideAFrameThrows) {
  EXPECT_THROW(ui::button("b"), WindowError);
  EXPECT_THROW(ui::end(), WindowError);
}

TEST(Window, InjectedKeysAndWidgets) {
  SKIP_WITHOUT_OPENGL();
  Window win(headless(64, 64));
  ASSERT_TRUE(win.frame());
  win.inject_key("SPACE", true);
  ASSERT_TRUE(win.frame());
  EXPECT_TRUE(win.key_pressed("SPACE"));
  EXPECT_TRUE(win.key_down("space"));
  EXPECT_TRUE(ui::begin("w", 0, 0, 60, 60));
  EXPECT_FLOAT_EQ(ui::slider_float("s", 0.5f, 0.f, 1.f), 0.5f);
  ui::end();
  ASSERT_TRUE(win.frame());
  EXPECT_FALSE(win.key_pressed("SPACE"));
  EXPECT_THROW(win.key_down("NOT_A_KEY"), WindowError);
}

// Headless windows draw and read back in the OpenGL backend's own context: the pixel-store and
// binding state the backend sees afterwards is what it was before.
TEST(Window, LeavesTheBackendContextsPixelStoreState) {
  SKIP_WITHOUT_OPENGL();
  Window win(headless(16, 8));
  {
    gl::Scope s;
    glPixelStorei(GL_PACK_ALIGNMENT, 2);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 8);
  }
  std::vector<uint8_t> img(size_t(5) * 3 * 3, 200);  // rows of 15 bytes: unaligned
  ASSERT_TRUE(win.frame());
  win.show(make_image(img.data(), {5, 3, 3}, PixelFormat::u8, "test"), ShowOptions());
  ASSERT_TRUE(win.frame());
  int w = 0, h = 0;
  std::vector<uint8_t> px = win.pixels(&w, &h);
  ASSERT_EQ(px.size(), size_t(16) * 8 * 4);
  EXPECT_EQ(px[(size_t(4) * 16 + 8) * 4], 200);
  gl::Scope s;
  GLint pack = 0, unpack = 0, read_fb = -1, unpack_buf = -1, program = -1;
  glGetIntegerv(GL_PACK_ALIGNMENT, &pack);
  glGetIntegerv(GL_UNPACK_ALIGNMENT, &unpack);
  glGetIntegerv(GL_READ_FRAMEBUFFER_BINDING, &read_fb);
  glGetIntegerv(GL_PIXEL_UNPACK_BUFFER_BINDING, &unpack_buf);
  glGetIntegerv(GL_CURRENT_PROGRAM, &program);
  EXPECT_EQ(pack, 2);
  EXPECT_EQ(unpack, 8);
  EXPECT_EQ(read_fb, 0);
  EXPECT_EQ(unpack_buf, 0);
  EXPECT_EQ(program, 0);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
}

// An ffmpeg that exits at once: the next frame's write hits a closed pipe. That must be a
// WindowError, not SIGPIPE ending the process (Python ignores SIGPIPE; C++ programs do not).
TEST(Window, RecordingToAnFfmpegThatExitedThrows) {
  SKIP_WITHOUT_OPENGL();
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ember-test-ffmpeg-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "ffmpeg");
    f << "#!/bin/sh\nexit 3\n";
  }
  ::chmod((dir / "ffmpeg").c_str(), 0755);
  const char* old = std::getenv("PATH");
  const std::string old_path = old ? old : "";
  ::setenv("PATH", (dir.string() + ":" + old_path).c_str(), 1);
  Window win(headless(256, 256));  // frames larger than a pipe's buffer
  win.record((dir / "out.mp4").string(), 30);
  ::setenv("PATH", old_path.c_str(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the fake ffmpeg has exited
  ASSERT_TRUE(win.frame());
  try {
    win.frame();
    FAIL() << "no error";
  } catch (const WindowError& e) {
    EXPECT_NE(std::string(e.what()).find("ffmpeg"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(win.recording());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember::window
#endif
