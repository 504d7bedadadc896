// Packed matrix products for the cpp dialect (its prelude embeds this text; core/IR.md "CPU code
// shape"). A kernel whose threads each sum A(i, k) * B(k, j) over k in a top-level loop
// (core/analysis/contraction.h) computes all its sums here, block by block, and then runs the
// rest of its body (the epilogue: bias, activation, stores) on each block while it is in cache.
//
// Blocking as in BLIS/GotoBLAS: a block of MC rows x NC columns of sums is accumulated over K in
// steps of KC; for each step the rows' A(i, k) are copied into MR-row panels and the columns'
// B(k, j) into NR-column panels (contiguous, zero-padded), and an MR x NR register-blocked
// micro-kernel adds their products. Every sum is formed as the thread's loop forms it: from 0,
// k = 0, 1, ..., each product rounded and then added (no fused multiply-add; the backend compiles
// with -ffp-contract=off), so the results equal the interpreter's bit for bit.
#ifndef EMBER_CPU_GEMM_H
#define EMBER_CPU_GEMM_H
#include <cstdint>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace ember_gemm {
namespace {

constexpr int64_t MR = 6, NR = 16;          // the micro-kernel's tile: 12 vectors of 8 sums
constexpr int64_t MC = 96, KC = 256, NC = 256;  // A block 96 KiB, B block 256 KiB, sums 96 KiB

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

#if defined(__GNUC__)
typedef float v8 __attribute__((vector_size(32), aligned(4), may_alias));

// c[MR x NR] (row stride ldc) = (first ? 0 : c) + sum over k < kc of a[k][r] * b[k][c], each
// element adding its products in k order. a: MR values per k, b: NR values per k.
inline void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  v8 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = v8{};
  } else {
    c00 = *(const v8*)(c + 0 * ldc); c01 = *(const v8*)(c + 0 * ldc + 8);
    c10 = *(const v8*)(c + 1 * ldc); c11 = *(const v8*)(c + 1 * ldc + 8);
    c20 = *(const v8*)(c + 2 * ldc); c21 = *(const v8*)(c + 2 * ldc + 8);
    c30 = *(const v8*)(c + 3 * ldc); c31 = *(const v8*)(c + 3 * ldc + 8);
    c40 = *(const v8*)(c + 4 * ldc); c41 = *(const v8*)(c + 4 * ldc + 8);
    c50 = *(const v8*)(c + 5 * ldc); c51 = *(const v8*)(c + 5 * ldc + 8);
  }
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    const v8 b0 = *(const v8*)b, b1 = *(const v8*)(b + 8);
    float x = a[0];
    c00 += x * b0; c01 += x * b1;
    x = a[1];
    c10 += x * b0; c11 += x * b1;
    x = a[2];
    c20 += x * b0; c21 += x * b1;
    x = a[3];
    c30 += x * b0; c31 += x * b1;
    x = a[4];
    c40 += x * b0; c41 += x * b1;
    x = a[5];
    c50 += x * b0; c51 += x * b1;
  }
  *(v8*)(c + 0 * ldc) = c00; *(v8*)(c + 0 * ldc + 8) = c01;
  *(v8*)(c + 1 * ldc) = c10; *(v8*)(c + 1 * ldc + 8) = c11;
  *(v8*)(c + 2 * ldc) = c20; *(v8*)(c + 2 * ldc + 8) = c21;
  *(v8*)(c + 3 * ldc) = c30; *(v8*)(c + 3 * ldc + 8) = c31;
  *(v8*)(c + 4 * ldc) = c40; *(v8*)(c + 4 * ldc + 8) = c41;
  *(v8*)(c + 5 * ldc) = c50; *(v8*)(c + 5 * ldc + 8) = c51;
}
#else
inline void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  float acc[MR][NR];
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t j = 0; j < NR; ++j) acc[r][j] = first ? -0.0f : c[r * ldc + j];  // -0.0: as Ember's sums
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR)
    for (int64_t r = 0; r < MR; ++r)
      for (int64_t j = 0; j < NR; ++j) acc[r][j] += a[r] * b[j];
  for (int64_t r = 0; r < MR; ++r)
    for (int64_t j = 0; j < NR; ++j) c[r * ldc + j] = acc[r][j];
}
#endif

