// Top-k against a full sort by (|x| descending, index ascending), with ties, NaN, k = 0 and
// k = n.
#include "brigade/sync/lowcomm/topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

std::vector<uint32_t> naive_topk(const std::vector<float>& x, int64_t k) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  auto mag = [&](uint32_t i) {
    return std::isnan(x[i]) ? std::numeric_limits<double>::infinity() : std::fabs(double{x[i]});
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return mag(a) > mag(b); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void check(const std::vector<float>& x, int64_t k, const std::string& what) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> scratch(n);
  std::vector<uint32_t> idx(k);
  std::vector<float> val(k);
  topk_abs(x.data(), n, k, scratch.data(), idx.data(), val.data());
  const std::vector<uint32_t> want = naive_topk(x, k);
  ASSERT_EQ(idx, want) << what << " n " << n << " k " << k;
  for (int64_t j = 0; j < k; ++j) {
    if (std::isnan(x[idx[j]])) {
      EXPECT_TRUE(std::isnan(val[j]));
    } else {
      EXPECT_EQ(val[j], x[idx[j]]);
    }
  }
}

TEST(Topk, MatchesFullSort) {
  uint64_t key = 0;
  for (int64_t n : {1, 2, 7, 64, 100, 4096, 10000}) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, n / 2, n - 1, n}) {
      if (k < 0 || k > n) continue;
      std::vector<float> x(n);
      fill_normal(x.data(), n, 0.0f, 1.0f, 1, ++key);
      check(x, k, "normal");
    }
  }
}

// k small against n takes the sampled-threshold path; these inputs make the sample (every 8th
// entry) unrepresentative both ways, which must fall back to the full selection.
TEST(Topk, SampledThresholdPathAndItsFallback) {
  for (int64_t n : {1024, 4096, 20000}) {
    for (int64_t k : {int64_t{1}, int64_t{4}, int64_t{32}, n / 32}) {
      std::vector<float> x(n);
      fill_normal(x.data(), n, 0.0f, 1.0f, 5, static_cast<uint64_t>(n * 131 + k));
      check(x, k, "normal");
      // Large values only off the sample: the bound is low, many candidates.
      std::vector<float> off = x;
      for (int64_t i = 0; i < n; ++i) off[i] = (i % 8 == 3) ? 100.0f + x[i] : x[i];
      check(off, k, "large off the sample");
      // Large values only on the sample: few candidates beyond the sampled ones.
      std::vector<float> on = x;
      for (int64_t i = 0; i < n; ++i) on[i] = (i % 8 == 0) ? 100.0f + x[i] : 0.01f * x[i];
      check(on, k, "large on the sample");
      // A handful of huge entries, fewer than k: the sample sees none of them.
      std::vector<float> spikes = x;
      for (int64_t i = 1; i < n; i += n / 3 + 1) spikes[i] = 1e6f;
      check(spikes, k, "spikes");
      // All equal: every entry ties.
      check(std::vector<float>(n, -2.0f), k, "constant");
    }
  }
}

TEST(Topk, TiesGoToLowerIndex) {
  // Only five distinct magnitudes, both signs: many ties at the cut.
  for (int64_t n : {10, 257, 4096}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
      const float m = static_cast<float>((i * 7919) % 5);
      x[i] = (random_uniform(2, 3, i) < 0.5f) ? -m : m;
    }
    for (int64_t k : {int64_t{1}, n / 3, n / 2, n - 1}) check(x, k, "ties");
  }
}

TEST(Topk, NanCountsAsLargest) {
  std::vector<float> x = {1.0f, std::nanf(""), -3.0f, std::numeric_limits<float>::infinity(),
                          0.5f, -std::nanf("")};
  check(x, 1, "nan");
  check(x, 3, "nan");
  check(x, 4, "nan");
}

}  // namespace
}  // namespace brigade
