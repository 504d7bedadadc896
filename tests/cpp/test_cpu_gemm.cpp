// codegen/cpu_gemm.h on its own: packed products of odd shapes (not multiples of MR, NR, MC, KC
// or NC), transposed and gathered operands and batches equal, bit for bit, the sequential sum
// each kernel thread forms (from 0, k in order, each product rounded then added).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "codegen/cpu_gemm.h"

namespace {

struct Case {
  int64_t batches, M, N, K;
  bool a_t, b_t;  // A stored as [K, M], B as [N, K]
};

void check(const Case& c, bool parallel) {
  std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.N * 7 + c.K));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(c.batches * c.M * c.K)), b(static_cast<size_t>(c.batches * c.K * c.N));
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  auto a_at = [&](int64_t bt, int64_t i, int64_t k) {
    return bt * c.M * c.K + (c.a_t ? k * c.M + i : i * c.K + k);
  };
  auto b_at = [&](int64_t bt, int64_t k, int64_t j) {
    return bt * c.K * c.N + (c.b_t ? j * c.K + k : k * c.N + j);
  };
  std::vector<float> got(static_cast<size_t>(c.batches * c.M * c.N), -7.0f);
  auto a_line = [&](int64_t bt, int64_t i, int64_t* step) {
    *step = a_at(0, 0, 1) - a_at(0, 0, 0);
    return a_at(bt, i, 0);
  };
  auto b_line = [&](int64_t bt, int64_t j, int64_t* step) {
    *step = b_at(0, 1, 0) - b_at(0, 0, 0);
    return b_at(bt, 0, j);
  };
  auto epilogue = [&](const float* sums, int64_t ld, int64_t bt, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) got[static_cast<size_t>((bt * c.M + i) * c.N + j)] = sums[(i - i0) * ld + j - j0];
  };
  ember_gemm::run(c.batches, c.M, c.N, c.K, a.data(), b.data(), a_line, b_line, epilogue, parallel);
  for (int64_t bt = 0; bt < c.batches; ++bt)
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < c.K; ++k) {
          const float p = a[static_cast<size_t>(a_at(bt, i, k))] * b[static_cast<size_t>(b_at(bt, k, j))];
          s = s + p;
        }
        ASSERT_EQ(got[static_cast<size_t>((bt * c.M + i) * c.N + j)], s)
            << "batch " << bt << " element " << i << ", " << j << " of " << c.M << " x " << c.N << " x " << c.K;
      }
}

TEST(CpuGemm, OddShapesEqualTheSequentialSums) {
  const Case cases[] = {{1, 1, 1, 1, false, false},   {1, 7, 13, 5, false, false}, {1, 65, 129, 33, true, false},
                        {1, 97, 258, 300, false, true}, {3, 11, 17, 0, false, false}, {2, 200, 40, 513, true, true},
                        {4, 5, 3, 9, false, false}};
  for (const Case& c : cases)
    for (bool parallel : {false, true}) check(c, parallel);
}

}  // namespace
