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
// Mixed precision is a second process-wide choice, `[train] precision` (set_gemm_precision):
//   kF32   every operand f32 (the default);
//   kBf16  gemm() rounds op(A) and op(B) to bf16 (round to nearest even) into per-thread dense
//          buffers and multiplies them with f32 accumulation and an f32 C (oneDNN's
//          bf16:bf16:f32 matmul), as PyTorch's CPU autocast runs its matmuls. Callers keep f32
//          tensors: weights, gradients, optimizer state and every non-GEMM kernel stay f32.
//          Where the library has no native bf16 matmul on this CPU (oneDNN without AVX512_BF16,
//          OpenBLAS everywhere), the operands are rounded to bf16 values kept as f32 and the f32
//          GEMM multiplies them: the same products (a product of two bf16 values is exact in
//          f32), accumulated in f32 in that GEMM's order, at f32 speed.
// The buffers grow to the largest operand seen and are then reused, so the hot loop allocates
// nothing in either precision.
#include <cstdint>
#include <string>
#include <string_view>

namespace brigade {

enum class GemmBackend { kOneDnn, kOpenBlas };

// Selects the library of every later gemm() call in this process (default kOneDnn). Call it
// before kernels run (train(), generate, benches), not while another thread is inside gemm().
void set_gemm_backend(GemmBackend backend);
GemmBackend gemm_backend();

enum class GemmPrecision { kF32, kBf16 };

// Selects the operand precision of every later gemm() call in this process (default kF32), and
// under bf16 whether the products run natively or as f32 GEMMs of rounded operands; call it after
// set_gemm_backend().
void set_gemm_precision(GemmPrecision precision);
GemmPrecision gemm_precision();
// Under bf16: true when gemm() multiplies bf16-rounded operands with the f32 GEMM (no native bf16
// matmul for the selected library on this CPU). False under f32.
bool bf16_gemm_runs_in_f32();
// "f32" / "bf16": the names `[train] precision` takes.
const char* gemm_precision_name(GemmPrecision precision);
bool parse_gemm_precision(std::string_view name, GemmPrecision* out);
// Whether oneDNN multiplies bf16 natively here: its effective ISA (the CPU, capped by
// DNNL_MAX_CPU_ISA) includes AVX512_BF16. Without it oneDNN would emulate bf16 with AVX-512
// conversions, slower than f32, so gemm() runs bf16 in f32 instead.
bool bf16_gemm_is_native();

// "onednn" / "openblas": the names `[train] kernels` takes.
const char* gemm_backend_name(GemmBackend backend);
// Parses a name above; false (and *out untouched) for anything else.
bool parse_gemm_backend(std::string_view name, GemmBackend* out);

// The selected backend, its library version, thread count and (bf16 only) precision, for the run
// log: e.g. "onednn (oneDNN 2.6.3, 1 thread)", "onednn (oneDNN 2.6.3, 1 thread, bf16 operands)".
std::string gemm_backend_description();
// The same for any backend, selected or not (brigade --version lists both).
std::string gemm_backend_description(GemmBackend backend);

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
// gemm() in f32 whatever set_gemm_precision() chose: for products too small to repay rounding
// their operands to bf16 (attention's tiles). Same contract as gemm().
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);

}  // namespace brigade
