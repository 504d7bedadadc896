// serialize_program / deserialize_program (core/ir/serialize.h), the program cache's format:
// every test program, as traced and after the whole pipeline with each backend's options, loads
// back to the same printed text, the same kernel source and the same interpreter results, bit
// for bit; every attribute of EMBER_NODE_ATTRS survives (walked through the list, so a new one is
// covered with no edit); and truncated or corrupted input throws ember::Error, never crashes.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "codegen/c_printer.h"
#include "codegen/dialect.h"
#include "backends/compile_cache.h"
#include "core/ir/builder.h"
#include "core/ir/printer.h"
#include "core/ir/serialize.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
#include "ember/ember.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }

// A gradient: tapes and adjoint buffers of a host loop.
std::unique_ptr<Program> loop_gradient() {
  Tracer t("loop_gradient");
  Node* A = t.input(DType::f32, {sym("N")}, "A");
  Node* v = t.var(A);
  t.begin_loop(t.constant(0, DType::i32), t.constant(3, DType::i32), t.constant(1, DType::i32));
  t.set(v, t.binary(Op::mul, t.unary(Op::sin, v), A));
  t.end_scope();
  Node* y = t.reduce(ReduceKind::sum, v, {}, false);
  t.output(y);
  t.output(t.grad(y, {A}, nullptr)[0]);
  return t.release();
}

struct Case {
  std::string name;
  std::function<std::unique_ptr<Program>()> build;
  bool interpret_traced = true;  // false: grid-synchronous loops run only after fuse_kernels
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> corpus() {
  std::vector<Case> out;
  for (const TestProgram& tp : test_programs()) out.push_back({tp.name, tp.build});
  out.push_back({"bitonic_sort", bitonic_sort, false});
  out.push_back({"group_zoo", group_zoo});
  out.push_back({"loop_gradient", loop_gradient});
  return out;
}

// Results compared word for word.
std::string same_bits(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  if (a.size() != b.size()) return "output counts differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) return "output " + std::to_string(i) + ": dtype or shape";
    if (a[i].size() && std::memcmp(a[i].data, b[i].data, static_cast<size_t>(a[i].size()) * 4) != 0)
      return "output " + std::to_string(i) + ": values differ";
  }
  return "";
}

// p and its round trip print the same, save the same bytes and compute the same bits.
// `lang`: the kernel language to compare after the pipeline ("cpp" or "glsl"; "" as traced).
void check_round_trip(const Program& p, bool kernels_formed, bool run, const std::string& lang = "") {
  const std::string bytes = serialize_program(p);
  std::unique_ptr<Program> q = deserialize_program(bytes, VerifyOptions{kernels_formed});
  verify(*q, VerifyOptions{kernels_formed});  // the use lists too (the loader builds them, then skips that check)
  ASSERT_EQ(print_program(*q), print_program(p));
  EXPECT_EQ(serialize_program(*q), bytes);
  EXPECT_EQ(q->name, p.name);
  EXPECT_EQ(q->num_outputs, p.num_outputs);
  EXPECT_EQ(q->next_kernel_id, p.next_kernel_id);
  EXPECT_EQ(q->args.size(), p.args.size());
  EXPECT_EQ(q->dims.size(), p.dims.size());
  EXPECT_GE(q->next_id(), p.next_id());
  // Node ids (the interpreter's slots, passes' tie-breaks) are kept.
  std::vector<Node*> a = p.nodes(), b = q->nodes();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i]->id, b[i]->id) << print_node(p, a[i]);
  // The kernel cache keys on the generated source: a loaded program must hit it.
  if (lang == "cpp") {
    EXPECT_EQ(generate_kernels(*q, cpp_dialect()), generate_kernels(p, cpp_dialect()));
  }
  if (lang == "glsl") {
    std::string ga, gb;
    for (const GeneratedKernel& k : generate_kernel_list(p, glsl_dialect())) ga += k.source;
    for (const GeneratedKernel& k : generate_kernel_list(*q, glsl_dialect())) gb += k.source;
    EXPECT_FALSE(ga.empty());
    EXPECT_EQ(ga, gb);
  }
  if (!run) return;
  for (uint32_t seed : {7u, 8u}) {
    std::mt19937 rng(seed);
    std::vector<ArgValue> args = random_args(p, rng, seed == 7 ? 5 : 9);
    std::vector<ArgValue> args2 = copy_args(args);
    EXPECT_EQ(same_bits(interpret(p, args), interpret(*q, args2)), "") << "seed " << seed;
  }
}

class SerializeTest : public ::testing::TestWithParam<Case> {};

