// The glsl and hlsl dialects and the Vulkan and OpenGL backends against the reference
// interpreter: the shared test programs (tests/cpp/programs.h) on "vulkan", "vulkan-hlsl" and
// "opengl" (tests/cpp/test_codegen_opengl.cpp has the OpenGL-only tests), every elementwise
// op and conversion with edge values, atomics (native float add and the compare-and-swap
// lowering), dispatches larger than one grid row, more params than push constants hold, host
// loops with many dispatches, and every generated kernel through glslangValidator. The suite
// runs with the Khronos validation layer on when it is installed and expects no message from
// it. Skipped, with the reason, where there is no Vulkan device.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "codegen/c_printer.h"
#include "core/interp/interp.h"
#include "core/ir/builder.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
#include "core/passes/split_host.h"
#include "codegen_test_helpers.h"
#include "programs.h"
#ifdef EMBER_WITH_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef EMBER_WITH_OPENGL
#include "backends/opengl/opengl.h"
#endif

namespace ember {
namespace {

namespace fs = std::filesystem;

using namespace codegen_test;

// Whether a float result matches: bit for bit (exact), or within `rel` (NaN matches NaN, an
// infinity itself).
bool float_close(uint32_t want, uint32_t got, double rel) {
  if (want == got) return true;
  float a = w2f(want), b = w2f(got);
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(static_cast<double>(a) - b) <= rel * std::max(1.0, std::fabs(static_cast<double>(a)));
}

class CodegenVulkan : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/ember-vk-test-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
    if (!std::getenv("EMBER_VULKAN_VALIDATION")) setenv("EMBER_VULKAN_VALIDATION", "1", 1);
    if (!std::getenv("XDG_RUNTIME_DIR")) {
      std::string xdg = dir_ + "/xdg";
      fs::create_directories(xdg);
      fs::permissions(xdg, fs::perms::owner_all, fs::perm_options::replace);
      setenv("XDG_RUNTIME_DIR", xdg.c_str(), 1);
    }
  }
  static void TearDownTestSuite() {
    if (std::getenv("EMBER_KEEP_TEST_CACHE")) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    std::string why = backend_unavailable(GetParam());
    if (!why.empty()) GTEST_SKIP() << GetParam() << " unavailable: " << why;
#ifdef EMBER_WITH_VULKAN
    errors_before_ = vk::validation_errors();
#endif
  }
  void TearDown() override {
#ifdef EMBER_WITH_VULKAN
    if (!::testing::Test::IsSkipped()) {
      EXPECT_EQ(vk::validation_errors(), errors_before_) << "Vulkan validation errors (see stderr)";
    }
#endif
  }

 public:
  // Runs `p` on the backend and in the interpreter; integer/bool outputs must match exactly,
  // float outputs within rel[o] (0: bit for bit). Returns the backend's outputs.
  std::vector<HostTensor> run_both(const Program& p, const std::vector<ArgValue>& args, const std::vector<double>& rel,
                                   const std::vector<std::string>& names = {}) {
    auto backend = make_backend(GetParam());
    CompileInfo info;
    auto runner = backend->compile(p, info);
    std::vector<HostTensor> got = interpret(p, deep_copy(args), runner.get());
    std::vector<HostTensor> want = interpret(p, deep_copy(args));
    EXPECT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size() && o < want.size(); ++o) {
      std::string name = o < names.size() ? names[o] : "output " + std::to_string(o);
      EXPECT_EQ(got[o].shape, want[o].shape) << name;
      if (got[o].shape != want[o].shape) continue;
      const double r = o < rel.size() ? rel[o] : 0.0;
      int bad = 0;
      for (int64_t k = 0; k < got[o].size() && bad < 3; ++k) {
        const uint32_t g = got[o].data[k], w = want[o].data[k];
        bool ok = want[o].dtype == DType::f32 ? (r == 0 ? g == w || (std::isnan(w2f(g)) && std::isnan(w2f(w))) : float_close(w, g, r))
                                              : g == w;
        if (!ok) {
          ++bad;
          ADD_FAILURE() << name << "[" << k << "]: " << GetParam() << " " << word_str(g, want[o].dtype) << " (0x" << std::hex
                        << g << "), interpreter " << word_str(w, want[o].dtype) << " (0x" << w << std::dec << ")";
        }
      }
    }
    return got;
  }

 protected:
  static std::string dir_;
  int errors_before_ = 0;
};
std::string CodegenVulkan::dir_;

