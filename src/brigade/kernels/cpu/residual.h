#pragma once
#include <cstdint>

namespace brigade {

// out = inp1 + inp2, all (N).
void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N);

// dinp1 += dout; dinp2 += dout.
void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N);

}  // namespace brigade
