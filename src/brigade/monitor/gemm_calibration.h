#pragma once
// The GEMM rate MFU is relative to when monitor.peak_flops is 0, on the run's own kernels,
// precision and threads. One 1024^3 matmul_forward is 2.1 GFLOP; the best of 3 timed calls after
// one warm-up takes about 0.1 s on one core. On a shared machine one such measurement moves by
// 2x from start to start, which would move MFU with it; so every start measures, and the best
// rate ever measured on this machine for the same set-up (CPU model, backend, precision,
// threads) is kept in a small cache file (base/host.h's cache_dir()/gemm_peak.json) and used:
// MFU then compares across runs.
#include <string>

namespace brigade {

double measure_gemm_peak_flops();

struct GemmPeak {
  double flops = 0;     // what MFU is relative to: the best known for this set-up
  double measured = 0;  // this start's measurement
  std::string cache;    // the cache file used; "" when there is none (no cache folder)
};

// setup: the kernels' description ("onednn f32 1 thread(s)"), part of the cache key with the CPU
// model. A cache file that cannot be read or parsed is replaced; one that cannot be written is
// left alone (the measurement is used as it is).
GemmPeak gemm_peak_flops(const std::string& setup);

}  // namespace brigade
