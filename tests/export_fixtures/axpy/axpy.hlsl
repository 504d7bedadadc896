// y[t] += a * x[t] * float(step + 1), for t < threads (Shader Model 5.0, as Ember's `hlsl` target).
RWStructuredBuffer<float> m0 : register(u0);
RWStructuredBuffer<float> m1 : register(u1);
cbuffer EmberParams : register(b0) {
  uint threads;
  float a;
  int step;
};
[numthreads(64, 1, 1)]
void axpy(uint3 id : SV_DispatchThreadID) {
  uint t = id.x;
  if (t < threads) m1[t] += a * m0[t] * (float)(step + 1);
}
