// The OpenGL backend's own concerns (the shared programs, every op, atomics, large grids, params
// and host loops run on "opengl" in test_codegen_vulkan.cpp): the shared programs with memories
// past the storage-buffer limit in the arena, a kernel with more buffers than the driver binds,
// program binaries in the disk cache (and nothing cached when turned off or unsupported), the
// device description, and GL errors staying clear. Skipped, with the reason, where no GL 4.5
// context can be created.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/backend.h"
#include "backends/compile_cache.h"
#include "core/interp/interp.h"
#include "core/ir/builder.h"
#include "core/passes/pipeline.h"
#include "core/passes/split_host.h"
#include "programs.h"
#ifdef EMBER_WITH_OPENGL
#include "backends/opengl/opengl.h"
#endif

namespace ember {
namespace {

namespace fs = std::filesystem;

class OpenGL : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = backend_unavailable("opengl");
    if (!why.empty()) GTEST_SKIP() << "opengl unavailable: " << why;
    char tmpl[] = "/tmp/ember-gl-test-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
    memory_cache_clear();
  }
  void TearDown() override {
    unsetenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS");
    unsetenv("EMBER_OPENGL_PROGRAM_BINARY");
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // Files in the cache directory with extension `ext`.
  int cache_files(const std::string& ext) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().extension() == ext;
    return n;
  }
  // Compiles every shared program; true when every kernel came from a cache.
  bool compile_all() {
    bool hit = true;
    for (const testing::TestProgram& tp : programs()) {
      std::unique_ptr<Program> p = tp.build();
      run_pipeline(*p);
      CompileInfo info;
      make_backend("opengl")->compile(*p, info);
      hit &= info.cache_hit;
    }
    return hit;
  }
  static std::vector<testing::TestProgram> programs() {
    std::vector<testing::TestProgram> v = testing::test_programs();
    v.push_back({"bitonic_sort", testing::bitonic_sort, -1});
    return v;
  }
  std::string dir_;
};

// Every shared program with at most 2 storage buffers per shader: every kernel with more than
// two memories keeps all of them in the arena (copied in, bound as two views, copied back), and
// results still match.
TEST_F(OpenGL, ArenaMemoriesMatchTheInterpreter) {
  setenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS", "2", 1);
  int spilled = 0;
  for (const testing::TestProgram& tp : programs()) {
    SCOPED_TRACE(tp.name);
    std::unique_ptr<Program> p = tp.build();
    run_pipeline(*p);
    auto backend = make_backend("opengl");
    spilled += backend->source(*p, {}).find("ember_arena_u") != std::string::npos;
    CompileInfo info;
    auto runner = backend->compile(*p, info);
    std::mt19937 rng(7);
    for (int64_t sym : {5, 300}) {
      std::vector<ArgValue> args = testing::random_args(*p, rng, sym);
      std::vector<HostTensor> want = interpret(*p, testing::copy_args(args));
      std::vector<HostTensor> got = interpret(*p, testing::copy_args(args), runner.get());
      EXPECT_EQ(testing::compare(want, got, 1e-5), "") << tp.name << " with N = " << sym;
    }
  }
  EXPECT_GE(spilled, 3);
}

