// Contractions: a kernel of rank >= 2 whose threads each sum A(i, k) * B(k, j) in a top-level
// loop (matmul, and the transposed and batched products of its derivatives). The cpp dialect
// computes such a kernel's sums with packed panels and a register-blocked micro-kernel
// (codegen/cpu_gemm.h) and then runs the rest of the body per element; tile_threads leaves
// these kernels to it.
#pragma once
#include "core/ir/node.h"

namespace ember {

// The parts of a contraction kernel. i and j are the kernel's last two coordinates.
struct Contraction {
  const Node* var = nullptr;   // the f32 accumulator: starts at -0.0 (a lowered sum), set only by the loop
  const Node* loop = nullptr;  // k in [0, end) by 1, end the same for every thread
  const Node* a = nullptr;     // f32 load that does not depend on j
  const Node* b = nullptr;     // f32 load that does not depend on i
};

// Whether kernel k is a contraction (the loop body is the loads, their product, the add into
// the accumulator, its set, and integer address math; no atomics, barriers, break or continue
// anywhere in the kernel; A and B are memories the kernel does not write), and each load's
// address is `base + k * step` with base and step independent of k: before lower_indexing, a
// coordinate that depends on k is k itself and provably in range; after it, the flat index is
// built from adds, subs and multiplications by k-independent values. Fills *out when non-null.
bool find_contraction(const Node* k, Contraction* out);

// Whether e (an index computed inside `loop`) is `base + k * step` as above.
bool k_affine(const Node* e, const Node* loop);

}  // namespace ember
