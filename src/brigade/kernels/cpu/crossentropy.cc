// Fused softmax + cross-entropy. Each row's log-sum-exp is computed around the row maximum
// (so exp never overflows) and saved; backward rebuilds softmax = exp(logit - lse) from it.
// exp is vec.h's fast exp and the row loops are elementwise_kernels.inc's, on the ISA of
// kernel_isa.h; the row sum is accumulated in float over short runs and in double across them,
// exact enough for a 50k vocabulary.
#include "brigade/kernels/cpu/crossentropy.h"

#include <cmath>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

void crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                          int64_t N, int64_t V) {
  BRIGADE_CHECK(V > 0) << "empty vocabulary";
  const detail::ElementwiseOps& ops = detail::elementwise_ops();
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * V;
    const float mx = ops.max_of(row, V);
    const float l = mx + static_cast<float>(std::log(ops.sum_exp_shifted(row, mx, V)));
    lse[n] = l;
    const int32_t tgt = targets[n];
    BRIGADE_CHECK(tgt < V) << "target " << tgt << " >= vocabulary " << V << " at row " << n;
    losses[n] = tgt < 0 ? 0.0f : l - row[tgt];
  }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V) {
  const detail::ElementwiseOps& ops = detail::elementwise_ops();
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
    // Each group is read before it is written, so dlogits may alias logits.
    ops.exp_shifted_scaled(drow, row, l, dloss, V);
    drow[tgt] -= dloss;
  }
}

}  // namespace brigade
