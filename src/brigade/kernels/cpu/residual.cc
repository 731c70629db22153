#include "brigade/kernels/cpu/residual.h"

namespace brigade {

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  for (int64_t i = 0; i < N; ++i) out[i] = inp1[i] + inp2[i];
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    dinp1[i] += dout[i];
    dinp2[i] += dout[i];
  }
}

}  // namespace brigade
