// The cpp dialect and the CPU backend against the reference interpreter: hand-built programs in
// post-split_host form run through interpret() with the CPU KernelRunner and without one, and
// every output word must match. Also: deterministic source, the compile cache (memory, disk,
// corrupt entries), compile errors and the log line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backends/backend.h"
#include "backends/compile_cache.h"
#include "backends/cpu/cpu.h"
#include "codegen/c_printer.h"
#include "core/interp/interp.h"
#include "core/ir/builder.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
#include "core/passes/split_host.h"
#include "codegen_test_helpers.h"
#include "programs.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

using namespace codegen_test;

// Runs `p` on the CPU backend and in the interpreter; every output word must agree.
std::vector<HostTensor> run_both(const Program& p, const std::vector<ArgValue>& args, const std::vector<std::string>& names = {}) {
  auto backend = make_backend("cpu");
  CompileInfo info;
  auto runner = backend->compile(p, info);
  std::vector<HostTensor> got = interpret(p, deep_copy(args), runner.get());
  std::vector<HostTensor> want = interpret(p, deep_copy(args));
  EXPECT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size() && o < want.size(); ++o) {
    std::string name = o < names.size() ? names[o] : "output " + std::to_string(o);
    EXPECT_EQ(got[o].shape, want[o].shape) << name;
    if (got[o].shape != want[o].shape) continue;
    int bad = 0;
    for (int64_t k = 0; k < got[o].size() && bad < 3; ++k)
      if (got[o].data[k] != want[o].data[k]) {
        ++bad;
        ADD_FAILURE() << name << "[" << k << "]: cpu " << word_str(got[o].data[k], want[o].dtype) << " (0x" << std::hex
                      << got[o].data[k] << "), interpreter " << word_str(want[o].data[k], want[o].dtype) << " (0x"
                      << want[o].data[k] << std::dec << ")";
      }
  }
  return got;
}

// out_k[i] = op_k(a[i], b[i]) for every elementwise op defined on t, in one kernel.
void check_all_ops(DType t, const std::vector<uint32_t>& edges_a, const std::vector<uint32_t>& edges_b) {
  std::vector<Op> ops;
  std::vector<std::string> names;
  for (int o = 0; o < kOpCount; ++o)
    if (defined_on(static_cast<Op>(o), t)) { ops.push_back(static_cast<Op>(o)); names.push_back(op_name(ops.back())); }
  Program p;
  ops_program(p, t, ops);
  run_both(p, {ArgValue::of_tensor(random_tensor(t, {5000}, 1, edges_a)), ArgValue::of_tensor(random_tensor(t, {5000}, 2, edges_b))}, names);
}

class CodegenCpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/ember-test-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
  }
  static void TearDownTestSuite() {  // EMBER_KEEP_TEST_CACHE=1 keeps the generated sources
    if (std::getenv("EMBER_KEEP_TEST_CACHE")) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string dir_;
};
std::string CodegenCpu::dir_;

const float kNaN = std::nanf(""), kInf = INFINITY;

TEST_F(CodegenCpu, FloatOps) {
  auto f = [](std::initializer_list<float> v) { std::vector<uint32_t> w; for (float x : v) w.push_back(f2w(x)); return w; };
  check_all_ops(DType::f32, f({kNaN, kInf, -kInf, -0.0f, 0.5f, -0.5f, 2.5f, -2.5f, 1e30f, -1e-30f, 3.0f, 1.0f, 7.0f}),
                f({2.0f, -0.0f, kNaN, 3.0f, kInf, 0.5f, -1.5f, 0.0f, -kInf, 2.0f, -0.0f, 0.0f, -2.0f}));
}

