#pragma once
// The instruction set the element-wise kernels run on (GELU, LayerNorm, residual, attention's
// softmax bookkeeping, cross-entropy, the optimizer updates): chosen once per process from what
// the CPU has, so one binary built for x86-64-v2 uses AVX2 or AVX-512 where they exist.
//
// Every ISA computes bitwise the same results as kDefault (elementwise_kernels.inc explains
// why), so the choice changes speed only: ranks of a job on different CPUs still agree.
#include <string>
#include <string_view>

namespace brigade {

enum class KernelIsa {
  kDefault,  // what the build targets (x86-64-v2 in Release): SSE, four floats at a time
  kAvx2,     // AVX2 + FMA, eight floats
  kAvx512,   // AVX-512 F/BW/DQ/VL, sixteen floats
};

// "default", "avx2", "avx512".
const char* kernel_isa_name(KernelIsa isa);
bool parse_kernel_isa(std::string_view name, KernelIsa* out);

// Whether this CPU (and its OS, for the wider registers' state) runs `isa`.
bool kernel_isa_supported(KernelIsa isa);

// The widest ISA this CPU runs.
KernelIsa best_kernel_isa();

// The ISA the element-wise kernels dispatch to. On first use: the environment variable
// BRIGADE_ISA ("default", "avx2", "avx512") if set and supported, else best_kernel_isa().
KernelIsa elementwise_isa();

// Selects `isa` from now on, for every thread (tests and benchmarks compare the ISAs in one
// process). Throws ConfigError if this CPU lacks it.
void set_elementwise_isa(KernelIsa isa);

// One line for the log and `brigade --version`: "element-wise avx512 (best of this CPU)", or
// with why another was chosen ("BRIGADE_ISA=default; this CPU has avx512").
std::string elementwise_isa_description();

}  // namespace brigade
