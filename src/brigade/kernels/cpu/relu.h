#pragma once
#include <cstdint>

namespace brigade {

// out = max(inp, 0); a NaN stays NaN (so on_nonfinite still sees it). out, inp are (N) and
// may alias.
void relu_forward(float* out, const float* inp, int64_t N);

// dinp += dout where out > 0. out is relu_forward's output, positive exactly where its input
// was, so an in-place forward keeps all that backward needs. dinp must not alias dout.
void relu_backward(float* dinp, const float* out, const float* dout, int64_t N);

}  // namespace brigade
