// Shape operations (core/trace/shape_ops.cpp): each is traced with ember::Tracer, checked
// against a host reference with the interpreter before the pipeline, then run through the whole
// pipeline (verifier on) and checked again, with the kernel count: index remaps must not stop
// fusion, so elementwise chains through them stay one kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/ir/printer.h"
#include "core/ir/shape.h"
#include "core/ir/verifier.h"
#include "core/passes/pipeline.h"
#include "programs.h"

using namespace ember;
using namespace ember::testing;

namespace {

DimSpec sym(const std::string& n) { DimSpec d; d.kind = DimSpec::symbolic; d.name = n; return d; }
DimSpec fixed(int64_t v) { DimSpec d; d.kind = DimSpec::fixed; d.size = v; return d; }
IndexItem slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
  IndexItem i;
  i.kind = IndexItem::slice;
  i.start = start;
  i.stop = stop;
  i.step = step;
  return i;
}
IndexItem at(Node* v) { IndexItem i; i.kind = IndexItem::tensor; i.value = v; return i; }

using Coord = std::vector<int64_t>;
// The reference of one output: its shape and its value at each coordinate (from the arguments).
struct Ref {
  std::vector<int64_t> shape;
  std::function<float(const std::vector<ArgValue>&, const Coord&)> at;
};

float elem(const HostTensor& t, const Coord& c) {
  int64_t flat = 0;
  for (size_t k = 0; k < c.size(); ++k) flat = flat * t.shape[k] + c[k];
  return t.dtype == DType::f32 ? w2f(t.data[flat]) : static_cast<float>(w2i(t.data[flat]));
}
float arg(const std::vector<ArgValue>& a, size_t k, const Coord& c) { return elem(a[k].tensor, c); }

// Row-major coordinate of flat index `f` in `shape`.
Coord unflat(int64_t f, const std::vector<int64_t>& shape) {
  Coord c(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    c[k] = f % shape[k];
    f /= shape[k];
  }
  return c;
}
int64_t flat_of(const Coord& c, const std::vector<int64_t>& shape) {
  int64_t f = 0;
  for (size_t k = 0; k < c.size(); ++k) f = f * shape[k] + c[k];
  return f;
}

std::string check_ref(const std::vector<HostTensor>& got, const std::vector<Ref>& refs, const std::vector<ArgValue>& args) {
  if (got.size() != refs.size()) return "output count differs";
  for (size_t o = 0; o < refs.size(); ++o) {
    if (got[o].shape != refs[o].shape) return "output " + std::to_string(o) + ": shape differs";
    for (int64_t f = 0; f < got[o].size(); ++f) {
      Coord c = unflat(f, refs[o].shape);
      float want = refs[o].at(args, c), have = elem(got[o], c);
      if (std::fabs(want - have) > 1e-5f * (1 + std::fabs(want)))
        return "output " + std::to_string(o) + " at flat " + std::to_string(f) + ": want " + std::to_string(want) +
               ", got " + std::to_string(have);
    }
  }
  return "";
}

int count_kernels(const Program& p) {
  int k = 0;
  p.for_each([&](Node* n) { k += n->op == Op::kernel; });
  return k;
}

// Traces with `build`, checks the interpreter against `refs` (for symbolic size `sym`) before
// and after the pipeline, and returns the kernel count after it.
int run_and_check(const std::function<void(Tracer&)>& build,
                  const std::function<std::vector<Ref>(const std::vector<ArgValue>&)>& refs, int64_t sym_size = 5) {
  Tracer t("shape_test");
  build(t);
  std::unique_ptr<Program> p = t.release();
  std::mt19937 rng(42);
  std::vector<ArgValue> args = random_args(*p, rng, sym_size);
  std::vector<Ref> want = refs(args);
  std::vector<HostTensor> before = interpret(*p, copy_args(args));
  EXPECT_EQ(check_ref(before, want, args), "") << "before the pipeline\n" << print_program(*p);
  PipelineOptions opt;
  opt.verify = true;
  run_pipeline(*p, opt);
  std::vector<HostTensor> after = interpret(*p, copy_args(args));
  EXPECT_EQ(check_ref(after, want, args), "") << "after the pipeline\n" << print_program(*p);
  EXPECT_EQ(compare(before, after), "");
  return count_kernels(*p);
}

