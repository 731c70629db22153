// Fused softmax + cross-entropy. Each row's log-sum-exp is computed around the row maximum
// (so exp never overflows) and saved; backward rebuilds softmax = exp(logit - lse) from it.
// exp is the four-wide fast_exp of vec.h; the row sum is accumulated in float over short runs
// and in double across them, exact enough for a 50k vocabulary.
#include "brigade/kernels/cpu/crossentropy.h"

#include <cmath>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/vec.h"

namespace brigade {

void crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                          int64_t N, int64_t V) {
  BRIGADE_CHECK(V > 0) << "empty vocabulary";
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const float mx = detail::max_of(row, V);
    const float l = mx + static_cast<float>(std::log(detail::sum_exp_shifted(row, mx, V)));
    lse[n] = l;
    const int32_t tgt = targets[n];
    BRIGADE_CHECK(tgt < V) << "target " << tgt << " >= vocabulary " << V << " at row " << n;
    losses[n] = tgt < 0 ? 0.0f : l - row[tgt];
  }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    float* drow = dlogits + n * V;
    const int32_t tgt = targets[n];
    BRIGADE_CHECK(tgt < V) << "target " << tgt << " >= vocabulary " << V << " at row " << n;
    if (tgt < 0) {
      for (int64_t j = 0; j < V; ++j) drow[j] = 0.0f;
      continue;
    }
    const float l = lse[n];
    // exp_shifted reads each group before writing it, so dlogits may alias logits.
    detail::exp_shifted(drow, row, l, V);
    for (int64_t j = 0; j < V; ++j) drow[j] *= dloss;
    drow[tgt] -= dloss;
  }
}

}  // namespace brigade
