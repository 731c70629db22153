// Linear layer on gemm() (row-major). The bias is a plain loop: it is O(N*OC) next to the
// O(N*C*OC) product.
#include "brigade/kernels/cpu/matmul.h"

#include "brigade/kernels/cpu/gemm_backend.h"

namespace brigade {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC) {
  if (N == 0 || OC == 0) return;
  // out (N,OC) = inp (N,C) @ weight (OC,C)^T; C == 0 gives zeros.
  gemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
  if (bias != nullptr) {
    for (int64_t n = 0; n < N; ++n) {
      float* row = out + n * OC;
      for (int64_t o = 0; o < OC; ++o) row[o] += bias[o];
    }
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  if (N == 0 || OC == 0) return;
  if (C > 0 && dinp != nullptr) {
    // dinp (N,C) += dout (N,OC) @ weight (OC,C)
    gemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
  }
  if (C > 0 && dweight != nullptr) {
    // dweight (OC,C) += dout (N,OC)^T @ inp (N,C)
    gemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  }
  if (dbias != nullptr) {
    // Row by row keeps the inner loop contiguous (and vectorised) over OC.
    for (int64_t n = 0; n < N; ++n) {
      const float* row = dout + n * OC;
      for (int64_t o = 0; o < OC; ++o) dbias[o] += row[o];
    }
  }
}

}  // namespace brigade
