#pragma once
// Runs a kernel test once per GEMM backend: the backends of gemm_backend.h as a test parameter,
// a guard that selects one for the test's duration, and names for the test instances.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <tuple>

#include "brigade/kernels/cpu/gemm_backend.h"

namespace brigade::test {

inline const auto kGemmBackends = ::testing::Values(GemmBackend::kOneDnn, GemmBackend::kOpenBlas);

// Selects a backend until the end of the scope, then restores the previous one.
class ScopedGemmBackend {
 public:
  explicit ScopedGemmBackend(GemmBackend b) : previous_(gemm_backend()) { set_gemm_backend(b); }
  ~ScopedGemmBackend() { set_gemm_backend(previous_); }
  ScopedGemmBackend(const ScopedGemmBackend&) = delete;
  ScopedGemmBackend& operator=(const ScopedGemmBackend&) = delete;

 private:
  GemmBackend previous_;
};

// "onednn_N5_C7_OC3" for a (backend, shape) parameter whose shape prints itself.
struct BackendShapeName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::ostringstream os;
    os << gemm_backend_name(std::get<0>(info.param)) << "_" << std::get<1>(info.param);
    return os.str();
  }
};

}  // namespace brigade::test