std::vector<Node*> dims(Tracer& t, std::initializer_list<int64_t> v) {
  std::vector<Node*> out;
  for (int64_t d : v) out.push_back(d < 0 ? nullptr : t.dim_const(d));
  return out;
}

}  // namespace

// The example: exp(x).reshape(...).T + 1 is one kernel.
TEST(ShapeOps, ExpReshapeTransposeAddIsOneKernel) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {fixed(4), fixed(6)}, "x");
        Node* y = t.transpose(t.reshape(t.unary(Op::exp, x), dims(t, {3, 8})));
        t.output(t.binary(Op::add, y, t.constant(1, DType::f32)));
      },
      [](const std::vector<ArgValue>&) {
        return std::vector<Ref>{{{8, 3}, [](const std::vector<ArgValue>& a, const Coord& c) {
                                   Coord s = unflat(c[1] * 8 + c[0], {4, 6});
                                   return std::exp(arg(a, 0, s)) + 1.f;
                                 }}};
      });
  EXPECT_EQ(k, 1);
}

TEST(ShapeOps, ReshapeGroupsAndInference) {
  auto same_data = [](std::vector<int64_t> out, std::vector<int64_t> in, size_t argk) {
    return Ref{out, [out, in, argk](const std::vector<ArgValue>& a, const Coord& c) {
                 return arg(a, argk, unflat(flat_of(c, out), in));
               }};
  };
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {fixed(2), fixed(3), fixed(4)}, "x");
        Node* e = t.unary(Op::sin, x);
        t.output(t.reshape(e, dims(t, {6, 4})));          // trailing dim kept, [2, 3] merged
        t.output(t.reshape(e, dims(t, {4, -1})));         // no common group: one flat index
        t.output(t.reshape(e, dims(t, {2, 1, 12, 1})));   // size-1 dims and a merged group
        t.output(t.reshape(t.reshape(x, dims(t, {-1})), dims(t, {3, 2, 2, 2})));  // reshape of a reshape
      },
      [&](const std::vector<ArgValue>&) {
        auto s = [](Ref r) {
          auto f = r.at;
          r.at = [f](const std::vector<ArgValue>& a, const Coord& c) { return std::sin(f(a, c)); };
          return r;
        };
        return std::vector<Ref>{s(same_data({6, 4}, {2, 3, 4}, 0)), s(same_data({4, 6}, {2, 3, 4}, 0)),
                                s(same_data({2, 1, 12, 1}, {2, 3, 4}, 0)), same_data({3, 2, 2, 2}, {2, 3, 4}, 0)};
      });
  EXPECT_EQ(k, 4);  // one kernel per output (their shapes all differ): no kernel for a remap
}

TEST(ShapeOps, ReshapeSymbolicDims) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {sym("N"), fixed(3)}, "x");
        Node* n = x->shape[0];
        Node* flat = t.reshape(t.unary(Op::exp, x), {nullptr});                 // [N * 3]
        t.output(t.binary(Op::mul, t.reshape(flat, {n, t.dim_const(3)}), x));  // back to [N, 3]
        Node* r = t.reshape(x, {t.dim_const(3), nullptr});                       // [3, N]
        t.output(t.binary(Op::add, r, t.constant(2, DType::f32)));
      },
      [](const std::vector<ArgValue>& args) {
        int64_t n = args[0].tensor.shape[0];
        return std::vector<Ref>{
            {{n, 3}, [](const std::vector<ArgValue>& a, const Coord& c) { return std::exp(arg(a, 0, c)) * arg(a, 0, c); }},
            {{3, n}, [n](const std::vector<ArgValue>& a, const Coord& c) {
               return arg(a, 0, unflat(c[0] * n + c[1], {n, 3})) + 2.f;
             }}};
      },
      7);
  EXPECT_EQ(k, 2);  // one kernel per output (their shapes all differ): no kernel for a remap
}