const float kNaN = std::nanf(""), kInf = INFINITY;

// Float ops a GPU computes exactly (IEEE or exactly specified by the helpers): compared bit for
// bit; the others (transcendentals, division, sqrt, pow) within a relative tolerance.
bool exact_float_op(Op op) {
  switch (op) {
    case Op::neg: case Op::lnot: case Op::abs: case Op::sign: case Op::floor: case Op::ceil: case Op::round:
    case Op::trunc: case Op::frac: case Op::isnan: case Op::isinf: case Op::add: case Op::sub: case Op::mul:
    case Op::min: case Op::max: case Op::eq: case Op::ne: case Op::lt: case Op::le: case Op::gt: case Op::ge:
    case Op::land: case Op::lor: return true;
    default: return false;
  }
}

// Every op defined on t, in kernels of at most 12 outputs (devices bind few buffers per shader).
void check_all_ops(CodegenVulkan* self, DType t, bool exact_only, const std::vector<uint32_t>& ea,
                   const std::vector<uint32_t>& eb, float range, double rel) {
  std::vector<Op> ops;
  for (int o = 0; o < kOpCount; ++o) {
    Op op = static_cast<Op>(o);
    if (defined_on(op, t) && (t != DType::f32 || exact_float_op(op) == exact_only)) ops.push_back(op);
  }
  for (size_t first = 0; first < ops.size(); first += 12) {
    std::vector<Op> chunk(ops.begin() + static_cast<long>(first), ops.begin() + static_cast<long>(std::min(ops.size(), first + 12)));
    Program p;
    ops_program(p, t, chunk);
    std::vector<std::string> names;
    std::vector<double> rels;
    for (Op op : chunk) {
      names.push_back(std::string(op_name(op)) + " " + dtype_name(t));
      rels.push_back(exact_only ? 0.0 : rel);
    }
    self->run_both(p, {ArgValue::of_tensor(random_tensor(t, {5000}, 1, ea, range)),
                       ArgValue::of_tensor(random_tensor(t, {5000}, 2, eb, range))},
                   rels, names);
  }
}

std::vector<uint32_t> fw(std::initializer_list<float> v) {
  std::vector<uint32_t> w;
  for (float x : v) w.push_back(f2w(x));
  return w;
}

TEST_P(CodegenVulkan, ExactFloatOps) {
  check_all_ops(this, DType::f32, true,
                fw({kNaN, kInf, -kInf, -0.0f, 0.5f, -0.5f, 2.5f, -2.5f, 1e30f, -1e-30f, 3.0f, 1.0f, 7.0f, 0.0f, kNaN}),
                fw({1.0f, kNaN, 2.0f, 0.0f, -0.0f, 0.5f, 0.0f, -1.0f, 1e-30f, 3.0f, kNaN, -kInf, 0.0f, -0.0f, -3.0f}), 8, 0);
}

TEST_P(CodegenVulkan, FloatMathOps) {
  // Transcendentals, division, sqrt, pow and mod on in-domain values and the edges whose results
  // are exactly specified (NaN, infinities, zero); within 2e-6 relative.
  check_all_ops(this, DType::f32, false,
                fw({kNaN, kInf, -kInf, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -2.0f, 4.0f, 0.25f}),
                fw({2.0f, 1.0f, 0.5f, 0.0f, 2.0f, -3.0f, 3.0f, kNaN, 0.0f, 3.0f, -0.5f, 0.0f}), 3, 2e-6);
}

