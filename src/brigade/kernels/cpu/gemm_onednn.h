#pragma once
// What the oneDNN GEMM backend did in this process, for tests and benchmarks: the hot loop must
// reuse cached primitives, so after warm-up only the call counts grow (gemm_onednn.cc: regular
// shapes have their own primitive, the others share run-time-shape ones).
#include <cstdint>
#include <string>

namespace brigade::detail {

struct OneDnnGemmStats {
  int64_t calls = 0;               // gemm() calls executed by oneDNN
  int64_t runtime_calls = 0;       // of which through a run-time-shape primitive
  int64_t primitives_created = 0;  // cache misses: a primitive, its memory objects, scratchpad
  int64_t scratchpad_bytes = 0;    // held by all cached primitives
};
OneDnnGemmStats onednn_gemm_stats();

// The implementation oneDNN runs for this call shape (e.g. "brg:avx512_core", or "gemm:jit" for
// the run-time-shape primitive), creating and caching the primitive if needed.
std::string onednn_gemm_impl(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                             float alpha, int64_t lda, int64_t ldb, float beta, int64_t ldc,
                             bool bf16 = false);

}  // namespace brigade::detail
