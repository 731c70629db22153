// The element-wise kernels for the ISA the build targets (x86-64-v2 in Release), four floats
// per vector: the path of every CPU without AVX2, and BRIGADE_ISA=default.
#define BRIGADE_ISA_NS isa_default
#define BRIGADE_ISA_ENUM KernelIsa::kDefault
#define BRIGADE_VEC_WIDTH 4
#include "brigade/kernels/cpu/elementwise_kernels.inc"

namespace brigade::detail {

const ElementwiseOps& elementwise_ops_default() {
  return isa_default::kOps;
}

}  // namespace brigade::detail
