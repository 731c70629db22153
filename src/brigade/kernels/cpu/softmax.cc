// Rows are short (a router has E logits, E ~ 8-64), so plain loops with libm exp: the router
// matmul costs C times more per row.
#include "brigade/kernels/cpu/softmax.h"

#include <cmath>

namespace brigade {

void softmax_forward(float* probs, const float* logits, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const float* in = logits + n * V;
    float* out = probs + n * V;
    float mx = in[0];
    for (int64_t j = 1; j < V; ++j) mx = in[j] > mx ? in[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < V; ++j) {
      out[j] = std::exp(in[j] - mx);
      sum += out[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < V; ++j) out[j] *= inv;
  }
}

void softmax_backward(float* dlogits, const float* probs, const float* dprobs, int64_t N,
                      int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * V;
    const float* dp = dprobs + n * V;
    double dot = 0.0;
    for (int64_t j = 0; j < V; ++j) dot += static_cast<double>(p[j]) * dp[j];
    const float d = static_cast<float>(dot);
    float* dl = dlogits + n * V;
    for (int64_t j = 0; j < V; ++j) dl[j] += p[j] * (dp[j] - d);
  }
}

}  // namespace brigade
