#pragma once
// What every oneDNN kernel of a thread shares (gemm_onednn.cc, pointwise_onednn.cc): the CPU
// engine, an in-order stream, and the OpenMP thread count, applied in the calling thread.
//
// The Debian libdnnl is built on OpenMP (DNNL_CPU_RUNTIME == OMP), whose thread count is per
// calling thread, so the count set_blas_threads() asked for is applied in each calling thread on
// its next oneDNN call. At one thread oneDNN runs its kernels inline: no OpenMP team is ever
// started, so nothing spins and fork() is safe.
#include <dnnl.hpp>

namespace brigade::detail {

struct OneDnnThread {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  int threads = 0;  // the OpenMP thread count set on this thread
};

// This thread's engine and stream, with the thread count of the last set_onednn_threads()
// applied. Primitives are created for a thread count; caches key them by `threads`.
OneDnnThread& onednn_thread();

void set_onednn_threads(int n);

// Aborts naming the primitive and the status unless st is dnnl_success.
void check_dnnl(dnnl_status_t st, const char* what);

}  // namespace brigade::detail