TEST_F(CodegenCpu, IntOpsFloorDivModShifts) {
  auto i = [](std::initializer_list<int32_t> v) { std::vector<uint32_t> w; for (int32_t x : v) w.push_back(i2w(x)); return w; };
  check_all_ops(DType::i32, i({INT_MIN, INT_MAX, -7, 7, -7, 7, -1, 5, INT_MIN, 100, -9, 9, -8, 1}),
                i({-1, 0, 2, -2, 33, 31, -3, 32, 0, -1, 4, -4, 1, 64}));
  check_all_ops(DType::u32, {0xffffffffu, 0x80000000u, 7, 1, 12345, 5, 9}, {0, 1, 32, 31, 3, 0xffffffffu, 33});
}

TEST_F(CodegenCpu, BoolOps) { check_all_ops(DType::boolean, {1, 1, 0, 0}, {1, 0, 1, 0}); }

TEST_F(CodegenCpu, CastsBitcastsSelectAndParams) {
  Program p;
  casts_program(p);
  std::vector<ArgValue> args = {
      ArgValue::of_tensor(random_tensor(DType::f32, {3000}, 3, {f2w(kNaN), f2w(kInf), f2w(-kInf), f2w(3e9f), f2w(-3e9f), f2w(5e9f), f2w(-0.7f)})),
      ArgValue::of_tensor(random_tensor(DType::i32, {3000}, 4, {i2w(INT_MIN), i2w(INT_MAX), i2w(-1)})),
      ArgValue::of_tensor(random_tensor(DType::u32, {3000}, 5, {0xffffffffu, 0x7fc00000u, 0x80000000u})),
      ArgValue::of_tensor(random_tensor(DType::boolean, {3000}, 6)),
      ArgValue::of_word(f2w(0.25f)), ArgValue::of_word(i2w(-17)), ArgValue::of_word(0x5au), ArgValue::of_word(1)};
  run_both(p, args);
}

// Per row: a loop with continue/break and if/else into a var; a loop with a negative step; a
// loop with a dynamic step whose end is a var the body changes (bounds are read at entry).
TEST_F(CodegenCpu, LoopsVarsIfElseBreakContinue) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* M = b.shape_arg("M");
  Shape s{N};
  Node* X = b.input(DType::f32, {N, M}, 0, "x");
  Node* step = b.scalar_arg(DType::i32, 1, "step");
  Node* out = b.buffer(DType::f32, s, false);
  Node* cnt_out = b.buffer(DType::i32, s, false);
  Node* K = b.kernel(s);
  b.set_insert_end(K);
  Node* i = b.index(0, s);
  Node* base = b.binary(Op::mul, i, M);
  Node* acc = b.var(b.f32(0), s);
  Node* cnt = b.var(b.i32(0), s);
  Node* j = b.loop(b.i32(0), M, b.i32(1), s);
  b.set_insert_end(j);
  Node* v = ld(b, X, b.binary(Op::add, base, j), s);
  b.set_insert_end(b.if_(b.binary(Op::eq, b.binary(Op::mod, b.binary(Op::add, j, i), b.i32(3)), b.i32(1)), s));
  b.continue_(s);
  b.set_insert_end(j);
  b.set_insert_end(b.if_(b.binary(Op::gt, v, b.f32(0)), s));
  b.set(acc, b.binary(Op::add, acc, v));
  b.set_insert_end(j);
  b.set_insert_end(b.else_(s));
  b.set(acc, b.binary(Op::sub, acc, b.binary(Op::mul, v, b.f32(0.5f))));
  b.set_insert_end(j);
  b.set(cnt, b.binary(Op::add, cnt, b.i32(1)));
  b.set_insert_end(b.if_(b.binary(Op::gt, acc, b.f32(20)), s));
  b.break_(s);
  b.set_insert_end(K);
  Node* lim = b.var(M, s);
  Node* k = b.loop(b.binary(Op::sub, M, b.i32(1)), b.i32(-1), b.i32(-1), s);
  b.set_insert_end(k);
  b.set(acc, b.binary(Op::add, b.binary(Op::mul, acc, b.f32(0.5f)), ld(b, X, b.binary(Op::add, base, k), s)));
  b.set_insert_end(b.if_(b.binary(Op::eq, k, b.i32(2)), s));
  b.set(lim, b.i32(-5));
  b.set_insert_end(K);
  Node* q = b.loop(b.i32(0), lim, step, s);
  b.set_insert_end(q);
  b.set(cnt, b.binary(Op::add, cnt, b.binary(Op::mul, q, b.i32(100))));
  b.set(lim, b.binary(Op::add, lim, b.i32(-1)));
  b.set_insert_end(K);
  st(b, out, i, acc, s);
  st(b, cnt_out, i, cnt, s);
  b.set_insert_end(p.root());
  b.output(out, 0);
  b.output(cnt_out, 1);
  finish(p);
  for (int32_t stp : {2, -1, -3}) {
    SCOPED_TRACE("step " + std::to_string(stp));
    run_both(p, {ArgValue::of_tensor(random_tensor(DType::f32, {300, 11}, 7)), ArgValue::of_word(i2w(stp))});
  }
}

