#pragma once
// Global gradient-norm clipping (Pascanu et al. 2013), as torch.nn.utils.clip_grad_norm_.
// Split in three so data parallelism can all-reduce the squared partial sums of each rank's
// range before the norm is taken:
//   sq = grad_sum_squares(local range)  ->  all-reduce(sq)  ->  norm = sqrt(sq)
//   scale_grads(local range, clip_scale(norm, max_norm))
#include <cstdint>

namespace brigade {

// sum of grads[i]^2 over [0, n), accumulated in double.
double grad_sum_squares(const float* grads, int64_t n);

// sqrt(grad_sum_squares(grads, n)).
double global_grad_norm(const float* grads, int64_t n);

// The factor that brings norm down to max_norm: min(1, max_norm / (norm + 1e-6)).
// 1 when max_norm <= 0 (clipping off) or norm is not finite (the caller skips the step).
float clip_scale(double norm, float max_norm);

// grads[i] *= scale over [0, n); nothing when scale == 1.
void scale_grads(float* grads, int64_t n, float scale);

// Single-process clipping: scales grads so their norm is at most max_norm and returns the
// norm before clipping.
float clip_grad_norm(float* grads, int64_t n, float max_norm);

}  // namespace brigade
