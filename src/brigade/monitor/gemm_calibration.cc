#include "brigade/monitor/gemm_calibration.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/timer.h"

namespace brigade {

double measure_gemm_peak_flops() {
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), w(n * n, 0.25f), out(n * n);
  double best_s = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    Stopwatch watch;
    matmul_forward(out.data(), a.data(), w.data(), nullptr, n, n, n);
    if (rep > 0) best_s = std::min(best_s, watch.seconds());  // rep 0 warms caches and packing
  }
  return 2.0 * n * n * n / best_s;
}

}  // namespace brigade
