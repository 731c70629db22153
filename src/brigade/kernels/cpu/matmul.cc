// Linear layer on OpenBLAS sgemm (row-major). The bias is a plain loop: it is O(N*OC) next to
// the O(N*C*OC) product.
#include "brigade/kernels/cpu/matmul.h"

#include <cblas.h>

#include <climits>

#include "brigade/base/check.h"

namespace brigade {

namespace {
// OpenBLAS's blasint may be 32-bit; a dimension that does not fit is a programmer error.
blasint to_blas(int64_t n) {
  BRIGADE_CHECK(n >= 0 && n <= INT_MAX) << "BLAS dimension out of range: " << n;
  return static_cast<blasint>(n);
}
}  // namespace

void set_blas_threads(int n) {
  BRIGADE_CHECK(n >= 1) << "blas threads " << n;
  openblas_set_num_threads(n);
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N,
                    int64_t C, int64_t OC) {
  if (N == 0 || OC == 0) return;
  if (C == 0) {
    for (int64_t i = 0; i < N * OC; ++i) out[i] = 0.0f;
  } else {
    // out (N,OC) = inp (N,C) @ weight (OC,C)^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, to_blas(N), to_blas(OC), to_blas(C), 1.0f,
                inp, to_blas(C), weight, to_blas(C), 0.0f, out, to_blas(OC));
  }
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blas(N), to_blas(C), to_blas(OC),
                1.0f, dout, to_blas(OC), weight, to_blas(C), 1.0f, dinp, to_blas(C));
  }
  if (C > 0 && dweight != nullptr) {
    // dweight (OC,C) += dout (N,OC)^T @ inp (N,C)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, to_blas(OC), to_blas(C), to_blas(N), 1.0f,
                dout, to_blas(OC), inp, to_blas(C), 1.0f, dweight, to_blas(C));
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
