#include "brigade/monitor/gemm_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "brigade/base/error.h"
#include "brigade/base/file_io.h"
#include "brigade/base/host.h"
#include "brigade/base/json_limits.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/monitor/timer.h"

namespace brigade {

namespace {
// A rate no CPU core reaches, so that a hand-edited or damaged entry is not believed.
constexpr double kMaxPlausibleFlops = 1e14;
constexpr int64_t kMaxCacheBytes = 1 << 20;
}  // namespace

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

GemmPeak gemm_peak_flops(const std::string& setup) {
  GemmPeak peak;
  peak.measured = measure_gemm_peak_flops();
  peak.flops = peak.measured;
  const std::string dir = cache_dir();
  if (dir.empty()) return peak;
  peak.cache = dir + "/gemm_peak.json";
  const std::string key = cpu_model_name() + " | " + setup;
  nlohmann::json cache = nlohmann::json::object();
  std::error_code ec;
  if (std::filesystem::exists(peak.cache, ec)) {
    try {
      nlohmann::json read = parse_json_bounded(read_file(peak.cache, kMaxCacheBytes), peak.cache);
      if (read.is_object()) cache = std::move(read);
    } catch (const IoError&) {
      // Unreadable or not JSON: replaced below.
    }
  }
  const auto known = cache.find(key);
  if (known != cache.end() && known->is_number()) {
    const double v = known->get<double>();
    if (std::isfinite(v) && v > 0 && v < kMaxPlausibleFlops) peak.flops = std::max(peak.flops, v);
  }
  if (known == cache.end() || !known->is_number() || known->get<double>() != peak.flops) {
    cache[key] = peak.flops;
    try {
      make_dirs(dir);
      write_file_atomic(peak.cache, cache.dump(2) + "\n");
    } catch (const IoError&) {
      peak.cache.clear();  // a read-only home: this start's measurement, as before
      peak.flops = peak.measured;
    }
  }
  return peak;
}

}  // namespace brigade
