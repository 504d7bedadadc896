// Hand-written gradient of the N-body potential energy (the nbody_grad bench's "cpp" reference):
// E = -1/2 sum_{i,j} 1 / sqrt(|x_i - x_j|^2 + 1e-4), dE/dx_i = sum_j (x_i - x_j) / r2^(3/2), i.e.
// nbody.cpp's force loop with the sign flipped: one parallel loop over bodies i, an inner loop
// over all bodies j (the j == i term adds 0), float math, no temporaries of size N*N.
#include <cmath>
#include <vector>

extern "C" void nbody_energy_grad(const float* X, int n, float* G) {
  // Structure-of-arrays copy so the inner j loop reads contiguous floats and vectorizes.
  std::vector<float> px(n), py(n), pz(n);
  for (int j = 0; j < n; ++j) {
    px[j] = X[3 * j + 0];
    py[j] = X[3 * j + 1];
    pz[j] = X[3 * j + 2];
  }
  const float* xs = px.data();
  const float* ys = py.data();
  const float* zs = pz.data();
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const float xi = xs[i], yi = ys[i], zi = zs[i];
    float gx = 0.0f, gy = 0.0f, gz = 0.0f;
#pragma omp simd reduction(+ : gx, gy, gz)
    for (int j = 0; j < n; ++j) {
      const float dx = xi - xs[j], dy = yi - ys[j], dz = zi - zs[j];
      const float r2 = dx * dx + dy * dy + dz * dz + 1e-4f;
      const float inv = 1.0f / (r2 * std::sqrt(r2));
      gx += dx * inv;
      gy += dy * inv;
      gz += dz * inv;
    }
    G[3 * i + 0] = gx;
    G[3 * i + 1] = gy;
    G[3 * i + 2] = gz;
  }
}