TEST_P(CodegenVulkan, IntegerOps) {
  check_all_ops(this, DType::i32, true,
                {i2w(INT_MIN), i2w(INT_MIN), i2w(INT_MAX), i2w(-7), i2w(7), i2w(-7), i2w(7), 0, i2w(5), i2w(-1), i2w(1), i2w(40), i2w(-3)},
                {i2w(-1), i2w(2), i2w(-1), i2w(2), i2w(-2), i2w(-2), i2w(0), i2w(3), i2w(0), i2w(33), i2w(32), i2w(-1), i2w(31)}, 8, 0);
  check_all_ops(this, DType::u32, true, {0xffffffffu, 0x80000000u, 7u, 0u, 5u, 1u, 12u},
                {0u, 2u, 0xffffffffu, 3u, 32u, 31u, 40u}, 8, 0);
  check_all_ops(this, DType::boolean, true, {0, 0, 1, 1}, {0, 1, 0, 1}, 8, 0);
}

TEST_P(CodegenVulkan, CastsBitcastsSelectAndParams) {
  Program p;
  casts_program(p);
  std::vector<ArgValue> args = {
      ArgValue::of_tensor(random_tensor(DType::f32, {3000}, 3, fw({kNaN, kInf, -kInf, 3e9f, -3e9f, 5e9f, -0.7f, 2.5f, -0.0f}))),
      ArgValue::of_tensor(random_tensor(DType::i32, {3000}, 4, {i2w(INT_MIN), i2w(INT_MAX), i2w(-1)})),
      ArgValue::of_tensor(random_tensor(DType::u32, {3000}, 5, {0xffffffffu, 0x7fc00000u, 0x80000000u})),
      ArgValue::of_tensor(random_tensor(DType::boolean, {3000}, 6)),
      ArgValue::of_word(f2w(0.25f)), ArgValue::of_word(i2w(-17)), ArgValue::of_word(0x5au), ArgValue::of_word(1)};
  run_both(p, args, {});
}

// Atomics of every kind and dtype on shared bins, native float add (GLSL on devices that have
// it) and the compare-and-swap lowering, plus the old value of an atomic add.
void atomics_program(Program& p) {
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::i32, {N}, 0, "x");
  Node* Y = b.input(DType::f32, {N}, 1, "y");
  Shape s1{N};
  std::vector<Node*> bins;
  const std::pair<AtomicKind, DType> kinds[] = {
      {AtomicKind::add, DType::i32}, {AtomicKind::add, DType::f32}, {AtomicKind::min, DType::f32},
      {AtomicKind::max, DType::f32}, {AtomicKind::bor, DType::u32}, {AtomicKind::bor, DType::boolean},
      {AtomicKind::max, DType::i32}, {AtomicKind::min, DType::i32}, {AtomicKind::bxor, DType::u32},
      {AtomicKind::band, DType::boolean}, {AtomicKind::min, DType::u32}};
  for (auto& k : kinds) bins.push_back(b.buffer(k.second, {b.i32(16)}, true));
  Node* counter = b.buffer(DType::u32, {b.i32(1)}, true);
  Node* slots = b.buffer(DType::u32, s1, false);
  b.set_insert_end(b.kernel(s1));
  Node* i = b.index(0, s1);
  Node* x = ld(b, X, i, s1);
  Node* bin = b.binary(Op::mod, x, b.i32(16));
  Node* y = ld(b, Y, i, s1);
  for (size_t k = 0; k < bins.size(); ++k) {
    DType t = kinds[k].second;
    Node* v = t == DType::f32 ? (kinds[k].first == AtomicKind::add ? b.unary(Op::floor, y) : y)
              : t == DType::i32 ? x
              : t == DType::u32 ? b.binary(Op::shl, b.u32(1), b.cast(b.binary(Op::mod, i, b.i32(32)), DType::u32))
                                : b.binary(Op::gt, y, b.f32(kinds[k].first == AtomicKind::band ? -7.9f : 7.5f));
    at(b, kinds[k].first, bins[k], bin, v, s1);
  }
  st(b, slots, i, at(b, AtomicKind::add, counter, b.i32(0), b.u32(1), s1), s1);
  b.set_insert_end(p.root());
  int slot = 0;
  for (Node* m : bins) b.output(m, slot++);
  b.output(counter, slot++);
  b.output(slots, slot++);
  finish(p);
}