TEST(ShapeOps, TransposeSqueezeUnsqueezeFlip) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {fixed(2), fixed(1), sym("N"), fixed(3)}, "x");
        Node* e = t.binary(Op::mul, x, t.constant(3, DType::f32));
        t.output(t.transpose(e, {2, 0, 3, 1}));                    // [N, 2, 3, 1]
        t.output(t.unsqueeze(t.squeeze(e), -1));                   // [2, N, 3, 1]
        t.output(t.flip(t.squeeze(e, {1}), {0, -1}));              // [2, N, 3] reversed on 0 and 2
        t.output(t.flip(e));                                       // all axes
      },
      [](const std::vector<ArgValue>& args) {
        int64_t n = args[0].tensor.shape[2];
        return std::vector<Ref>{
            {{n, 2, 3, 1}, [](const std::vector<ArgValue>& a, const Coord& c) { return 3 * arg(a, 0, {c[1], c[3], c[0], c[2]}); }},
            {{2, n, 3, 1}, [](const std::vector<ArgValue>& a, const Coord& c) { return 3 * arg(a, 0, {c[0], 0, c[1], c[2]}); }},
            {{2, n, 3}, [](const std::vector<ArgValue>& a, const Coord& c) { return 3 * arg(a, 0, {1 - c[0], 0, c[1], 2 - c[2]}); }},
            {{2, 1, n, 3}, [n](const std::vector<ArgValue>& a, const Coord& c) {
               return 3 * arg(a, 0, {1 - c[0], 0, n - 1 - c[2], 2 - c[3]});
             }}};
      });
  EXPECT_EQ(k, 4);  // one kernel per output (their shapes all differ): no kernel for a remap
}

TEST(ShapeOps, ConcatStackRepeat) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* a = t.input(DType::f32, {sym("N"), fixed(2)}, "a");
        Node* b = t.input(DType::f32, {sym("N"), fixed(3)}, "b");
        Node* c = t.input(DType::i32, {sym("N"), fixed(1)}, "c");
        // Along axis 1: a computed value, an argument and an i32 argument (promoted to f32).
        t.output(t.binary(Op::add, t.concat({t.unary(Op::exp, a), b, c}, -1), t.constant(1, DType::f32)));
        // Along the symbolic axis 0.
        t.output(t.concat({a, t.unary(Op::neg, a)}, 0));
        t.output(t.stack({a, t.binary(Op::mul, a, a)}, 1));          // [N, 2, 2]
        t.output(t.repeat(t.unary(Op::abs, b), 3, 1));               // [N, 9]
        t.output(t.repeat(a, 2));                                    // flattened: [N * 2 * 2]
      },
      [](const std::vector<ArgValue>& args) {
        int64_t n = args[0].tensor.shape[0];
        return std::vector<Ref>{
            {{n, 6}, [](const std::vector<ArgValue>& x, const Coord& c) {
               float v = c[1] < 2 ? std::exp(arg(x, 0, c)) : c[1] < 5 ? arg(x, 1, {c[0], c[1] - 2}) : arg(x, 2, {c[0], 0});
               return v + 1.f;
             }},
            {{2 * n, 2}, [n](const std::vector<ArgValue>& x, const Coord& c) {
               return c[0] < n ? arg(x, 0, c) : -arg(x, 0, {c[0] - n, c[1]});
             }},
            {{n, 2, 2}, [](const std::vector<ArgValue>& x, const Coord& c) {
               float v = arg(x, 0, {c[0], c[2]});
               return c[1] == 0 ? v : v * v;
             }},
            {{n, 9}, [](const std::vector<ArgValue>& x, const Coord& c) { return std::fabs(arg(x, 1, {c[0], c[1] / 3})); }},
            {{n * 4}, [](const std::vector<ArgValue>& x, const Coord& c) { return arg(x, 0, {c[0] / 2 / 2, c[0] / 2 % 2}); }}};
      },
      6);
  EXPECT_EQ(k, 5);  // one kernel per output (their shapes all differ): no kernel for a remap
}

