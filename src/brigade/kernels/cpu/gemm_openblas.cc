// The OpenBLAS backend of gemm(): cblas_sgemm, row-major. No bf16 GEMM: Debian's OpenBLAS 0.3.21
// is built without cblas_sbgemm (BUILD_BFLOAT16 off), so train.precision = "bf16" needs oneDNN.
#include <cblas.h>

#include <climits>
#include <string>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/backend_registry.h"

namespace brigade::detail {

namespace {

// OpenBLAS's blasint may be 32-bit; a dimension that does not fit is a programmer error.
blasint to_blas(int64_t n) {
  BRIGADE_CHECK(n >= 0 && n <= INT_MAX) << "BLAS dimension out of range: " << n;
  return static_cast<blasint>(n);
}

void openblas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                    int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, to_blas(M), to_blas(N), to_blas(K), alpha, A,
              to_blas(lda), B, to_blas(ldb), beta, C, to_blas(ldc));
}

void openblas_set_threads(int n) {
  openblas_set_num_threads(n);
}

// openblas_get_config() reads e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell
// MAX_THREADS=64"; the core name says which kernels OPENBLAS_CORETYPE (or detection) chose.
std::string openblas_library() {
  return openblas_get_config();
}

}  // namespace

const BackendOps& openblas_backend_ops() {
  // GELU and LayerNorm stay brigade's own kernels.
  static const BackendOps ops{.name = "openblas",
                              .sgemm = openblas_sgemm,
                              .set_threads = openblas_set_threads,
                              .library = openblas_library};
  return ops;
}

}  // namespace brigade::detail
