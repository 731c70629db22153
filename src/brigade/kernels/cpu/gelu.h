#pragma once
#include <cstdint>

namespace brigade {

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// out, inp are (N). out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t N);

// dinp += gelu'(inp) * dout. dinp must not alias dout.
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N);

}  // namespace brigade
