// Optimizer update kernels: element-wise over a range of the flat buffers. Bias corrections
// and other per-call constants are computed once, in double, outside the loops; the loops are
// elementwise_kernels.inc's, on the ISA of kernel_isa.h.
#include "brigade/kernels/cpu/optim.h"

#include <cmath>

#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                  const AdamWParams& hp) {
  if (n <= 0) return;
  const double t = static_cast<double>(hp.step);
  const detail::AdamWStep step{
      .lr = hp.lr,
      .beta1 = hp.beta1,
      .beta2 = hp.beta2,
      .eps = hp.eps,
      .weight_decay = hp.weight_decay,
      .bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), t)),
      .bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), t))};
  detail::elementwise_ops().adamw_update(param, grad, m, v, n, step);
}

void sgd_update(float* param, const float* grad, float* buf, int64_t n, const SgdParams& hp) {
  if (n <= 0) return;
  const detail::SgdStep step{.lr = hp.lr,
                             .momentum = hp.momentum,
                             .weight_decay = hp.weight_decay,
                             .nesterov = hp.nesterov};
  detail::elementwise_ops().sgd_update(param, grad, buf, n, step);
}

double sum_squares(const float* x, int64_t n) {
  return n > 0 ? detail::elementwise_ops().sum_squares(x, n) : 0.0;
}

void scale_inplace(float* x, float s, int64_t n) {
  if (n > 0) detail::elementwise_ops().scale_inplace(x, s, n);
}

bool all_finite(const float* x, int64_t n) {
  return n <= 0 || detail::elementwise_ops().all_finite(x, n);
}

}  // namespace brigade
