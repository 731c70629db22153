#pragma once
// The table each kernel library fills in (gemm_openblas.cc, gemm_onednn.cc with
// pointwise_onednn.cc); gemm_backend.cc holds the selected one and the kernels dispatch through
// it. Adding a library is one more table, adding an entry point (the bf16 GEMM) one more field.
#include <cstdint>
#include <string>

#include "brigade/tensor/bf16.h"

namespace brigade::detail {

struct BackendOps {
  const char* name;
  // gemm() of gemm_backend.h with shapes already checked and nothing degenerate (M, N, K >= 1;
  // beta 0 or 1).
  void (*sgemm)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);
  // The same with bf16 operands (dense copies, ld as given), f32 accumulation and output;
  // nullptr where the library has none (Debian's OpenBLAS 0.3.21 is built without sbgemm).
  void (*bf16gemm)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const bf16* A, int64_t lda, const bf16* B, int64_t ldb, float beta, float* C,
                   int64_t ldc) = nullptr;
  // Threads this library uses per process from now on.
  void (*set_threads)(int n);
  // The library and its version as it reports them at run time ("oneDNN 2.6.3").
  std::string (*library)();

  // Non-GEMM kernels the library computes faster than brigade's own (bench_onednn_ops,
  // bench/RESULTS.md), with the contracts of gelu.h and layernorm.h (N >= 1); nullptr keeps the
  // hand-written kernel.
  void (*gelu_forward)(float* out, const float* inp, int64_t N) = nullptr;
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, int64_t N) = nullptr;
  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t N, int64_t C) = nullptr;
  void (*layernorm_backward)(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int64_t C) = nullptr;
};

const BackendOps& openblas_backend_ops();
const BackendOps& onednn_backend_ops();

// The table of the backend set_gemm_backend() selected.
const BackendOps& selected_backend_ops();

// oneDNN's GELU and LayerNorm (pointwise_onednn.cc), for onednn_backend_ops().
void onednn_gelu_forward(float* out, const float* inp, int64_t N);
void onednn_gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N);
void onednn_layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int64_t N, int64_t C);
void onednn_layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean,
                               const float* rstd, int64_t N, int64_t C);

// oneDNN's effective ISA includes AVX512_BF16 (gemm_onednn.cc).
bool onednn_native_bf16();

// Counts a primitive brigade created (and the scratchpad bytes it holds), for
// onednn_gemm_stats().
void count_onednn_primitive(int64_t scratchpad_bytes);

}  // namespace brigade::detail