TEST_P(CodegenVulkan, Atomics) {
  for (const char* no_native : {"0", "1"}) {
    SCOPED_TRACE(std::string("EMBER_VULKAN_NO_FLOAT_ATOMICS=") + no_native);
    setenv("EMBER_VULKAN_NO_FLOAT_ATOMICS", no_native, 1);
    setenv("EMBER_OPENGL_NO_FLOAT_ATOMICS", no_native, 1);
    Program p;
    atomics_program(p);
    const int64_t n = 20000;
    std::vector<ArgValue> args = {ArgValue::of_tensor(random_tensor(DType::i32, {n}, 8)),
                                  ArgValue::of_tensor(random_tensor(DType::f32, {n}, 9))};
    auto backend = make_backend(GetParam());
    CompileInfo info;
    auto runner = backend->compile(p, info);
    if (GetParam() != "vulkan-hlsl" && std::strcmp(no_native, "1") == 0) {
      EXPECT_NE(backend->source(p, {}).find("atomicCompSwap"), std::string::npos);
    }
    std::vector<HostTensor> got = interpret(p, deep_copy(args), runner.get());
    std::vector<HostTensor> want = interpret(p, deep_copy(args));
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o + 1 < got.size(); ++o)  // bins (float adds of integers are exact) and the counter
      for (int64_t k = 0; k < want[o].size(); ++k)
        EXPECT_EQ(got[o].data[k], want[o].data[k]) << "output " << o << "[" << k << "]";
    std::vector<uint32_t> slots(got.back().data, got.back().data + n);  // distinct old values
    std::sort(slots.begin(), slots.end());
    for (uint32_t k = 0; k < n; ++k) ASSERT_EQ(slots[k], k);
  }
  unsetenv("EMBER_VULKAN_NO_FLOAT_ATOMICS");
  unsetenv("EMBER_OPENGL_NO_FLOAT_ATOMICS");
}

// More threads than one grid row of groups (65535 x 64 on most devices): a 2-D grid.
TEST_P(CodegenVulkan, DispatchLargerThanOneGridRow) {
  Program p;
  Builder b(p);
  Shape s{b.shape_arg("N")};
  Node* X = b.input(DType::i32, s, 0, "x");
  Node* out = b.buffer(DType::i32, s, false);
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  st(b, out, i, b.binary(Op::add, b.binary(Op::mul, i, b.i32(3)), ld(b, X, i, s)), s);
  b.set_insert_end(p.root());
  b.output(out, 0);
  finish(p);
  const int64_t n = 65535LL * 64 + 4099;
  HostTensor x = HostTensor::alloc(DType::i32, {n}, false);
  for (int64_t k = 0; k < n; ++k) x.data[k] = i2w(static_cast<int32_t>(k % 7));
  CompileInfo info;
  auto runner = make_backend(GetParam())->compile(p, info);
  std::vector<HostTensor> got = interpret(p, {ArgValue::of_tensor(x)}, runner.get());
  int64_t bad = 0;
  for (int64_t k = 0; k < n; ++k) bad += w2i(got[0].data[k]) != static_cast<int32_t>(3 * k + k % 7);
  EXPECT_EQ(bad, 0);
}

