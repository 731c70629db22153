#pragma once
#include <cstdint>

namespace brigade {

// out = (inp - mean) * rstd * weight + bias, per row, eps = 1e-5.
// out, inp are (N,C); mean, rstd are (N) and saved for backward; weight, bias are (C).
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C);

// dinp += ..., dweight += ..., dbias += ... (accumulating, see matmul.h).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t N, int64_t C);

}  // namespace brigade
