// Top-k by a threshold: find the k-th largest magnitude tau, then one pass in index order takes
// every entry above tau and the first (lowest-index) entries equal to tau until k are taken.
// The order (|x| descending, index ascending) is total, so every replica and every run picks
// the same entries, and the output comes out sorted by index.
//
// tau comes from nth_element over plain floats (no indirect comparator). When k is small
// against n (DeMo's 32 of 4096), a sample of every 8th magnitude first gives a bound t that
// about k + 32 entries exceed; only the entries >= t are selected among. If fewer than k
// exceed t (an unrepresentative sample), the full selection runs instead, so the result never
// depends on the sample.
#include "brigade/sync/lowcomm/topk.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "brigade/base/check.h"

namespace brigade {

namespace {
inline float magnitude(float v) {
  const float a = std::fabs(v);
  return std::isnan(a) ? std::numeric_limits<float>::infinity() : a;
}
}  // namespace

void topk_abs(const float* x, int64_t n, int64_t k, float* scratch, uint32_t* idx, float* val) {
  BRIGADE_CHECK(k >= 0 && k <= n && n <= int64_t{std::numeric_limits<uint32_t>::max()})
      << "top-" << k << " of " << n;
  if (k == 0) return;
  if (k == n) {
    for (int64_t i = 0; i < n; ++i) {
      idx[i] = static_cast<uint32_t>(i);
      val[i] = x[i];
    }
    return;
  }
  int64_t candidates = 0;
  constexpr int64_t kStride = 8;
  if (n >= 1024 && k * 4 * kStride <= n) {
    const int64_t m = n / kStride;
    for (int64_t j = 0; j < m; ++j) scratch[j] = magnitude(x[j * kStride]);
    const int64_t r = std::min(m, k / kStride + 4);
    std::nth_element(scratch, scratch + (r - 1), scratch + m, std::greater<float>());
    const float t = scratch[r - 1];
    for (int64_t i = 0; i < n; ++i) {
      const float mi = magnitude(x[i]);
      scratch[candidates] = mi;
      candidates += mi >= t;
    }
    if (candidates < k) candidates = 0;
  }
  if (candidates == 0) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = magnitude(x[i]);
    candidates = n;
  }
  std::nth_element(scratch, scratch + (k - 1), scratch + candidates, std::greater<float>());
  const float tau = scratch[k - 1];
  // Every entry above tau is a candidate and sits before position k - 1 now; the rest of the
  // k are ties at tau.
  int64_t ties = k;
  for (int64_t i = 0; i < k - 1; ++i) ties -= scratch[i] > tau;
  int64_t out = 0;
  for (int64_t i = 0; i < n && out < k; ++i) {
    const float m = magnitude(x[i]);
    if (m > tau || (m == tau && ties > 0)) {
      if (m == tau) --ties;
      idx[out] = static_cast<uint32_t>(i);
      val[out] = x[i];
      ++out;
    }
  }
  BRIGADE_CHECK(out == k) << "selected " << out << " of " << k;
}

}  // namespace brigade
