#include "brigade/optim/grad_clip.h"

#include <cmath>

#include "brigade/kernels/cpu/optim.h"

namespace brigade {

double grad_sum_squares(const float* grads, int64_t n) {
  return sum_squares(grads, n);
}

double global_grad_norm(const float* grads, int64_t n) {
  return std::sqrt(grad_sum_squares(grads, n));
}

float clip_scale(double norm, float max_norm) {
  if (max_norm <= 0.0f || !std::isfinite(norm)) return 1.0f;
  const double scale = static_cast<double>(max_norm) / (norm + 1e-6);
  return scale < 1.0 ? static_cast<float>(scale) : 1.0f;
}

void scale_grads(float* grads, int64_t n, float scale) {
  if (scale != 1.0f) scale_inplace(grads, scale, n);
}

float clip_grad_norm(float* grads, int64_t n, float max_norm) {
  const double norm = global_grad_norm(grads, n);
  scale_grads(grads, n, clip_scale(norm, max_norm));
  return static_cast<float>(norm);
}

}  // namespace brigade
