// The element-wise kernels on avx512, 16 floats per vector; this file alone gets the ISA's flags
// (CMakeLists.txt) and runs only where kernel_isa_supported() says the CPU has them.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || \
    !defined(__AVX512VL__)
#error "elementwise_avx512.cc needs its ISA flags (CMakeLists.txt: BRIGADE_ISA_FLAGS_avx512)"
#endif
#define BRIGADE_ISA_NS isa_avx512
#define BRIGADE_ISA_ENUM KernelIsa::kAvx512
#define BRIGADE_VEC_WIDTH 16
#include "brigade/kernels/cpu/elementwise_kernels.inc"

namespace brigade::detail {

const ElementwiseOps& elementwise_ops_avx512() {
  return isa_avx512::kOps;
}

}  // namespace brigade::detail