TEST(ShapeOps, SlicesWithStepsAndNegativeBounds) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {fixed(7), fixed(5)}, "x");
        Node* e = t.unary(Op::exp, x);
        t.output(t.gather(e, {slice(std::nullopt, std::nullopt, -1)}));          // x[::-1]
        t.output(t.gather(x, {slice(5, 1, -2), slice(-3, std::nullopt)}));       // x[5:1:-2, -3:]
        t.output(t.gather(e, {at(t.constant(-1, DType::i32)), slice(-1, -6, -1)}));  // x[-1, -1:-6:-1]
        t.output(t.gather(x, {slice(-100, 100, 3), at(t.constant(-2, DType::i32))}));  // x[-100:100:3, -2]
      },
      [](const std::vector<ArgValue>&) {
        return std::vector<Ref>{
            {{7, 5}, [](const std::vector<ArgValue>& a, const Coord& c) { return std::exp(arg(a, 0, {6 - c[0], c[1]})); }},
            {{2, 3}, [](const std::vector<ArgValue>& a, const Coord& c) { return arg(a, 0, {5 - 2 * c[0], 2 + c[1]}); }},
            {{5}, [](const std::vector<ArgValue>& a, const Coord& c) { return std::exp(arg(a, 0, {6, 4 - c[0]})); }},
            {{3}, [](const std::vector<ArgValue>& a, const Coord& c) { return arg(a, 0, {3 * c[0], 3}); }}};
      });
  EXPECT_EQ(k, 4);  // one kernel per output (their shapes all differ): no kernel for a remap
}

// A chain through every op that is a remap of a computed value stays one kernel.
TEST(ShapeOps, LongChainIsOneKernel) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {fixed(4), fixed(6)}, "x");
        Node* y = t.unary(Op::exp, x);
        y = t.flip(t.transpose(t.reshape(y, dims(t, {2, 12}))), {0});     // [12, 2]
        y = t.concat({y, t.unary(Op::sin, y)}, 1);                         // [12, 4]
        y = t.repeat(t.unsqueeze(y, 0), 2, 0);                             // [2, 12, 4]
        t.output(t.binary(Op::mul, t.squeeze(t.gather(y, {slice(1, 2)}), {0}), t.constant(2, DType::f32)));
      },
      [](const std::vector<ArgValue>&) {
        return std::vector<Ref>{{{12, 4}, [](const std::vector<ArgValue>& a, const Coord& c) {
                                   int64_t r = 11 - c[0];  // flipped row of the [12, 2] transpose
                                   float v = std::exp(arg(a, 0, unflat((c[1] % 2) * 12 + r, {4, 6})));
                                   return 2 * (c[1] < 2 ? v : std::sin(v));
                                 }}};
      });
  EXPECT_EQ(k, 1);
}

// Every pass on its own keeps the interpreter's results (the verifier runs after each).
TEST(ShapeOps, InterpreterAgreesAfterEachPass) {
  Tracer t("each_pass");
  Node* x = t.input(DType::f32, {sym("N"), fixed(4)}, "x");
  Node* y = t.concat({t.unary(Op::exp, x), t.flip(t.unary(Op::sin, x), {0})}, 0);     // [N + N, 4]
  y = t.transpose(t.reshape(y, {nullptr, t.dim_const(2), t.dim_const(2)}), {1, 0, 2});  // [2, 2N * 2, 2]
  t.output(t.binary(Op::add, t.repeat(y, 2, -1), t.constant(1, DType::f32)));
  t.output(t.stack({t.gather(x, {slice(std::nullopt, std::nullopt, -2)}), t.gather(x, {slice(std::nullopt, std::nullopt, 2)})}, 1));
  std::unique_ptr<Program> p = t.release();
  verify(*p);
  std::mt19937 rng(7);
  std::vector<ArgValue> args = random_args(*p, rng, 5);
  std::vector<HostTensor> want = interpret(*p, copy_args(args));
  bool formed = false;
  for (const PassInfo& pass : pipeline_passes()) {
    pass.fn(*p, PipelineOptions{});
    formed |= std::string(pass.name) == "fuse_kernels";
    verify(*p, VerifyOptions{formed});
    ASSERT_EQ(compare(want, interpret(*p, copy_args(args))), "") << "after " << pass.name << "\n" << print_program(*p);
  }
}