// Coordinates of 3-D and 2-D kernels with symbolic and constant dims; two kernels share a
// translation unit; one kernel uses only axis 1 (with an atomic).
TEST_F(CodegenCpu, MultiDimKernelsAndAtomics) {
  Program p;
  Builder b(p);
  Node* N = b.shape_arg("N");
  Node* M = b.shape_arg("M");
  Node* X = b.input(DType::i32, {N}, 0, "x");
  Node* Y = b.input(DType::f32, {N}, 1, "y");
  b.input(DType::f32, {M}, 2, "binds_m");
  Shape s3{N, b.i32(3), M}, s2{N, M}, s1{N};
  Node* grid = b.buffer(DType::i32, s3, false);
  Node* cols = b.buffer(DType::i32, {M}, true);
  Node* hist = b.buffer(DType::i32, {b.i32(16)}, true);
  Node* fsum = b.buffer(DType::f32, {b.i32(16)}, true);
  Node* fmin = b.buffer(DType::f32, {b.i32(16)}, true);
  Node* bits = b.buffer(DType::u32, {b.i32(16)}, true);
  Node* any = b.buffer(DType::boolean, {b.i32(16)}, true);
  Node* imax = b.buffer(DType::i32, {b.i32(16)}, true);
  b.set_insert_end(b.kernel(s3));
  Node* c0 = b.index(0, s3), *c1 = b.index(1, s3), *c2 = b.index(2, s3);
  Node* flat = b.binary(Op::add, b.binary(Op::mul, b.binary(Op::add, b.binary(Op::mul, c0, b.i32(3)), c1), M), c2);
  st(b, grid, flat, b.binary(Op::add, b.binary(Op::add, b.binary(Op::mul, c0, b.i32(10000)), b.binary(Op::mul, c1, b.i32(100))), c2), s3);
  b.set_insert_end(p.root());
  b.set_insert_end(b.kernel(s2));
  at(b, AtomicKind::add, cols, b.index(1, s2), b.i32(1), s2);
  b.set_insert_end(p.root());
  b.set_insert_end(b.kernel(s1));
  Node* i = b.index(0, s1);
  Node* bin = b.binary(Op::mod, ld(b, X, i, s1), b.i32(16));
  Node* y = ld(b, Y, i, s1);
  at(b, AtomicKind::add, hist, bin, b.i32(1), s1);
  at(b, AtomicKind::add, fsum, bin, b.unary(Op::floor, y), s1);
  at(b, AtomicKind::min, fmin, bin, y, s1);
  at(b, AtomicKind::bor, bits, bin, b.binary(Op::shl, b.u32(1), b.cast(b.binary(Op::mod, i, b.i32(32)), DType::u32)), s1);
  at(b, AtomicKind::bor, any, bin, b.binary(Op::gt, y, b.f32(7.5f)), s1);
  at(b, AtomicKind::max, imax, bin, ld(b, X, i, s1), s1);
  b.set_insert_end(p.root());
  int slot = 0;
  for (Node* m : {grid, cols, hist, fsum, fmin, bits, any, imax}) b.output(m, slot++);
  finish(p);
  EXPECT_EQ(program_kernels(p).size(), 3u);
  run_both(p, {ArgValue::of_tensor(random_tensor(DType::i32, {4000}, 8)), ArgValue::of_tensor(random_tensor(DType::f32, {4000}, 9)),
               ArgValue::of_tensor(random_tensor(DType::f32, {7}, 10))});
}

