// For k = 2 with S = p_a + p_b: g_a = p_a / S, g_b = p_b / S, so
//   d g_a / d p_a =  p_b / S^2,  d g_a / d p_b = -p_a / S^2   (and symmetrically for g_b),
// which gives dp_a = p_b (dg_a - dg_b) / S^2 and dp_b = p_a (dg_b - dg_a) / S^2.
#include "brigade/kernels/cpu/topk_gate.h"

#include "brigade/base/check.h"

namespace brigade {

void topk_gate_forward(int32_t* expert, float* gate, const float* probs, int64_t N, int64_t E,
                       int K) {
  BRIGADE_CHECK((K == 1 || K == 2) && K <= E) << "top_k " << K << " with " << E << " experts";
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * E;
    // Strict > keeps the lower index on ties.
    int32_t a = 0;
    for (int64_t e = 1; e < E; ++e)
      if (p[e] > p[a]) a = static_cast<int32_t>(e);
    if (K == 1) {
      expert[n] = a;
      gate[n] = p[a];
      continue;
    }
    int32_t b = a == 0 ? 1 : 0;
    for (int64_t e = b + 1; e < E; ++e)
      if (e != a && p[e] > p[b]) b = static_cast<int32_t>(e);
    const float s = p[a] + p[b];
    expert[2 * n] = a;
    expert[2 * n + 1] = b;
    gate[2 * n] = p[a] / s;
    gate[2 * n + 1] = p[b] / s;
  }
}

void topk_gate_backward(float* dprobs, const float* probs, const int32_t* expert,
                        const float* dgate, int64_t N, int64_t E, int K) {
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * E;
    float* dp = dprobs + n * E;
    if (K == 1) {
      dp[expert[n]] += dgate[n];
      continue;
    }
    const int32_t a = expert[2 * n], b = expert[2 * n + 1];
    const float s = p[a] + p[b];
    const float diff = (dgate[2 * n] - dgate[2 * n + 1]) / (s * s);
    dp[a] += p[b] * diff;
    dp[b] -= p[a] * diff;
  }
}

}  // namespace brigade
