#pragma once
// Whether this machine runs bf16 GEMMs at all (oneDNN has a bf16 matmul from AVX-512 on,
// natively with AVX512_BF16, emulated without): the bf16 tests skip, saying why, on a CPU
// below AVX-512, where train.precision = "bf16" is refused by design (train_cli_test checks the
// refusal on every machine by capping oneDNN's ISA).
#include "brigade/base/error.h"
#include "brigade/kernels/cpu/gemm_backend.h"

namespace brigade::testing {

inline bool bf16_gemm_available() {
  const GemmBackend backend = gemm_backend();
  const GemmPrecision precision = gemm_precision();
  bool ok = true;
  try {
    set_gemm_backend(GemmBackend::kOneDnn);
    set_gemm_precision(GemmPrecision::kBf16);
  } catch (const ConfigError&) {
    ok = false;
  }
  set_gemm_backend(backend);
  set_gemm_precision(precision);
  return ok;
}

}  // namespace brigade::testing

#define BRIGADE_SKIP_WITHOUT_BF16_GEMM()                                          \
  do {                                                                            \
    if (!::brigade::testing::bf16_gemm_available()) {                             \
      GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (it needs AVX-512)"; \
    }                                                                             \
  } while (0)