// A kernel that writes 40 outputs: more buffers than llvmpipe (16) or most GPUs bind.
TEST_F(OpenGL, KernelWithMoreBuffersThanTheDriverBinds) {
  Program p;
  Builder b(p);
  Shape s{b.shape_arg("N")};
  Node* X = b.input(DType::i32, s, 0, "x");
  std::vector<Node*> outs;
  for (int k = 0; k < 40; ++k) outs.push_back(b.buffer(k % 2 ? DType::i32 : DType::f32, s, false));
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  Node* x = b.load(X, {i}, s, IndexMode::unsafe);
  x->flat = true;
  for (int k = 0; k < 40; ++k) {
    Node* v = b.binary(Op::add, b.binary(Op::mul, x, b.i32(k)), i);
    b.store(outs[static_cast<size_t>(k)], k % 2 ? v : b.cast(v, DType::f32), {i}, s, IndexMode::unsafe)->flat = true;
  }
  b.set_insert_end(p.root());
  for (int k = 0; k < 40; ++k) b.output(outs[static_cast<size_t>(k)], k);
  split_host(p);
  CompileInfo info;
  auto runner = make_backend("opengl")->compile(p, info);
  HostTensor x0 = HostTensor::alloc(DType::i32, {1000}, false);
  for (int64_t k = 0; k < 1000; ++k) x0.data[k] = i2w(static_cast<int32_t>(k % 13 - 6));
  std::vector<HostTensor> want = interpret(p, {ArgValue::of_tensor(x0)});
  std::vector<HostTensor> got = interpret(p, {ArgValue::of_tensor(x0)}, runner.get());
  EXPECT_EQ(testing::compare(want, got, 0), "");
}

#ifdef EMBER_WITH_OPENGL
// Linked programs go to the disk cache as program binaries (when the driver has a format): a
// cleared memory cache then loads every kernel from disk. With binaries turned off, as on a
// driver with no binary format, nothing is written and nothing hits.
TEST_F(OpenGL, ProgramBinariesInTheDiskCache) {
  if (gl::context().binary_formats == 0) {
    EXPECT_FALSE(gl::program_binaries());
  } else {
    EXPECT_TRUE(gl::program_binaries());
    EXPECT_FALSE(compile_all());
    EXPECT_GT(cache_files(".glbin"), 5);
    EXPECT_EQ(cache_files(".glbin"), cache_files(".glsl"));
    memory_cache_clear();
    EXPECT_TRUE(compile_all()) << "every program from the disk cache";
    // A corrupt binary is rebuilt, never trusted.
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".glbin") fs::resize_file(e.path(), 20);
    memory_cache_clear();
    EXPECT_FALSE(compile_all());
    memory_cache_clear();
    EXPECT_TRUE(compile_all());
    for (const auto& e : fs::directory_iterator(dir_)) fs::remove_all(e.path());
  }
  setenv("EMBER_OPENGL_PROGRAM_BINARY", "0", 1);
  memory_cache_clear();
  EXPECT_FALSE(gl::program_binaries());
  EXPECT_FALSE(compile_all());
  EXPECT_EQ(cache_files(".glbin"), 0);
  EXPECT_EQ(cache_files(".glsl"), 0);
  memory_cache_clear();
  EXPECT_FALSE(compile_all()) << "nothing on disk to hit";
  EXPECT_TRUE(compile_all()) << "the memory cache still serves this process";
}

TEST_F(OpenGL, DeviceInfoNamesTheRenderer) {
  const std::string info = device_info("opengl");
  EXPECT_EQ(info.find(gl::context().renderer), 0u) << info;
  EXPECT_NE(info.find(" via OpenGL 4."), std::string::npos) << info;
  EXPECT_TRUE(info.find("EGL surfaceless") != std::string::npos || info.find("GLFW hidden window") != std::string::npos)
      << info;
  EXPECT_GE(gl::context().max_storage_blocks, 8);
  std::vector<std::string> built = built_backends();
  EXPECT_NE(std::find(built.begin(), built.end(), "opengl"), built.end());
  EXPECT_EQ(resolve_backend("opengl"), "opengl");
}

// A shader the driver rejects is a CompileError naming the driver and the saved source.
TEST_F(OpenGL, DriverCompileErrorIsACompileError) {
  gl::Scope scope;
  gl::ProgramSource from;
  try {
    gl::compile_program("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undeclared = 1; }\n", &from);
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to compile"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".glsl"), std::string::npos) << e.what();
  }
  EXPECT_EQ(glGetError(), static_cast<GLenum>(GL_NO_ERROR));
}
#endif

}  // namespace
}  // namespace ember
