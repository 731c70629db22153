#pragma once
// Linear layer on gemm() (gemm_backend.h: oneDNN or OpenBLAS). Contract shared by every
// backward kernel in kernels/cpu:
// gradients are ACCUMULATED (+=) into their outputs, so gradient accumulation over
// micro-batches needs nothing special and callers zero the gradient buffers once per step.
#include <cstdint>

namespace brigade {

// out = inp @ weight^T + bias
// out is (N, OC), inp is (N, C), weight is (OC, C), bias is (OC) or nullptr.
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC);

// dinp += dout @ weight; dweight += dout^T @ inp; dbias += sum over rows of dout.
// Any of dinp, dweight, dbias may be nullptr to skip it.
// inp is read only for dweight and weight only for dinp: either may be nullptr when unused
// (a split backward computes the two products at different times).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC);

}  // namespace brigade
