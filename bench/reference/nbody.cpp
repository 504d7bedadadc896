// Hand-written fused N-body step (the bench's "cpp" reference): one parallel loop over
// bodies i, an inner loop over all bodies j, float math, no temporaries of size N*N.
// Same formula as DESIGN.md section 5, including the j == i term (d = 0, so it adds 0).
#include <cmath>
#include <vector>

extern "C" void nbody_step(const float* X, const float* V, float dt, int n,
                           float* X2, float* V2) {
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
    float fx = 0.0f, fy = 0.0f, fz = 0.0f;
#pragma omp simd reduction(+ : fx, fy, fz)
    for (int j = 0; j < n; ++j) {
      const float dx = xi - xs[j], dy = yi - ys[j], dz = zi - zs[j];
      const float r2 = dx * dx + dy * dy + dz * dz + 1e-4f;
      const float inv = 1.0f / (r2 * std::sqrt(r2));
      fx -= dx * inv;
      fy -= dy * inv;
      fz -= dz * inv;
    }
    const float vx = V[3 * i + 0] + fx * dt;
    const float vy = V[3 * i + 1] + fy * dt;
    const float vz = V[3 * i + 2] + fz * dt;
    V2[3 * i + 0] = vx;
    V2[3 * i + 1] = vy;
    V2[3 * i + 2] = vz;
    X2[3 * i + 0] = X[3 * i + 0] + vx * dt;
    X2[3 * i + 1] = X[3 * i + 1] + vy * dt;
    X2[3 * i + 2] = X[3 * i + 2] + vz * dt;
  }
}
