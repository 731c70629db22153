// Run-time choice of the element-wise kernels' ISA: a table per ISA (elementwise_ops.h), picked
// on first use from the CPU's features and BRIGADE_ISA. A table, not GCC's target_clones: its
// ifunc resolvers pick once at load time, with no way to run two ISAs side by side in one process
// (the ISA test and bench_train_step do) or to force the baseline from the environment.
#include "brigade/kernels/cpu/kernel_isa.h"

#include <atomic>
#include <cstdlib>

#include "brigade/base/error.h"
#include "brigade/kernels/cpu/elementwise_ops.h"

namespace brigade {

namespace {

constexpr KernelIsa kAllIsas[] = {KernelIsa::kDefault, KernelIsa::kAvx2, KernelIsa::kAvx512};

const detail::ElementwiseOps& ops_of(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512:
      return detail::elementwise_ops_avx512();
    case KernelIsa::kAvx2:
      return detail::elementwise_ops_avx2();
    case KernelIsa::kDefault:
      break;
  }
  return detail::elementwise_ops_default();
}

struct Choice {
  KernelIsa isa;
  std::string why;
};

Choice initial_choice() {
  const KernelIsa best = best_kernel_isa();
  const char* env = std::getenv("BRIGADE_ISA");
  if (env == nullptr || *env == '\0') return {best, "best of this CPU"};
  const std::string value = env;
  KernelIsa wanted;
  if (!parse_kernel_isa(value, &wanted)) {
    return {best, "BRIGADE_ISA=" + value + " is not default, avx2 or avx512: ignored"};
  }
  if (!kernel_isa_supported(wanted)) {
    return {best, "BRIGADE_ISA=" + value + " but this CPU lacks it: ignored"};
  }
  if (wanted == best) return {best, "BRIGADE_ISA=" + value + ", the best of this CPU"};
  return {wanted, "BRIGADE_ISA=" + value + "; this CPU has " + kernel_isa_name(best)};
}

const Choice& initial() {
  static const Choice choice = initial_choice();
  return choice;
}

// Relaxed: the table is chosen before kernels run; the atomic only keeps the read well defined.
std::atomic<const detail::ElementwiseOps*> g_ops{nullptr};

}  // namespace

const char* kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512:
      return "avx512";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kDefault:
      break;
  }
  return "default";
}

bool parse_kernel_isa(std::string_view name, KernelIsa* out) {
  for (KernelIsa isa : kAllIsas) {
    if (name == kernel_isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

bool kernel_isa_supported(KernelIsa isa) {
  // libgcc's feature bits include the OS check (XGETBV) for the ymm and zmm state.
  switch (isa) {
    case KernelIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             kernel_isa_supported(KernelIsa::kAvx2);
    case KernelIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::kDefault:
      break;
  }
  return true;
}

KernelIsa best_kernel_isa() {
  KernelIsa best = KernelIsa::kDefault;
  for (KernelIsa isa : kAllIsas) {
    if (kernel_isa_supported(isa)) best = isa;
  }
  return best;
}

KernelIsa elementwise_isa() {
  return detail::elementwise_ops().isa;
}

void set_elementwise_isa(KernelIsa isa) {
  if (!kernel_isa_supported(isa)) {
    throw ConfigError(std::string("element-wise kernels: this CPU lacks ") + kernel_isa_name(isa) +
                      " (it has " + kernel_isa_name(best_kernel_isa()) + ")");
  }
  g_ops.store(&ops_of(isa), std::memory_order_relaxed);
}

std::string elementwise_isa_description() {
  const KernelIsa isa = elementwise_isa();
  std::string out = std::string("element-wise ") + kernel_isa_name(isa) + " (";
  if (isa != initial().isa) {
    out +=
        std::string("selected by the program; this CPU has ") + kernel_isa_name(best_kernel_isa());
  } else {
    out += initial().why;
  }
  return out + ")";
}

namespace detail {

const ElementwiseOps& elementwise_ops() {
  const ElementwiseOps* ops = g_ops.load(std::memory_order_relaxed);
  if (ops != nullptr) return *ops;
  const ElementwiseOps* expected = nullptr;
  g_ops.compare_exchange_strong(expected, &ops_of(initial().isa), std::memory_order_relaxed);
  return *g_ops.load(std::memory_order_relaxed);
}

}  // namespace detail

}  // namespace brigade
