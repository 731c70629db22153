#include "brigade/kernels/cpu/onednn_thread.h"

#include <atomic>

#include "brigade/base/check.h"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#elif DNNL_CPU_RUNTIME != DNNL_RUNTIME_SEQ
#error "onednn_thread.cc sets threads for OpenMP or sequential oneDNN builds only"
#endif

namespace brigade::detail {

namespace {
std::atomic<int> g_threads{1};
}  // namespace

OneDnnThread& onednn_thread() {
  thread_local OneDnnThread t;
  const int want = g_threads.load(std::memory_order_relaxed);
  if (t.threads != want) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    omp_set_num_threads(want);
#endif
    t.threads = want;
  }
  return t;
}

void set_onednn_threads(int n) {
  g_threads.store(n, std::memory_order_relaxed);
}

void check_dnnl(dnnl_status_t st, const char* what) {
  BRIGADE_CHECK(st == dnnl_success)
      << "oneDNN " << what << " failed, status " << static_cast<int>(st);
}

}  // namespace brigade::detail
