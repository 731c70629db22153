#pragma once
// A short measurement of this rank's GEMM rate on the run's own kernels, precision and threads:
// the peak that MFU is relative to when monitor.peak_flops is 0. One 1024^3 matmul_forward is
// 2.1 GFLOP; the best of 3 timed calls after one warm-up, about 0.1 s on one core.
namespace brigade {

double measure_gemm_peak_flops();

}  // namespace brigade