// 40 scalar params: more than push constants hold (128 bytes on many devices), so they travel
// in a buffer; the same kernel with 3 params uses push constants.
TEST_P(CodegenVulkan, ManyParams) {
  for (int nparams : {3, 40}) {
    Program p;
    Builder b(p);
    Shape s{b.shape_arg("N")};
    Node* X = b.input(DType::f32, s, 0, "x");
    std::vector<Node*> ps;
    for (int k = 0; k < nparams; ++k)
      ps.push_back(b.scalar_arg(k % 2 ? DType::f32 : DType::i32, k + 1, "s" + std::to_string(k)));
    Node* out = b.buffer(DType::f32, s, false);
    b.set_insert_end(b.kernel(s));
    Node* i = b.index(0, s);
    Node* acc = ld(b, X, i, s);
    for (int k = 0; k < nparams; ++k)
      acc = b.binary(Op::add, b.binary(Op::mul, acc, b.f32(0.5f)),
                     ps[static_cast<size_t>(k)]->dtype == DType::f32 ? ps[static_cast<size_t>(k)] : b.cast(ps[static_cast<size_t>(k)], DType::f32));
    st(b, out, i, acc, s);
    b.set_insert_end(p.root());
    b.output(out, 0);
    finish(p);
    std::vector<ArgValue> args = {ArgValue::of_tensor(random_tensor(DType::f32, {777}, 3))};
    for (int k = 0; k < nparams; ++k) args.push_back(ArgValue::of_word(k % 2 ? f2w(0.25f * k) : i2w(k - 20)));
    run_both(p, args, {0.0});
  }
}

// The shared traced programs through the whole pipeline.
struct ProgramCase {
  std::string backend;
  testing::TestProgram program;
};
class VulkanPipeline : public CodegenVulkan {};

std::vector<testing::TestProgram> all_programs() {
  std::vector<testing::TestProgram> v = testing::test_programs();
  v.push_back({"bitonic_sort", testing::bitonic_sort, -1});
  return v;
}

TEST_P(VulkanPipeline, SharedProgramsMatchTheInterpreter) {
  for (const testing::TestProgram& tp : all_programs()) {
    SCOPED_TRACE(tp.name);
    std::unique_ptr<Program> p = tp.build();
    run_pipeline(*p);
    std::mt19937 rng(5);
    auto backend = make_backend(GetParam());
    CompileInfo info;
    auto runner = backend->compile(*p, info);
    for (int64_t sym : {6, 37, 300}) {
      std::vector<ArgValue> args = testing::random_args(*p, rng, sym);
      std::vector<HostTensor> want = interpret(*p, deep_copy(args));
      std::vector<HostTensor> got = interpret(*p, deep_copy(args), runner.get());
      EXPECT_EQ(testing::compare(want, got, 1e-5), "") << tp.name << " on " << GetParam() << " with N = " << sym;
    }
  }
}

