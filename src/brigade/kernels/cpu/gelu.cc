// GELU, tanh approximation, as in GPT-2 and llm.c. The derivative uses sech^2 = 1 - tanh^2,
// which stays finite where cosh would overflow. tanh comes from the vectorised exp of
// elementwise_kernels.inc (vec.h's exp4, absolute error ~2e-7, on as many lanes as the ISA has):
// libm's tanhf per element would cost as much as the matmuls around the GELU. A backend may
// compute it instead (train.kernels = "onednn": oneDNN's eltwise_gelu_tanh, pointwise_onednn.cc,
// measured faster); this is the kernel otherwise.
#include "brigade/kernels/cpu/gelu.h"

#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

void gelu_forward(float* out, const float* inp, int64_t N) {
  if (N <= 0) return;
  if (const auto backend = detail::selected_backend_ops().gelu_forward) return backend(out, inp, N);
  detail::elementwise_ops().gelu_forward(out, inp, N);  // out may alias inp
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  if (N <= 0) return;
  if (const auto backend = detail::selected_backend_ops().gelu_backward) {
    return backend(dinp, inp, dout, N);
  }
  detail::elementwise_ops().gelu_backward(dinp, inp, dout, N);
}

}  // namespace brigade