// Copies `n` (<= W) lines of `kc` values into one panel of W values per k, zero-padded:
// panel[k * W + l] = src[base[l] + (k0 + k) * step[l]]. Lines that are contiguous (step equal,
// bases consecutive) are copied as rows.
template <int64_t W>
inline void pack_panel(float* panel, const float* src, const int64_t* base, const int64_t* step, int64_t n,
                       int64_t k0, int64_t kc) {
  bool rows = n == W;
  for (int64_t l = 1; l < n && rows; ++l) rows = step[l] == step[0] && base[l] == base[0] + l;
  if (rows) {
    const float* s = src + base[0] + k0 * step[0];
    for (int64_t k = 0; k < kc; ++k, s += step[0]) std::memcpy(panel + k * W, s, sizeof(float) * W);
    return;
  }
  // Lines with one step along k (rows of a transposed or gathered operand): line by line, one
  // load and one store per value.
  bool same = n > 0;
  for (int64_t l = 1; l < n && same; ++l) same = step[l] == step[0];
  if (same) {
    const int64_t st = step[0];
    for (int64_t l = 0; l < n; ++l) {
      const float* s = src + base[l] + k0 * st;
      float* p = panel + l;
      for (int64_t k = 0; k < kc; ++k) p[k * W] = s[k * st];
    }
    for (int64_t l = n; l < W; ++l)
      for (int64_t k = 0; k < kc; ++k) panel[k * W + l] = 0.0f;
    return;
  }
  // Local copies: the kernels compile with -fno-strict-aliasing, and a store into the panel
  // must not make the compiler reload the lines' positions.
  const float* line[W];
  int64_t st[W];
  for (int64_t l = 0; l < W; ++l) {
    line[l] = l < n ? src + base[l] + k0 * step[l] : nullptr;
    st[l] = l < n ? step[l] : 0;
  }
  for (int64_t k = 0; k < kc; ++k) {
    float* p = panel + k * W;
    for (int64_t l = 0; l < n; ++l) {
      p[l] = *line[l];
      line[l] += st[l];
    }
    for (int64_t l = n; l < W; ++l) p[l] = 0.0f;
  }
}

// The sums of one kernel: `batches` independent products of M x N sums over K. a_line(b, i,
// &step) gives the offset of A(i, 0) in `a` for batch b and A(i, k)'s step along k (any i, b);
// b_line(b, j, &step) likewise for B(0, j). epilogue(sums, ld, b, i0, i1, j0, j1) consumes the
// sums of rows [i0, i1) x columns [j0, j1) of batch b: sums[(i - i0) * ld + (j - j0)].
// The batches' MR-row panels are split evenly over the threads (parallel: use every thread).
template <class ALine, class BLine, class Epilogue>
void run(int64_t batches, int64_t M, int64_t N, int64_t K, const float* a, const float* b, ALine a_line,
         BLine b_line, Epilogue epilogue, bool parallel) {
  const int64_t panels = (M + MR - 1) / MR, units = batches * panels;
  if (units == 0 || N <= 0) return;
#pragma omp parallel if (parallel)
  {
    int64_t nt = 1, t = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads();
    t = omp_get_thread_num();
#endif
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    const int64_t mc_max = round_up(M < MC ? M : MC, MR), nc_max = round_up(N < NC ? N : NC, NR);
    const int64_t kc_max = K < KC ? (K > 0 ? K : 1) : KC;
    // On this thread's stack (mapped once, no page faults per call): at most ~450 KiB.
    const int64_t words = mc_max * kc_max + kc_max * nc_max + mc_max * nc_max + 16;
    float* mem = static_cast<float*>(__builtin_alloca(static_cast<size_t>(words) * sizeof(float) + 64));
    mem = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(mem) + 63) & ~uintptr_t{63});
    float* const ap = mem;
    float* const bp = ap + mc_max * kc_max;
    float* const sums = bp + kc_max * nc_max;
    int64_t base[NR], step[NR];
    for (int64_t u = u0; u < u1;) {
      const int64_t bt = u / panels, p0 = u % panels;
      const int64_t p1 = panels < p0 + (u1 - u) ? panels : p0 + (u1 - u);
      u += p1 - p0;
      const int64_t r_end = p1 * MR < M ? p1 * MR : M;
      for (int64_t ic = p0 * MR; ic < r_end; ic += MC) {
        const int64_t mc = r_end - ic < MC ? r_end - ic : MC;
        for (int64_t jc = 0; jc < N; jc += NC) {
          const int64_t nc = N - jc < NC ? N - jc : NC, ld = round_up(nc, NR);
          if (K <= 0) std::memset(sums, 0, sizeof(float) * static_cast<size_t>(round_up(mc, MR) * ld));
          for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = K - pc < KC ? K - pc : KC;
            for (int64_t jp = 0; jp < nc; jp += NR) {
              const int64_t n = nc - jp < NR ? nc - jp : NR;
              for (int64_t l = 0; l < n; ++l) base[l] = b_line(bt, jc + jp + l, &step[l]);
              pack_panel<NR>(bp + jp * kc, b, base, step, n, pc, kc);
            }
            for (int64_t ip = 0; ip < mc; ip += MR) {
              const int64_t n = mc - ip < MR ? mc - ip : MR;
              for (int64_t l = 0; l < n; ++l) base[l] = a_line(bt, ic + ip + l, &step[l]);
              pack_panel<MR>(ap + ip * kc, a, base, step, n, pc, kc);
            }
            for (int64_t jp = 0; jp < nc; jp += NR)
              for (int64_t ip = 0; ip < mc; ip += MR)
                micro(kc, ap + ip * kc, bp + jp * kc, sums + ip * ld + jp, ld, pc == 0);
          }
          epilogue(static_cast<const float*>(sums), ld, bt, ic, ic + mc, jc, jc + nc);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ember_gemm
#endif  // EMBER_CPU_GEMM_H
