// mask[t] = y[t] > 0 (bool: one uint word), cnt[0] counts them (Shader Model 5.0).
RWStructuredBuffer<float> m0 : register(u0);
RWStructuredBuffer<uint> m1 : register(u1);
RWStructuredBuffer<int> m2 : register(u2);
cbuffer EmberParams : register(b0) {
  uint threads;
};
[numthreads(64, 1, 1)]
void count_pos(uint3 id : SV_DispatchThreadID) {
  uint t = id.x;
  if (t >= threads) return;
  bool pos = m0[t] > 0.0;
  m1[t] = pos ? 1u : 0u;
  if (pos) {
    int old;
    InterlockedAdd(m2[0], 1, old);
  }
}