// A concat of k parts of size N along a symbolic axis recomputes its parts (no extra kernel).
TEST(ShapeOps, ConcatAlongASymbolicAxisIsOneKernel) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* x = t.input(DType::f32, {sym("N"), fixed(5)}, "x");
        t.output(t.binary(Op::mul, t.concat({t.unary(Op::exp, x), t.unary(Op::sin, x)}, 0), t.constant(2, DType::f32)));
      },
      [](const std::vector<ArgValue>& args) {
        int64_t n = args[0].tensor.shape[0];
        return std::vector<Ref>{{{2 * n, 5}, [n](const std::vector<ArgValue>& a, const Coord& c) {
                                   return 2 * (c[0] < n ? std::exp(arg(a, 0, c)) : std::sin(arg(a, 0, {c[0] - n, c[1]})));
                                 }}};
      });
  EXPECT_EQ(k, 1);
}

// Scalars (an argument, a computed one) take a shape; a [1, 1] value squeezes to a scalar.
TEST(ShapeOps, Scalars) {
  int k = run_and_check(
      [](Tracer& t) {
        Node* s = t.scalar(DType::f32, "s");
        Node* x = t.input(DType::f32, {fixed(1), fixed(1)}, "x");
        t.output(t.reshape(s, dims(t, {1, 1})));
        t.output(t.unsqueeze(t.unary(Op::exp, s), 0));
        t.output(t.squeeze(t.unary(Op::exp, x)));
        t.output(t.reshape(t.binary(Op::mul, x, s), dims(t, {1})));
      },
      [](const std::vector<ArgValue>& args) {
        auto s = [](const std::vector<ArgValue>& a) { return w2f(a[0].word); };
        return std::vector<Ref>{
            {{1, 1}, [s](const std::vector<ArgValue>& a, const Coord&) { return s(a); }},
            {{1}, [s](const std::vector<ArgValue>& a, const Coord&) { return std::exp(s(a)); }},
            {{}, [](const std::vector<ArgValue>& a, const Coord&) { return std::exp(arg(a, 1, {0, 0})); }},
            {{1}, [s](const std::vector<ArgValue>& a, const Coord&) { return arg(a, 1, {0, 0}) * s(a); }}};
      });
  EXPECT_LE(k, 4);
}

TEST(ShapeOps, ReshapeOfAnArgumentIsOneLoad) {
  Tracer t("reshape_load");
  Node* x = t.input(DType::f32, {fixed(4), fixed(6)}, "x");
  Node* y = t.transpose(t.reshape(t.flip(x), dims(t, {3, 8})));
  ASSERT_EQ(y->op, Op::load);
  EXPECT_EQ(y->operand(0), x) << print_program(t.program());
}

TEST(ShapeOps, ErrorsNameTheUserLine) {
  Tracer t("errors");
  Node* x = t.input(DType::f32, {fixed(4), fixed(6)}, "x");
  Node* y = t.input(DType::f32, {sym("N"), fixed(6)}, "y");
  t.set_loc("user.py", 17);
  try {
    t.reshape(x, dims(t, {5, 5}));
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("user.py:17"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("24 elements"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t.reshape(x, dims(t, {-1, 5})), ShapeError);
  EXPECT_THROW(t.reshape(x, dims(t, {-1, -1})), ShapeError);
  EXPECT_THROW(t.reshape(y, dims(t, {-1, 4})), ShapeError);   // N * 6 / 4 is not known to divide
  EXPECT_THROW(t.reshape(y, dims(t, {6, 5})), ShapeError);    // cannot tell the sizes agree
  EXPECT_NO_THROW(t.reshape(y, {t.dim_const(2), y->shape[0], t.dim_const(3)}));
  EXPECT_THROW(t.squeeze(x, {0}), ShapeError);
  EXPECT_THROW(t.transpose(x, {0, 0}), ShapeError);
  EXPECT_THROW(t.concat({x, y}, 1), ShapeError);
  EXPECT_THROW(t.stack({x, t.transpose(x)}), ShapeError);
  EXPECT_THROW(t.flip(x, {2}), ShapeError);
  EXPECT_THROW(t.repeat(x, -1, 0), ShapeError);
  EXPECT_THROW(t.gather(x, {at(t.constant(-5, DType::i32))}), ShapeError);
}
