#pragma once
// Token + position embedding.
#include <cstdint>

namespace brigade {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// out is (B,T,C), tokens is (B,T), wte is (V,C), wpe is (maxT,C).
void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                     int64_t B, int64_t T, int64_t C);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                      int64_t T, int64_t C);

}  // namespace brigade
