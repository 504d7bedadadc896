// Helpers shared by the code generator tests (test_codegen_cpu.cpp, test_codegen_vulkan.cpp):
// flat memory accesses for hand-built kernels, finishing a hand-built program, random arguments
// with edge values, which elementwise ops eval.cpp defines on a dtype, and kernels of every op
// and of every conversion.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/interp/interp.h"
#include "core/ir/builder.h"
#include "core/ir/verifier.h"
#include "core/passes/split_host.h"
#include "programs.h"

namespace ember::codegen_test {

// A load, store or atomic of element `idx` of a memory, addressed flat.
inline Node* ld(Builder& b, Node* mem, Node* idx, const Shape& s) {
  Node* n = b.load(mem, {idx}, s, IndexMode::unsafe);
  n->flat = true;
  return n;
}
inline void st(Builder& b, Node* mem, Node* idx, Node* v, const Shape& s) {
  b.store(mem, v, {idx}, s, IndexMode::unsafe)->flat = true;
}
inline Node* at(Builder& b, AtomicKind k, Node* mem, Node* idx, Node* v, const Shape& s) {
  Node* n = b.atomic(k, mem, v, {idx}, s, IndexMode::unsafe);
  n->flat = true;
  return n;
}
// A hand-built program in post-split_host form, verified.
inline void finish(Program& p) {
  split_host(p);
  verify(p, VerifyOptions{true});
}

// Random words of dtype t, never zero (floats in (-range, range)), with `edges` written over the
// first elements.
inline HostTensor random_tensor(DType t, std::vector<int64_t> shape, uint32_t seed,
                                const std::vector<uint32_t>& edges = {}, float range = 8.0f) {
  HostTensor h = HostTensor::alloc(t, std::move(shape), false);
  std::mt19937 rng(seed);
  for (int64_t k = 0; k < h.size(); ++k) {
    uint32_t w = 0;
    switch (t) {
      case DType::f32: { float f = 0; while (f == 0) f = std::uniform_real_distribution<float>(-range, range)(rng); w = f2w(f); break; }
      case DType::i32: { int v = 0; while (v == 0) v = std::uniform_int_distribution<int>(-100, 100)(rng); w = i2w(v); break; }
      case DType::u32: w = std::uniform_int_distribution<uint32_t>(1, 100000)(rng); break;
      default: w = rng() & 1u; break;
    }
    h.data[k] = w;
  }
  for (size_t k = 0; k < edges.size() && static_cast<int64_t>(k) < h.size(); ++k) h.data[k] = edges[k];
  return h;
}

inline std::vector<ArgValue> deep_copy(const std::vector<ArgValue>& args) { return testing::copy_args(args); }

// A word as a value of dtype t, for failure messages.
inline std::string word_str(uint32_t w, DType t) {
  return t == DType::f32 ? std::to_string(w2f(w)) : t == DType::i32 ? std::to_string(w2i(w)) : std::to_string(w);
}

// Ops whose result eval.cpp defines for operands of dtype t.
inline bool defined_on(Op op, DType t) {
  if (op == Op::cast || op == Op::bitcast || op == Op::select) return false;
  if (!has_flag(op, F_ELEMENTWISE)) return false;
  if (t == DType::f32) return op != Op::bnot && op != Op::band && op != Op::bor && op != Op::bxor && op != Op::shl && op != Op::shr;
  return op_info(op).rule != DTypeRule::Float;
}
inline DType result_dtype(Op op, DType t) {
  DTypeRule r = op_info(op).rule;
  return r == DTypeRule::Bool ? DType::boolean : r == DTypeRule::Float ? DType::f32 : t;
}

// out_k[i] = op_k(a[i], b[i]) for the ops of `ops` on inputs a, b of dtype t, in one kernel.
inline void ops_program(Program& p, DType t, const std::vector<Op>& ops) {
  Builder b(p);
  Shape s{b.shape_arg("N")};
  Node* A = b.input(t, s, 0, "a");
  Node* B = b.input(t, s, 1, "b");
  std::vector<Node*> outs;
  for (Op op : ops) outs.push_back(b.buffer(result_dtype(op, t), s, false));
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  Node* a = ld(b, A, i, s);
  Node* c = ld(b, B, i, s);
  auto apply = [&](Op op) {
    if (op == Op::fma) return b.fma(a, c, a);
    return op_info(op).arity == 1 ? b.unary(op, a) : b.binary(op, a, c);
  };
  for (size_t k = 0; k < ops.size(); ++k) st(b, outs[k], i, apply(ops[k]), s);
  b.set_insert_end(p.root());
  for (size_t k = 0; k < outs.size(); ++k) b.output(outs[k], static_cast<int>(k));
  finish(p);
}

// Every cast and bitcast between f32, i32, u32 and bool of inputs x<dtype> (args 0-3), and a
// select on scalar params sf, si, su, sb (args 4-7) into the last output.
inline void casts_program(Program& p) {
  Builder b(p);
  Shape s{b.shape_arg("N")};
  const DType types[] = {DType::f32, DType::i32, DType::u32, DType::boolean};
  std::vector<Node*> in, outs;
  for (int k = 0; k < 4; ++k) in.push_back(b.input(types[k], s, k, std::string("x") + dtype_name(types[k])));
  Node* sf = b.scalar_arg(DType::f32, 4, "sf");
  Node* si = b.scalar_arg(DType::i32, 5, "si");
  Node* su = b.scalar_arg(DType::u32, 6, "su");
  Node* sb = b.scalar_arg(DType::boolean, 7, "sb");
  // Bitcasts to bool are left out: eval.cpp keeps the word (a "bool" that is neither 0 nor 1),
  // generated code yields word != 0.
  auto bitcast_ok = [&](int j) { return types[j] != DType::boolean; };
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j)
      if (j != k) {
        outs.push_back(b.buffer(types[j], s, false));
        if (bitcast_ok(j)) outs.push_back(b.buffer(types[j], s, false));
      }
  Node* sel = b.buffer(DType::f32, s, false);
  b.set_insert_end(b.kernel(s));
  Node* i = b.index(0, s);
  std::vector<Node*> v;
  for (int k = 0; k < 4; ++k) v.push_back(ld(b, in[k], i, s));
  size_t o = 0;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j)
      if (j != k) {
        st(b, outs[o++], i, b.cast(v[k], types[j]), s);
        if (bitcast_ok(j)) st(b, outs[o++], i, b.bitcast(v[k], types[j]), s);
      }
  Node* x = b.select(b.binary(Op::gt, v[0], sf), b.binary(Op::mul, v[0], sf), b.cast(b.binary(Op::add, v[1], si), DType::f32));
  Node* y = b.select(b.binary(Op::land, v[3], sb), b.cast(b.binary(Op::bxor, v[2], su), DType::f32), x);
  st(b, sel, i, y, s);
  b.set_insert_end(p.root());
  for (size_t k = 0; k < outs.size(); ++k) b.output(outs[k], static_cast<int>(k));
  b.output(sel, static_cast<int>(outs.size()));
  finish(p);
}

}  // namespace ember::codegen_test
