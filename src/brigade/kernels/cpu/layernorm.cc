// LayerNorm over the last axis, formulas as in llm.c. With xhat = (x - mean) * rstd and
// g = weight * dout, the input gradient is rstd * (g - mean(g) - xhat * mean(g * xhat)).
// The variance is the biased one (divide by C), as in PyTorch's LayerNorm, computed in two
// passes (mean, then squared deviations) to avoid E[x^2] - E[x]^2 cancellation. A backend may
// compute it instead (train.kernels = "onednn": oneDNN's layer_normalization,
// pointwise_onednn.cc, measured faster); otherwise the loops of elementwise_kernels.inc run, on
// the ISA of kernel_isa.h.
#include "brigade/kernels/cpu/layernorm.h"

#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (const auto backend = detail::selected_backend_ops().layernorm_forward) {
    return backend(out, mean, rstd, inp, weight, bias, N, C);
  }
  detail::elementwise_ops().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (const auto backend = detail::selected_backend_ops().layernorm_backward) {
    return backend(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  detail::elementwise_ops().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd,
                                               N, C);
}

}  // namespace brigade