// atomic add's old value: every thread gets a distinct slot (order differs from the interpreter).
TEST_F(CodegenCpu, AtomicReturnsOldValue) {
  Program p;
  Builder b(p);
  Shape s{b.i32(20000)};
  Node* counter = b.buffer(DType::u32, {b.i32(1)}, true);
  Node* slots = b.buffer(DType::u32, s, false);
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  st(b, slots, i, at(b, AtomicKind::add, counter, b.i32(0), b.u32(1), s), s);
  b.set_insert_end(p.root());
  b.output(counter, 0);
  b.output(slots, 1);
  finish(p);
  CompileInfo info;
  auto runner = make_backend("cpu")->compile(p, info);
  std::vector<HostTensor> out = interpret(p, {}, runner.get());
  EXPECT_EQ(out[0].data[0], 20000u);
  std::vector<uint32_t> got(out[1].data, out[1].data + 20000);
  std::sort(got.begin(), got.end());
  for (uint32_t k = 0; k < 20000; ++k) ASSERT_EQ(got[k], k);
}

std::unique_ptr<Program> small_program(int junk_nodes, float scale = 2.0f) {
  auto p = std::make_unique<Program>();
  Builder b(*p);
  for (int k = 0; k < junk_nodes; ++k) p->create(Op::constant, DType::i32);  // shifts Node::id only
  Shape s{b.shape_arg("N")};
  Node* X = b.input(DType::f32, s, 0, "x");
  Node* out = b.buffer(DType::f32, s, false);
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  Node* x = ld(b, X, i, s);
  st(b, out, i, b.binary(Op::add, b.binary(Op::mul, x, b.f32(scale)), b.unary(Op::sin, x)), s);
  b.set_insert_end(p->root());
  b.output(out, 0);
  finish(*p);
  return p;
}

TEST_F(CodegenCpu, SourceIsDeterministicAndNamesKernels) {
  auto a = small_program(0), c = small_program(37), d = small_program(0, 3.0f);
  std::string sa = generate_kernels(*a, cpp_dialect());
  EXPECT_EQ(sa, generate_kernels(*c, cpp_dialect()));
  EXPECT_NE(sa, generate_kernels(*d, cpp_dialect()));
  EXPECT_EQ(sa, make_backend("cpu")->source(*a, {}));
  std::vector<GeneratedKernel> ks = generate_kernel_list(*a, cpp_dialect());
  ASSERT_EQ(ks.size(), 1u);
  // Content-addressed: "ember_" and 16 hex digits of the text, no kernel id.
  EXPECT_EQ(ks[0].symbol.rfind("ember_", 0), 0u) << ks[0].symbol;
  EXPECT_EQ(ks[0].symbol.size(), 6u + 16u) << ks[0].symbol;
  EXPECT_EQ(ks[0].source.find("#0"), std::string::npos) << ks[0].source;
  EXPECT_NE(sa.find("// kernel #0\n"), std::string::npos) << sa;  // the listing names the kernel
  EXPECT_NE(sa.find("extern \"C\" void " + ks[0].symbol + "("), std::string::npos) << sa;
  EXPECT_NE(ks[0].symbol, generate_kernel_list(*d, cpp_dialect())[0].symbol);
  EXPECT_NE(sa.find("#pragma omp parallel for"), std::string::npos);
}

