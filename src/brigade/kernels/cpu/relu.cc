#include "brigade/kernels/cpu/relu.h"

namespace brigade {

void relu_forward(float* out, const float* inp, int64_t N) {
  // x < 0 is false for NaN, which passes through.
  for (int64_t i = 0; i < N; ++i) out[i] = inp[i] < 0.0f ? 0.0f : inp[i];
}

void relu_backward(float* dinp, const float* out, const float* dout, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    // Both loads unconditional, so the select vectorises.
    const float g = dout[i], y = out[i];
    dinp[i] += y > 0.0f ? g : 0.0f;
  }
}

}  // namespace brigade
