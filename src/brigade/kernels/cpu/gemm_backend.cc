// Dispatch of gemm() to the selected library's table, after the checks and degenerate cases
// both libraries share.
#include "brigade/kernels/cpu/gemm_backend.h"

#include <atomic>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/backend_registry.h"

namespace brigade {

namespace {

const detail::BackendOps& ops_of(GemmBackend backend) {
  return backend == GemmBackend::kOpenBlas ? detail::openblas_backend_ops()
                                           : detail::onednn_backend_ops();
}

// Relaxed: the backend is chosen before kernels run; the atomic only keeps the read well defined.
std::atomic<GemmBackend> g_backend{GemmBackend::kOneDnn};
std::atomic<const detail::BackendOps*> g_ops{nullptr};  // ops_of(g_backend), filled on first use
std::atomic<int> g_threads{1};

}  // namespace

void set_gemm_backend(GemmBackend backend) {
  g_backend.store(backend, std::memory_order_relaxed);
  g_ops.store(&ops_of(backend), std::memory_order_relaxed);
}

GemmBackend gemm_backend() {
  return g_backend.load(std::memory_order_relaxed);
}

const char* gemm_backend_name(GemmBackend backend) {
  return ops_of(backend).name;
}

bool parse_gemm_backend(std::string_view name, GemmBackend* out) {
  for (GemmBackend b : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas}) {
    if (name == gemm_backend_name(b)) {
      *out = b;
      return true;
    }
  }
  return false;
}

void set_blas_threads(int n) {
  BRIGADE_CHECK(n >= 1) << "blas threads " << n;
  g_threads.store(n, std::memory_order_relaxed);
  // Both libraries, so that switching the backend later keeps the thread count.
  detail::openblas_backend_ops().set_threads(n);
  detail::onednn_backend_ops().set_threads(n);
}

std::string gemm_backend_description() {
  const detail::BackendOps& ops = ops_of(gemm_backend());
  const int n = blas_threads();
  return std::string(ops.name) + " (" + ops.library() + ", " + std::to_string(n) +
         (n == 1 ? " thread)" : " threads)");
}

namespace detail {
const BackendOps& selected_backend_ops() {
  const BackendOps* ops = g_ops.load(std::memory_order_relaxed);
  return ops != nullptr ? *ops : ops_of(gemm_backend());
}
}  // namespace detail

int blas_threads() {
  return g_threads.load(std::memory_order_relaxed);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0) << "gemm M=" << M << " N=" << N << " K=" << K;
  BRIGADE_CHECK(beta == 0.0f || beta == 1.0f) << "gemm beta " << beta << " (0 or 1)";
  BRIGADE_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N)
      << "gemm lda=" << lda << " ldb=" << ldb << " ldc=" << ldc << " M=" << M << " N=" << N
      << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b;
  if (M == 0 || N == 0) return;
  if (K == 0) {  // the empty product: C = beta C
    if (beta == 0.0f) {
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = 0.0f;
      }
    }
    return;
  }
  detail::selected_backend_ops().sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                       ldc);
}

}  // namespace brigade