TEST_F(CodegenCpu, EveryElementwiseOpHasATemplate) {
  const Dialect& d = cpp_dialect();
  for (int o = 0; o < kOpCount; ++o)
    for (DType t : {DType::f32, DType::i32, DType::u32, DType::boolean})
      if (defined_on(static_cast<Op>(o), t)) {
        EXPECT_FALSE(d.expr[o][value_class(t)].empty()) << op_name(static_cast<Op>(o)) << " on " << dtype_name(t);
      }
  for (DType a : {DType::f32, DType::i32, DType::u32, DType::boolean})
    for (DType c : {DType::f32, DType::i32, DType::u32, DType::boolean})
      if (a != c) {
        EXPECT_FALSE(d.cast[dtype_slot(a)][dtype_slot(c)].empty()) << dtype_name(a) << "->" << dtype_name(c);
        EXPECT_FALSE(d.bitcast[dtype_slot(a)][dtype_slot(c)].empty()) << dtype_name(a) << "->" << dtype_name(c);
      }
}

// Files of the cache directory `dir` ending in `ext`.
std::vector<std::string> cache_entries(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(CodegenCpu, CacheMemoryThenDiskThenRebuildsCorruptEntries) {
  std::string dir = dir_ + "/cache-test";
  setenv("EMBER_CACHE_DIR", dir.c_str(), 1);
  memory_cache_clear();
  auto p = small_program(0, 5.0f);
  std::vector<ArgValue> args = {ArgValue::of_tensor(random_tensor(DType::f32, {1000}, 11))};
  std::vector<HostTensor> want = interpret(*p, deep_copy(args));
  auto compile_and_check = [&](bool expect_hit, const char* what) {
    CompileInfo info;
    auto runner = make_backend("cpu")->compile(*p, info);
    EXPECT_EQ(info.cache_hit, expect_hit) << what;
    EXPECT_EQ(info.compiled_kernels, expect_hit ? 0 : 1) << what;
    EXPECT_EQ(info.translation_units, expect_hit ? 0 : 1) << what;
    EXPECT_EQ(info.distinct_kernels, 1) << what;
    std::vector<HostTensor> got = interpret(*p, deep_copy(args), runner.get());
    EXPECT_EQ(std::memcmp(got[0].data, want[0].data, 4000), 0) << what;
    std::printf("  [%s] codegen %.2f ms, compile %.2f ms, hit %d\n", what, info.codegen_ms, info.compile_ms, info.cache_hit);
    return info.cache_key;
  };
  std::string key = compile_and_check(false, "cold");
  // One translation unit (`<unit>.so`, its `.cpp` and `.sum`) and the kernel's reference to it.
  std::vector<std::string> libs = cache_entries(dir, ".so"), refs = cache_entries(dir, ".ref");
  ASSERT_EQ(libs.size(), 1u);
  ASSERT_EQ(refs.size(), 1u);
  const std::string so = libs[0], unit = so.substr(0, so.size() - 3), sum = unit + ".sum";
  const std::string ref = refs[0], ref_sum = ref.substr(0, ref.size() - 4) + ".sum";
  EXPECT_TRUE(fs::exists(sum) && fs::exists(unit + ".cpp") && fs::exists(ref_sum));
  EXPECT_EQ(compile_and_check(true, "memory hit"), key);
  memory_cache_clear();
  compile_and_check(true, "disk hit");
  memory_cache_clear();
  {  // truncate the library in place
    std::string bytes;
    ASSERT_TRUE(read_file(so, bytes));
    std::ofstream(so, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  compile_and_check(false, "corrupt .so");
  memory_cache_clear();
  std::ofstream(sum, std::ios::trunc) << "garbage";
  compile_and_check(false, "corrupt .sum");
  memory_cache_clear();
  fs::remove(sum);
  compile_and_check(false, "missing .sum");
  memory_cache_clear();
  fs::remove(so);
  compile_and_check(false, "library deleted");
  memory_cache_clear();
  {  // a reference whose checksum no longer matches: removed, the kernel found again from source
    std::string bytes;
    ASSERT_TRUE(read_file(ref, bytes));
    std::ofstream(ref, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3) << "xyz";
  }
  ::testing::internal::CaptureStderr();
  compile_and_check(true, "corrupt .ref, library on disk");  // the unit is loaded, nothing compiled
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(ref), std::string::npos) << err;
  EXPECT_NE(err.find("rebuilding it"), std::string::npos) << err;
  compile_and_check(true, "memory hit again");
  memory_cache_clear();
  compile_and_check(true, "disk hit again");
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
}

TEST_F(CodegenCpu, ConcurrentCompilesOfOneProgram) {
  auto p = small_program(0, 9.0f);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      CompileInfo info;
      auto runner = make_backend("cpu")->compile(*p, info);
      auto out = interpret(*p, {ArgValue::of_tensor(random_tensor(DType::f32, {100}, 12))}, runner.get());
      ok += out[0].size() == 100;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
}

TEST_F(CodegenCpu, CompilerFailureIsACompileErrorWithStderrAndSource) {
  setenv("EMBER_CXX", (cpu_compiler() + " -include ember_no_such_header.h").c_str(), 1);
  auto p = small_program(0, 6.0f);
  CompileInfo info;
  try {
    make_backend("cpu")->compile(*p, info);
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ember_no_such_header.h"), std::string::npos) << msg;
    EXPECT_NE(msg.find(".cpp"), std::string::npos) << msg;
  }
  unsetenv("EMBER_CXX");
}

TEST_F(CodegenCpu, LogLineWithEmberLogInfo) {
  auto p = small_program(0, 7.0f);
  p->name = "logged";
  setenv("EMBER_LOG", "info", 1);
  ::testing::internal::CaptureStderr();
  CompileInfo info;
  make_backend("cpu")->compile(*p, info);
  make_backend("cpu")->compile(*p, info);
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("EMBER_LOG");
  EXPECT_NE(err.find("ember: logged: 1 kernels (1 distinct, 1 compiled in 1 units), compile "), std::string::npos)
      << err;
  EXPECT_NE(err.find("(cache miss)"), std::string::npos) << err;
  EXPECT_NE(err.find("(cache hit)"), std::string::npos) << err;
}

// The shared traced programs, through the whole pipeline, on the CPU backend.
class CpuPipeline : public CodegenCpu, public ::testing::WithParamInterface<testing::TestProgram> {};

// Whole programs: reduction loops may be split into SIMD lanes, which reorders float sums, so
// results agree to rounding (integers exactly).
TEST_P(CpuPipeline, MatchesInterpreterAfterPipeline) {
  std::unique_ptr<Program> p = GetParam().build();
  auto backend = make_backend("cpu");
  PipelineOptions opt;
  opt.tile_threads = backend->target().tile_threads;  // register tiles, as the CPU backend compiles programs
  run_pipeline(*p, opt);
  std::mt19937 rng(5);
  CompileInfo info;
  auto runner = backend->compile(*p, info);
  for (int64_t sym : {6, 37}) {
    std::vector<ArgValue> args = testing::random_args(*p, rng, sym);
    std::vector<HostTensor> want = interpret(*p, deep_copy(args));
    std::vector<HostTensor> got = interpret(*p, deep_copy(args), runner.get());
    EXPECT_EQ(testing::compare(want, got, 1e-5), "") << GetParam().name << " with N = " << sym;
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, CpuPipeline, ::testing::ValuesIn(testing::test_programs()),
                         [](const ::testing::TestParamInfo<testing::TestProgram>& i) { return i.param.name; });

TEST(Backend, MakeBackendByName) {
  EXPECT_STREQ(make_backend("cpu")->name(), "cpu");
  EXPECT_THROW(make_backend("no-such-device"), BackendError);
}

}  // namespace
}  // namespace ember
