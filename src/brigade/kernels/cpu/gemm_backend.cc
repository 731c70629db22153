// Dispatch of gemm() to the selected library's table, after the checks and degenerate cases
// both libraries share.
#include "brigade/kernels/cpu/gemm_backend.h"

#include <atomic>
#include <vector>

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
std::atomic<GemmPrecision> g_precision{GemmPrecision::kF32};
// Under bf16: whether products run as f32 GEMMs on operands rounded to bf16 values (set where
// the selected library has no native bf16 matmul here).
std::atomic<bool> g_bf16_in_f32{false};

// A stored operand (rows x cols, row stride ld) converted to dense rows of T by convert, in this
// thread's buffer `slot` (0: A, 1: B) of T, which grows to the largest operand seen and is then
// reused.
template <typename T, void (*convert)(T*, const float*, int64_t)>
const T* converted_operand(int slot, const float* X, int64_t rows, int64_t cols, int64_t ld) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buf = buffers[slot];
  if (static_cast<int64_t>(buf.size()) < rows * cols) buf.resize(static_cast<size_t>(rows * cols));
  if (ld == cols) {
    convert(buf.data(), X, rows * cols);
  } else {
    for (int64_t r = 0; r < rows; ++r) convert(buf.data() + r * cols, X + r * ld, cols);
  }
  return buf.data();
}

// The operand as bf16, for a native bf16 matmul.
constexpr auto bf16_operand = converted_operand<bf16, float_to_bf16>;
// The operand rounded to bf16 values but kept as f32: the f32 GEMM then multiplies exactly what a
// bf16 GEMM would (each product of two bf16 values is exact in f32) and accumulates in f32, as a
// bf16:bf16:f32 matmul does.
constexpr auto bf16_rounded_operand = converted_operand<float, round_to_bf16>;

// Whether the selected library multiplies bf16 natively on this CPU. oneDNN without
// AVX512_BF16 emulates it, slower than its f32 GEMM (2.4x per bench-small step, bench/RESULTS.md),
// and below AVX-512 has none; OpenBLAS (Debian's) has no bf16 GEMM at all.
bool native_bf16_gemm(const detail::BackendOps& ops) {
  if (ops.bf16gemm == nullptr || !bf16_gemm_is_native()) return false;
  // A first bf16 product, which a library may still refuse on this CPU.
  const float one = 1.0f;
  float out = 0.0f;
  const bf16 a = float_to_bf16(one);
  try {
    ops.bf16gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &a, 1, 0.0f, &out, 1);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

void set_gemm_backend(GemmBackend backend) {
  g_backend.store(backend, std::memory_order_relaxed);
  g_ops.store(&ops_of(backend), std::memory_order_relaxed);
  if (gemm_precision() == GemmPrecision::kBf16) set_gemm_precision(GemmPrecision::kBf16);
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

void set_gemm_precision(GemmPrecision precision) {
  if (precision == GemmPrecision::kBf16) {
    g_bf16_in_f32.store(!native_bf16_gemm(detail::selected_backend_ops()),
                        std::memory_order_relaxed);
  }
  g_precision.store(precision, std::memory_order_relaxed);
}

bool bf16_gemm_runs_in_f32() {
  return gemm_precision() == GemmPrecision::kBf16 && g_bf16_in_f32.load(std::memory_order_relaxed);
}

GemmPrecision gemm_precision() {
  return g_precision.load(std::memory_order_relaxed);
}

const char* gemm_precision_name(GemmPrecision precision) {
  return precision == GemmPrecision::kBf16 ? "bf16" : "f32";
}

bool parse_gemm_precision(std::string_view name, GemmPrecision* out) {
  for (GemmPrecision p : {GemmPrecision::kF32, GemmPrecision::kBf16}) {
    if (name == gemm_precision_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool bf16_gemm_is_native() {
  return detail::onednn_native_bf16();
}

void set_blas_threads(int n) {
  BRIGADE_CHECK(n >= 1) << "blas threads " << n;
  g_threads.store(n, std::memory_order_relaxed);
  // Both libraries, so that switching the backend later keeps the thread count.
  detail::openblas_backend_ops().set_threads(n);
  detail::onednn_backend_ops().set_threads(n);
}

std::string gemm_backend_description() {
  return gemm_backend_description(gemm_backend());
}

std::string gemm_backend_description(GemmBackend backend) {
  const detail::BackendOps& ops = ops_of(backend);
  const int n = blas_threads();
  std::string precision;
  if (gemm_precision() == GemmPrecision::kBf16) {
    precision = bf16_gemm_runs_in_f32()
                    ? ", bf16 operands multiplied by the f32 GEMM: no native bf16 matmul here, "
                      "the same products at f32 speed"
                    : ", bf16 operands";
  }
  return std::string(ops.name) + " (" + ops.library() + ", " + std::to_string(n) +
         (n == 1 ? " thread" : " threads") + precision + ")";
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

namespace {

// The checks both entry points make, and the products with nothing to multiply (M or N = 0:
// nothing to write; K = 0: C = beta C). True when the product is done.
bool checked_and_trivial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda,
                         int64_t ldb, float beta, float* C, int64_t ldc) {
  BRIGADE_CHECK(M >= 0 && N >= 0 && K >= 0) << "gemm M=" << M << " N=" << N << " K=" << K;
  BRIGADE_CHECK(beta == 0.0f || beta == 1.0f) << "gemm beta " << beta << " (0 or 1)";
  BRIGADE_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N)
      << "gemm lda=" << lda << " ldb=" << ldb << " ldc=" << ldc << " M=" << M << " N=" << N
      << " K=" << K << " trans_a=" << trans_a << " trans_b=" << trans_b;
  if (M == 0 || N == 0) return true;
  if (K == 0) {
    if (beta == 0.0f) {
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = 0.0f;
      }
    }
    return true;
  }
  return false;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (checked_and_trivial(trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  const detail::BackendOps& ops = detail::selected_backend_ops();
  if (gemm_precision() == GemmPrecision::kBf16) {
    // The stored shapes: A is (M,K) or (K,M), B is (K,N) or (N,K); the copies are dense.
    const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    if (g_bf16_in_f32.load(std::memory_order_relaxed)) {
      const float* a = bf16_rounded_operand(0, A, a_rows, a_cols, lda);
      const float* b = bf16_rounded_operand(1, B, b_rows, b_cols, ldb);
      ops.sgemm(trans_a, trans_b, M, N, K, alpha, a, a_cols, b, b_cols, beta, C, ldc);
      return;
    }
    const bf16* a = bf16_operand(0, A, a_rows, a_cols, lda);
    const bf16* b = bf16_operand(1, B, b_rows, b_cols, ldb);
    ops.bf16gemm(trans_a, trans_b, M, N, K, alpha, a, a_cols, b, b_cols, beta, C, ldc);
    return;
  }
  ops.sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (checked_and_trivial(trans_a, trans_b, M, N, K, lda, ldb, beta, C, ldc)) return;
  detail::selected_backend_ops().sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                                       ldc);
}

}  // namespace brigade