// Every kernel the shared programs generate passes an offline compiler: the OpenGL 4.5 variant
// through glslangValidator as GL GLSL, the Vulkan GLSL through glslc (shaderc's compiler, Vulkan
// rules, each file its own module), HLSL through glslangValidator with -D and its entry point.
// GLSL files go to one process per batch (each file is compiled and reported apart, under its
// name): a glslang process spends ~200 ms setting up before its first shader.
TEST_P(VulkanPipeline, EveryKernelPassesGlslangValidator) {
  if (std::system("command -v glslangValidator > /dev/null 2>&1") != 0) GTEST_SKIP() << "glslangValidator is not installed";
  const bool have_glslc = std::system("command -v glslc > /dev/null 2>&1") == 0;
  // `tool` over `files` (in dir_), output and errors into one log, expected to succeed.
  auto validate = [&](const std::string& tool, const std::vector<std::string>& files, const std::string& what) {
    if (files.empty()) return;
    std::string cmd = "cd " + dir_ + " && " + tool;
    for (const std::string& f : files) cmd += " " + f;
    const std::string log_path = dir_ + "/validate.log";
    int rc = std::system((cmd + " > " + log_path + " 2>&1").c_str());
    std::ifstream f(log_path);
    std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << what << " (" << files.size() << " files):\n" << log;
  };
  if (GetParam() == "opengl") {
    // The shaders exactly as the OpenGL backend hands them to the driver; with a limit of 2
    // storage buffers, kernels with more memories also go through the arena rewrite.
    std::vector<std::string> files;
    auto backend = make_backend("opengl");
    for (const char* limit : {"", "2"}) {
      setenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS", limit, 1);
      for (const testing::TestProgram& tp : all_programs()) {
        std::unique_ptr<Program> p = tp.build();
        run_pipeline(*p);
        const std::string all = backend->source(*p, {}), mark = "// Generated by Ember";
        for (size_t at = all.find(mark); at != std::string::npos;) {
          size_t next = all.find(mark, at + mark.size());
          std::string shader = all.substr(at, next == std::string::npos ? std::string::npos : next - at);
          files.push_back(tp.name + "_" + std::to_string(files.size()) + (*limit ? "_arena" : "") + ".gl.comp");
          std::ofstream(dir_ + "/" + files.back()) << shader;
          at = next;
        }
      }
    }
    unsetenv("EMBER_OPENGL_MAX_STORAGE_BUFFERS");
    validate("glslangValidator", files, "OpenGL shaders");
    EXPECT_GT(files.size(), 20u);
    return;
  }
  const bool hlsl = GetParam() == "vulkan-hlsl";
  GlslOptions gl;
  gl.opengl = true;
  std::vector<std::string> vulkan_glsl, opengl_glsl;
  int checked = 0;
  for (const testing::TestProgram& tp : all_programs()) {
    std::unique_ptr<Program> p = tp.build();
    run_pipeline(*p);
    if (hlsl) {
      for (const GeneratedKernel& k : generate_kernel_list(*p, hlsl_dialect())) {
        const std::string file = k.symbol + ".hlsl";
        std::ofstream(dir_ + "/" + file) << hlsl_dialect().comment << k.symbol << "\n"
                                         << unit_prelude(hlsl_dialect(), {&k.source}) << "\n" << k.source;
        // One process per file: the entry point is the kernel's own symbol.
        validate("glslangValidator -V -D -S comp -e " + k.symbol + " -o " + file + ".spv", {file}, tp.name + " " + file);
        ++checked;
      }
      continue;
    }
    for (const Dialect* d : {&glsl_dialect(), &glsl_dialect(gl)})
      for (const GeneratedKernel& k : generate_kernel_list(*p, *d)) {
        const bool vk = d == &glsl_dialect();
        std::vector<std::string>& files = vk ? vulkan_glsl : opengl_glsl;
        files.push_back(k.symbol + (vk ? ".comp" : ".gl.comp"));
        std::ofstream(dir_ + "/" + files.back()) << d->comment << k.symbol << "\n" << unit_prelude(*d, {&k.source})
                                                 << "\n" << k.source;
        ++checked;
      }
  }
  if (!hlsl) {
    // glslc -c writes each file's SPIR-V beside it; without glslc, glslangValidator -V one by one
    // (given several files of one stage, -V links them into one module).
    if (have_glslc) {
      validate("glslc -c", vulkan_glsl, "Vulkan GLSL");
    } else {
      for (const std::string& f : vulkan_glsl) validate("glslangValidator -V -o " + f + ".spv", {f}, f);
    }
    validate("glslangValidator", opengl_glsl, "OpenGL GLSL");
  }
  EXPECT_GT(checked, 10);
}

