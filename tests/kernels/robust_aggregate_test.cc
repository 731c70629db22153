// The robust aggregation rules (optim/robust_aggregate.h) against naive references: a full sort
// per coordinate for the median and the trimmed mean, all pairwise distances sorted for Krum.
#include "brigade/optim/robust_aggregate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace brigade {
namespace {

std::vector<std::vector<float>> random_updates(int k, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> u(static_cast<size_t>(k), std::vector<float>(n));
  for (auto& v : u) {
    for (float& x : v) x = normal(gen);
  }
  return u;
}

std::vector<const float*> pointers(const std::vector<std::vector<float>>& u) {
  std::vector<const float*> p;
  for (const auto& v : u) p.push_back(v.data());
  return p;
}

std::vector<float> sorted_column(const std::vector<std::vector<float>>& u, int64_t i) {
  std::vector<float> c;
  for (const auto& v : u) c.push_back(v[static_cast<size_t>(i)]);
  std::sort(c.begin(), c.end());
  return c;
}

TEST(RobustAggregate, MedianMatchesASortPerCoordinate) {
  for (int k : {1, 2, 5, 8}) {
    const int64_t n = 301;
    const auto u = random_updates(k, n, 11 + k);
    std::vector<float> out(n);
    coordinate_median(pointers(u), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> c = sorted_column(u, i);
      const size_t m = c.size() / 2;
      const float want =
          c.size() % 2 ? c[m] : static_cast<float>(0.5 * (double{c[m - 1]} + double{c[m]}));
      ASSERT_EQ(out[static_cast<size_t>(i)], want) << "k " << k << " coordinate " << i;
    }
  }
}

TEST(RobustAggregate, TrimmedMeanMatchesASortPerCoordinate) {
  const int k = 9;
  const int64_t n = 257;
  const auto u = random_updates(k, n, 5);
  for (int64_t trim : {0, 1, 4}) {
    std::vector<float> out(n);
    trimmed_mean(pointers(u), n, trim, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> c = sorted_column(u, i);
      double sum = 0;
      for (int64_t j = trim; j < k - trim; ++j) sum += c[static_cast<size_t>(j)];
      ASSERT_FLOAT_EQ(out[static_cast<size_t>(i)], static_cast<float>(sum / double(k - 2 * trim)));
    }
  }
}

TEST(RobustAggregate, KrumScoresMatchAllPairwiseDistances) {
  const int k = 8;
  const int64_t n = 64, f = 2;
  const auto u = random_updates(k, n, 9);
  const std::vector<double> scores = krum_scores(pointers(u), n, f);
  for (int a = 0; a < k; ++a) {
    std::vector<double> d;
    for (int b = 0; b < k; ++b) {
      if (a == b) continue;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double diff = double{u[a][static_cast<size_t>(i)]} - u[b][static_cast<size_t>(i)];
        s += diff * diff;
      }
      d.push_back(s);
    }
    std::sort(d.begin(), d.end());
    double want = 0;
    for (int64_t j = 0; j < k - f - 2; ++j) want += d[static_cast<size_t>(j)];
    EXPECT_NEAR(scores[static_cast<size_t>(a)], want, 1e-9 * want);
  }
}

// f attackers far from the honest updates: Krum picks honest ones, the median stays inside the
// honest range, the plain mean does not.
TEST(RobustAggregate, RulesHoldOffOutliersThatMoveTheMean) {
  const int honest = 7, f = 2;
  const int64_t n = 50;
  auto u = random_updates(honest + f, n, 21);
  for (int a = honest; a < honest + f; ++a) {
    for (float& x : u[static_cast<size_t>(a)]) x = 100.0f;
  }
  const auto p = pointers(u);
  const std::vector<int> chosen = lowest_scores(krum_scores(p, n, f), honest);
  for (int c : chosen) EXPECT_LT(c, honest);
  std::vector<float> median(n), trimmed(n);
  coordinate_median(p, n, median.data());
  trimmed_mean(p, n, f, trimmed.data());
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::vector<float>> good(u.begin(), u.begin() + honest);
    const std::vector<float> c = sorted_column(good, i);
    EXPECT_GE(median[static_cast<size_t>(i)], c.front());
    EXPECT_LE(median[static_cast<size_t>(i)], c.back());
    EXPECT_LE(trimmed[static_cast<size_t>(i)], c.back());
  }
  double mean0 = 0;
  for (const auto& v : u) mean0 += v[0];
  EXPECT_GT(mean0 / (honest + f), 10.0);  // what the rules hold off
}

TEST(RobustAggregate, NormBoundScalesOnlyLongerUpdates) {
  std::vector<float> v = {3, 4};
  EXPECT_DOUBLE_EQ(bound_norm(v.data(), 2, 10), 5);
  EXPECT_EQ(v, (std::vector<float>{3, 4}));
  EXPECT_DOUBLE_EQ(bound_norm(v.data(), 2, 1), 5);
  EXPECT_NEAR(std::hypot(v[0], v[1]), 1.0, 1e-6);
  EXPECT_NEAR(v[0] / v[1], 0.75, 1e-6);
}

TEST(RobustAggregate, LowestScoresBreaksTiesByIndex) {
  EXPECT_EQ(lowest_scores({3, 1, 1, 0}, 3), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(lowest_scores({3, 1}, 5), (std::vector<int>{1, 0}));
}

}  // namespace
}  // namespace brigade