TEST_P(SerializeTest, RoundTripsAsTracedAndAfterThePipeline) {
  const Case& c = GetParam();
  {
    SCOPED_TRACE("as traced");
    std::unique_ptr<Program> p = c.build();
    check_round_trip(*p, false, c.interpret_traced);
  }
  // cpu (lowers groups, tiles threads) and the GPU backends (neither).
  for (bool cpu : {true, false}) {
    SCOPED_TRACE(cpu ? "after the pipeline, cpu options" : "after the pipeline, gpu options");
    std::unique_ptr<Program> p = c.build();
    PipelineOptions opt;
    opt.lower_groups = cpu;
    opt.tile_threads = cpu;
    run_pipeline(*p, opt);
    check_round_trip(*p, true, true, cpu ? "cpp" : "glsl");
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, SerializeTest, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// ---- Attributes ----

void set_other(uint32_t& v) { v = v == 7u ? 9u : 7u; }
void set_other(int& v) { v = v == 3 ? -5 : 3; }
void set_other(uint8_t& v) { v = v == 2 ? 3 : 2; }
void set_other(bool& v) { v = !v; }
void set_other(IndexMode& v) { v = v == IndexMode::wrap ? IndexMode::unsafe : IndexMode::wrap; }
void set_other(ThinString& v) { v = v + "_other\n\0x"; }
void set_other(ThinVec<int>& v) { v.push_back(static_cast<int>(v.size()) + 2); v.push_back(-70000); }
void set_other(SourceLoc& v) { v = SourceLoc(v.file() + "other.py", v.line + 17); }
template <class T>
bool equal(const T& a, const T& b) { return a == b; }
bool equal(const SourceLoc& a, const SourceLoc& b) { return a.file() == b.file() && a.line == b.line; }

TEST(Serialize, EveryAttributeRoundTrips) {
  // Nodes whose ops the verifier lets carry any attribute value: every attribute set away from
  // its default on them (the list walked, so an attribute added to it is covered here).
  Program p;
  Builder b(p);
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* neg = b.unary(Op::neg, x);
  Node* sum = b.binary(Op::add, neg, x);
  for (Node* n : {neg, sum}) {
#define SET(type, name, init, role) set_other(n->name);
    EMBER_NODE_ATTRS(SET)
#undef SET
  }
  b.output(sum, 0);
  p.num_outputs = 1;
  const std::string bytes = serialize_program(p);
  std::unique_ptr<Program> q = deserialize_program(bytes);
  std::vector<Node*> a = p.nodes(), c = q->nodes();
  ASSERT_EQ(a.size(), c.size());
  int checked = 0;
  for (size_t i = 0; i < a.size(); ++i) {
#define CMP(type, name, init, role) \
  EXPECT_TRUE(equal(a[i]->name, c[i]->name)) << #name " of " << op_name(a[i]->op); \
  ++checked;
    EMBER_NODE_ATTRS(CMP)
#undef CMP
  }
  EXPECT_GT(checked, 0);
  EXPECT_EQ(print_program(*q), print_program(p));
}

TEST(Serialize, UnprintedAttributesTellApartWhatTheTextDoesNot) {
  auto traced = [](int line) {
    Tracer t("f");
    t.set_loc("f.py", line);
    Node* A = t.input(DType::f32, {sym("N")}, "A");
    t.output(t.unary(Op::sin, A));
    return t.release();
  };
  std::unique_ptr<Program> a = traced(3), b = traced(3), c = traced(4);
  EXPECT_EQ(print_program(*a), print_program(*c));  // the text has no source lines
  EXPECT_EQ(unprinted_attributes(*a), unprinted_attributes(*b));
  EXPECT_NE(unprinted_attributes(*a), unprinted_attributes(*c));
}

TEST(Serialize, RefusesAProgramReferringToAnErasedNode) {
  Program p;
  Builder b(p);
  Node* x = b.scalar_arg(DType::f32, 0, "x");
  Node* y = b.unary(Op::neg, x);
  p.erase(y);
  p.args.push_back(y);  // stale
  EXPECT_THROW(serialize_program(p), Error);
}

// ---- Malformed input ----

std::string message_of(std::string_view bytes, bool checksum = true) {
  try {
    deserialize_program(bytes, {}, checksum);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string saved_final(const std::function<std::unique_ptr<Program>()>& build) {
  std::unique_ptr<Program> p = build();
  PipelineOptions opt;
  opt.lower_groups = opt.tile_threads = true;
  run_pipeline(*p, opt);
  return serialize_program(*p);
}

TEST(Serialize, RejectsOtherFormatsWithAReason) {
  const std::string good = saved_final(test_programs()[0].build);
  EXPECT_EQ(message_of(good), "");
  EXPECT_NE(message_of("").find("truncated"), std::string::npos);
  std::string s = good;
  s[0] = 'X';
  EXPECT_NE(message_of(s).find("not a saved Ember program"), std::string::npos);
  s = good;
  s[8] ^= 1;  // format version
  EXPECT_NE(message_of(s).find("format version"), std::string::npos);
  s = good;
  s[12] ^= 1;  // schema hash
  EXPECT_NE(message_of(s).find("schema"), std::string::npos);
  s = good;
  s[s.size() / 2] ^= 0x10;
  EXPECT_NE(message_of(s).find("checksum"), std::string::npos);
  EXPECT_NE(message_of(good + "x").find("checksum"), std::string::npos);
}

// Loading must end in a program that passes the verifier or in ember::Error; anything else (a
// crash, another exception) fails. Without the checksum, corruption reaches every structural check.
void expect_error_or_valid(std::string_view bytes, bool checksum, const std::string& what) {
  try {
    std::unique_ptr<Program> q = deserialize_program(bytes, {}, checksum);
    ASSERT_FALSE(checksum) << what << ": corrupt input loaded despite the checksum";
    (void)print_program(*q);
    (void)serialize_program(*q);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    FAIL() << what << ": threw a non-ember exception: " << e.what();
  }
}

TEST(Serialize, TruncatedInputThrows) {
  for (const Case& c : corpus()) {
    SCOPED_TRACE(c.name);
    for (const std::string& bytes : {serialize_program(*c.build()), saved_final(c.build)}) {
      // Every cut of small programs; about 600 evenly spread cuts of larger ones.
      const size_t step = std::max<size_t>(1, bytes.size() / 600);
      for (size_t n = 0; n < bytes.size(); n += step) {
        const std::string_view cut(bytes.data(), n);
        EXPECT_NE(message_of(cut), "") << "cut at " << n;
        expect_error_or_valid(cut, false, "cut at " + std::to_string(n));
        // Unchecked, a cut never loads either: the counts up front ask for more than is left.
        EXPECT_NE(message_of(cut, false), "") << "cut at " << n << " loaded without the checksum";
      }
    }
  }
}

TEST(Serialize, CorruptedInputThrowsOrLoadsAValidProgram) {
  std::mt19937 rng(20240611);
  int loaded_unchecked = 0, rejected_unchecked = 0;
  for (const Case& c : corpus()) {
    SCOPED_TRACE(c.name);
    for (const std::string& bytes : {serialize_program(*c.build()), saved_final(c.build)}) {
      std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
      for (int trial = 0; trial < 300; ++trial) {
        std::string s = bytes;
        const int flips = 1 + trial % 3;
        for (int f = 0; f < flips; ++f) s[pos(rng)] ^= static_cast<char>(1u << (rng() % 8));
        if (s == bytes) continue;
        const std::string what = "trial " + std::to_string(trial);
        EXPECT_NE(message_of(s), "") << what;  // the checksum catches every change
        expect_error_or_valid(s, false, what);
        (message_of(s, false).empty() ? loaded_unchecked : rejected_unchecked)++;
        // Bytes of a random value at a random place (an oversized count or reference).
        s = bytes;
        const size_t at = pos(rng);
        for (size_t k = at; k < std::min(bytes.size(), at + 5); ++k) s[k] = static_cast<char>(0xff - (rng() % 3));
        expect_error_or_valid(s, false, what + " (0xff run)");
      }
    }
  }
  // The structural checks do reject most corruptions (the rest changed a value or an attribute).
  EXPECT_GT(rejected_unchecked, loaded_unchecked);
}

// ---- The program cache (CompiledProgram) ----

// Sets an environment variable for one test (nullptr: unset) and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1); else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// A fresh cache directory for one test, with the switches that turn the program cache off unset.
struct FreshCache {
  std::string dir = [] {
    std::string t = (std::filesystem::temp_directory_path() / "ember-progcache-XXXXXX").string();
    return std::string(mkdtemp(t.data()));
  }();
  ScopedEnv cache{"EMBER_CACHE_DIR", dir.c_str()};
  ScopedEnv verify{"EMBER_VERIFY", nullptr};
  ScopedEnv on{"EMBER_PROGRAM_CACHE", nullptr};
  ScopedEnv debug{"EMBER_DEBUG", nullptr};
  ~FreshCache() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  int entries(const std::string& ext) const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().extension() == "." + ext;
    return n;
  }
};

TEST(ProgramCache, ASecondCompileLoadsTheLoweredProgram) {
  FreshCache cache;
  int programs = 0;
  for (const TestProgram& tp : test_programs()) {
    // A few programs (each compiles its kernels with the C++ compiler): a host loop, a kernel
    // with control flow and atomics, a reduction, register tiles.
    if (tp.name != "host_loop" && tp.name != "explicit_kernel" && tp.name != "softmax" && tp.name != "matmul_tiles")
      continue;
    ++programs;
    SCOPED_TRACE(tp.name);
    CompiledProgram a(tp.build(), "cpu");
    CompiledProgram b(tp.build(), "cpu");
    EXPECT_FALSE(a.stats().program_cache_hit);
    EXPECT_FALSE(a.stats().passes.empty());
    EXPECT_TRUE(b.stats().program_cache_hit);
    EXPECT_TRUE(b.stats().passes.empty());
    EXPECT_EQ(a.stats().program_cache_key, b.stats().program_cache_key);
    EXPECT_EQ(print_program(b.program()), print_program(a.program()));
    EXPECT_EQ(b.stats().kernels, a.stats().kernels);
    EXPECT_TRUE(b.stats().cache_hit);  // the same kernel source: the kernels come from the cache
    std::mt19937 rng(3);
    std::vector<ArgValue> args = random_args(a.program(), rng, 6);
    EXPECT_EQ(same_bits(a.run(copy_args(args)), b.run(copy_args(args))), "");
    EXPECT_EQ(b.ir("fuse_kernels"), a.ir("fuse_kernels"));
    EXPECT_EQ(b.ir("traced"), a.ir("traced"));
  }
  EXPECT_EQ(programs, 4);
  EXPECT_EQ(cache.entries("prog"), programs);
}

TEST(ProgramCache, APassErrorIsRaisedEveryTimeAndNothingIsSaved) {
  FreshCache cache;
  // An add of [N] and [M] operands: check_shapes rejects it with the user's line.
  auto bad = [] {
    auto p = std::make_unique<Program>();
    Builder b(*p);
    Node* n = b.shape_arg("N");
    Node* m = b.shape_arg("M");
    Node* x = b.input(DType::f32, {n}, 0, "x");
    Node* y = b.input(DType::f32, {m}, 1, "y");
    Node* s = b.raw(Op::add, DType::f32, {n}, {x, y});
    s->loc = SourceLoc{"bad.py", 7};
    b.output(s, 0);
    p->num_outputs = 1;
    return p;
  };
  std::string first;
  for (int i = 0; i < 2; ++i) {
    try {
      CompiledProgram cp(bad(), "cpu");
      ADD_FAILURE() << "compiled";
    } catch (const ShapeError& e) {
      if (i == 0) first = e.what();
      EXPECT_EQ(e.what(), first);
      EXPECT_NE(first.find("bad.py:7"), std::string::npos) << first;
    }
  }
  EXPECT_EQ(cache.entries("prog"), 0);
}

TEST(ProgramCache, ABadEntryIsRebuiltAndTheSwitchesTurnItOff) {
  FreshCache cache;
  const std::string key = CompiledProgram(test_programs()[0].build(), "cpu").stats().program_cache_key;
  ASSERT_EQ(key.rfind("prog-", 0), 0u);
  const std::string path = cache.dir + "/" + key + ".prog";
  std::string bytes;
  ASSERT_TRUE(read_file(path, bytes));
  // Garbage with a matching checksum file: the loader refuses it; the entry is written anew.
  write_file_atomic(path, bytes.substr(0, bytes.size() / 2));
  std::string sum;
  ASSERT_TRUE(read_file(cache.dir + "/" + key + ".sum", sum));
  {
    std::string half = bytes.substr(0, bytes.size() / 2);
    write_file_atomic(cache.dir + "/" + key + ".sum",
                      sum.substr(0, sum.find('\n')) + "\n" + key + "\n" + content_hash(half) + " " +
                          std::to_string(half.size()) + "\n");
  }
  {
    CompiledProgram cp(test_programs()[0].build(), "cpu");
    EXPECT_FALSE(cp.stats().program_cache_hit);
  }
  std::string again;
  ASSERT_TRUE(read_file(path, again));
  EXPECT_EQ(again, bytes);
  EXPECT_TRUE(CompiledProgram(test_programs()[0].build(), "cpu").stats().program_cache_hit);
  for (auto [name, value] : {std::pair{"EMBER_PROGRAM_CACHE", "0"}, {"EMBER_VERIFY", "1"}, {"EMBER_DEBUG", "time"}}) {
    ScopedEnv off(name, value);
    CompiledProgram cp(test_programs()[0].build(), "cpu");
    EXPECT_FALSE(cp.stats().program_cache_hit) << name;
    EXPECT_EQ(cp.stats().program_cache_key, "") << name;
    EXPECT_FALSE(cp.stats().passes.empty()) << name;
  }
}

}  // namespace