// A host loop of dependent kernels (each reads what the previous wrote) is recorded into one
// command buffer with barriers; 300 iterations cross the batch size.
TEST_P(CodegenVulkan, HostLoopOfDependentDispatches) {
  Tracer t("ping_pong");
  DimSpec n;
  n.kind = DimSpec::symbolic;
  n.name = "N";
  Node* A = t.input(DType::f32, {n}, "A");
  Node* B = t.zeros({A->shape[0]}, DType::f32);
  Node* i = t.indices({A->shape[0]}, 0);
  IndexItem at_i;
  at_i.kind = IndexItem::tensor;
  at_i.value = i;
  t.scatter(B, {at_i}, A);
  t.begin_loop(t.constant(0, DType::i32), t.constant(300, DType::i32), t.constant(1, DType::i32));
  IndexItem at_next;
  at_next.kind = IndexItem::tensor;
  at_next.value = t.binary(Op::add, i, t.constant(1, DType::i32));
  t.scatter(B, {at_i}, t.binary(Op::add, t.binary(Op::mul, t.gather(B, {at_next}), t.constant(0.5f, DType::f32)),
                                t.constant(1, DType::f32)));
  t.end_scope();
  t.output(t.value(B));
  std::unique_ptr<Program> p = t.release();
  run_pipeline(*p);
  run_both(*p, {ArgValue::of_tensor(random_tensor(DType::f32, {1000}, 4))}, {1e-6});
}

// llvmpipe (lavapipe) ends every loop of a shader after 65535 iterations in total; a kernel
// that would run more is refused with a BackendError rather than returning truncated sums.
TEST_P(CodegenVulkan, DriverLoopLimitIsAClearError) {
  int64_t limit = 0;
  std::string device;
#ifdef EMBER_WITH_OPENGL
  if (GetParam() == "opengl") limit = gl::context().loop_limit, device = gl::context().description;
#endif
#ifdef EMBER_WITH_VULKAN
  if (GetParam() != "opengl") limit = vk::context().loop_limit, device = vk::context().description;
#endif
  if (limit == 0) GTEST_SKIP() << "no loop limit on " << device;
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* X = b.input(DType::f32, {N}, 0, "x");
  Node* out = b.buffer(DType::f32, {}, false);
  b.set_insert_end(b.kernel({}));
  Node* acc = b.var(b.f32(0), {});
  Node* k = b.loop(b.i32(0), N, b.i32(1), {});
  b.set_insert_end(k);
  b.set(acc, b.binary(Op::add, acc, ld(b, X, k, {})));
  b.set_insert_end(p.root()->last_child);
  st(b, out, b.i32(0), acc, {});
  b.set_insert_end(p.root());
  b.output(out, 0);
  finish(p);
  CompileInfo info;
  auto runner = make_backend(GetParam())->compile(p, info);
  for (int64_t n : {int64_t(1000), limit}) {
    HostTensor x = HostTensor::alloc(DType::f32, {n}, false);
    for (int64_t i = 0; i < n; ++i) x.data[i] = f2w(1.0f);
    std::vector<HostTensor> got = interpret(p, {ArgValue::of_tensor(x)}, runner.get());
    EXPECT_EQ(w2f(got[0].data[0]), static_cast<float>(n));
  }
  HostTensor big = HostTensor::alloc(DType::f32, {limit + 1}, true);
  try {
    interpret(p, {ArgValue::of_tensor(big)}, runner.get());
    ADD_FAILURE() << "expected a BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("loop iterations per thread"), std::string::npos) << e.what();
  }
}

std::string param_name(const ::testing::TestParamInfo<std::string>& i) {
  return i.param == "vulkan" ? "glsl" : i.param == "vulkan-hlsl" ? "hlsl" : i.param;
}
INSTANTIATE_TEST_SUITE_P(Backends, CodegenVulkan, ::testing::Values("vulkan", "vulkan-hlsl", "opengl"), param_name);
INSTANTIATE_TEST_SUITE_P(Backends, VulkanPipeline, ::testing::Values("vulkan", "vulkan-hlsl", "opengl"), param_name);

