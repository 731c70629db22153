#pragma once
// The table each GEMM library fills in (gemm_openblas.cc, gemm_onednn.cc); gemm_backend.cc
// dispatches to the selected one. Adding a library is one more table, adding an entry point
// (the bf16 GEMM) one more field.
#include <cstdint>
#include <string>

namespace brigade::detail {

struct GemmOps {
  const char* name;
  // gemm() of gemm_backend.h with shapes already checked and nothing degenerate (M, N, K >= 1;
  // beta 0 or 1).
  void (*sgemm)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc);
  // Threads this library uses per process from now on.
  void (*set_threads)(int n);
  // The library and its version as it reports them at run time ("oneDNN 2.6.3").
  std::string (*library)();
};

const GemmOps& openblas_gemm_ops();
const GemmOps& onednn_gemm_ops();

}  // namespace brigade::detail
