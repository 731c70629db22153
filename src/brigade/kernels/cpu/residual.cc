// The loops are in elementwise_kernels.inc, on the ISA of kernel_isa.h.
#include "brigade/kernels/cpu/residual.h"

#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  if (N > 0) detail::elementwise_ops().residual_forward(out, inp1, inp2, N);
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N) {
  if (N > 0) detail::elementwise_ops().residual_backward(dinp1, dinp2, dout, N);
}

}  // namespace brigade