// Without a Vulkan driver the backend is a clear BackendError (in a child process: the device
// is created once per process).
TEST(VulkanBackend, NoDeviceIsABackendError) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("VK_ICD_FILENAMES", "/nonexistent/ember_no_icd.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent/ember_no_icd.json", 1);
    int code = 3;
    try {
      make_backend("vulkan");
      code = 1;
    } catch (const BackendError& e) {
      code = std::strstr(e.what(), "ulkan") ? 0 : 2;
    } catch (...) {
      code = 4;
    }
    _exit(backend_unavailable("vulkan").empty() ? 5 : code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error, 2: message without 'Vulkan', 4: other exception, 5: still available";
}

#ifdef EMBER_WITH_VULKAN
// The DenormPreserve patch (devices with shaderDenormPreserveFloat32; lavapipe has none, so only
// the module is checked here): spirv-val accepts the patched GLSL and HLSL modules, which carry the
// execution mode once per entry point, and patching twice changes nothing.
TEST(VulkanBackend, DenormPreservePatchIsValidSpirv) {
  if (std::system("spirv-val --version > /dev/null 2>&1") != 0 || std::system("spirv-dis --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "spirv-val / spirv-dis not installed (Debian: spirv-tools)";
  char tmpl[] = "/tmp/ember-denorm-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string glsl =
      "#version 450\nlayout(local_size_x = 64) in;\nlayout(std430, set = 0, binding = 0) buffer B { float m[]; };\n"
      "void main() { m[gl_GlobalInvocationID.x] *= 0.5; }\n";
  const std::string hlsl =
      "[[vk::binding(0, 0)]] RWStructuredBuffer<float> m;\n"
      "[numthreads(64, 1, 1)] void k(uint3 id : SV_DispatchThreadID) { m[id.x] *= 0.5f; }\n";
  struct Case { std::string src; vk::Language lang; std::string entry; };
  for (const Case& c : {Case{glsl, vk::Language::glsl, "main"}, Case{hlsl, vk::Language::hlsl, "k"}}) {
    bool hit = false;
    const std::vector<uint32_t> plain = *vk::compile_spirv(c.src, c.lang, c.entry, &hit);
    const std::vector<uint32_t> patched = vk::with_denorm_preserve(plain);
    EXPECT_GT(patched.size(), plain.size());
    EXPECT_EQ(vk::with_denorm_preserve(patched), patched);
    const std::string path = dir + "/" + c.entry + ".spv";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(patched.data()),
                                                static_cast<std::streamsize>(patched.size() * 4));
    EXPECT_EQ(std::system(("spirv-val --target-env vulkan1.1 " + path).c_str()), 0) << vk::language_name(c.lang);
    const std::string dis = path + ".txt";
    ASSERT_EQ(std::system(("spirv-dis " + path + " -o " + dis).c_str()), 0);
    std::ifstream in(dis);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("OpCapability DenormPreserve"), std::string::npos) << text.substr(0, 600);
    EXPECT_NE(text.find("OpExtension \"SPV_KHR_float_controls\""), std::string::npos) << text.substr(0, 600);
    EXPECT_NE(text.find("DenormPreserve 32"), std::string::npos) << text.substr(0, 600);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}
#endif

TEST(VulkanBackend, NamesAndAuto) {
  std::vector<std::string> built = built_backends();
  EXPECT_EQ(built[0], "cpu");
#ifdef EMBER_WITH_VULKAN
  EXPECT_NE(std::find(built.begin(), built.end(), "vulkan-hlsl"), built.end());
#endif
  const std::string a = resolve_backend("auto");
  EXPECT_TRUE(a == "cpu" || a == "vulkan") << a;
  EXPECT_THROW(make_backend("no-such-device"), BackendError);
  EXPECT_NE(device_info("cpu").find("threads"), std::string::npos);
}

}  // namespace
}  // namespace ember
