// The element-wise kernels on avx2, 8 floats per vector; this file alone gets the ISA's flags
// (CMakeLists.txt) and runs only where kernel_isa_supported() says the CPU has them.
#if !defined(__AVX2__) || !defined(__FMA__)
#error "elementwise_avx2.cc needs its ISA flags (CMakeLists.txt: BRIGADE_ISA_FLAGS_avx2)"
#endif
#define BRIGADE_ISA_NS isa_avx2
#define BRIGADE_ISA_ENUM KernelIsa::kAvx2
#define BRIGADE_VEC_WIDTH 8
#include "brigade/kernels/cpu/elementwise_kernels.inc"

namespace brigade::detail {

const ElementwiseOps& elementwise_ops_avx2() {
  return isa_avx2::kOps;
}

}  // namespace brigade::detail
