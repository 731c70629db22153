#pragma once
// The one GEMM entry point of the CPU kernels, and the choice of the library behind it.
//
// Every linear layer (matmul.h: forward, dX, dW, the tied head) and every attention tile
// product (attention.cc) calls gemm(); which library computes it is a process-wide choice made
// once at start from `[train] kernels` (set_gemm_backend), not a branch in the callers:
//   kOneDnn   oneDNN matmul (the default): one primitive per distinct call shape, created on
//             first use and cached per thread (gemm_onednn.cc); afterwards a call only sets the
//             operands' data handles and executes.
//   kOpenBlas OpenBLAS cblas_sgemm (gemm_openblas.cc).
// For a given backend, shape and thread count the result is deterministic, so a fixed layout
// reproduces bitwise (resume, split backward == fused backward); the two backends round
// differently (blocking of K), so results agree between them only within float tolerance.
//
// Reduced precision (bf16 operands, f32 accumulation and output) will be a second entry point
// beside gemm() with its own operand type (oneDNN bf16:bf16:f32 matmul, OpenBLAS sbgemm), so
// f32 callers stay as they are.
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

enum class GemmBackend { kOneDnn, kOpenBlas };

// Selects the library of every later gemm() call in this process (default kOneDnn). Call it
// before kernels run (train(), generate, benches), not while another thread is inside gemm().
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();

// "onednn" / "openblas": the names `[train] kernels` takes.
const char* gemm_backend_name(GemmBackend backend);
// Parses a name above; false (and *out untouched) for anything else.
bool parse_gemm_backend(std::string_view name, GemmBackend* out);

// The selected backend, its library version and thread count, for the run log: e.g.
// "onednn (oneDNN 2.6.3, 1 thread)".
std::string gemm_backend_description();

// Threads per process of both libraries (1 per rank unless train.blas_threads says otherwise;
// oneDNN's OpenMP threads are set in each thread that calls gemm(), on its next call).
void set_blas_threads(int n);
int blas_threads();

// Row-major single precision: C (M,N) = alpha op(A) op(B) + beta C, with op(A) (M,K) and
// op(B) (K,N). A is stored (M,K), or (K,M) when trans_a; B is stored (K,N), or (N,K) when
// trans_b. lda, ldb, ldc are the row strides of A, B, C as stored (>= their row lengths), which
// lets a caller multiply tiles inside a larger matrix. beta is 0 (C is overwritten; its old
// contents may be anything, NaN included) or 1 (the product is added to C). Allocates nothing
// once a shape has been seen on the calling thread.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace brigade
