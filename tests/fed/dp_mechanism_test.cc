// DP-FedAvg's mechanism (fed/dp_mechanism.h): the clipped sum over the fixed denominator, noise
// of the stated standard deviation that repeats for the same key and round and for no other,
// and a Poisson sample of the stated rate that depends on the key.
#include "brigade/fed/dp_mechanism.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace brigade {
namespace {

TEST(DpMechanism, WithoutNoiseItIsTheClippedSumOverTheExpectedCount) {
  DpMechanism dp(/*clip=*/1.0, /*noise=*/0.0, make_dp_key());
  const std::vector<float> a = {0.3f, 0.4f}, b = {30.0f, 40.0f};  // norms 0.5 and 50
  std::vector<float> out(2);
  EXPECT_EQ(dp.noised_mean({a.data(), b.data()}, 2, 4.0, 0, 0, out.data()), 1);
  EXPECT_NEAR(out[0], (0.3 + 0.6) / 4, 1e-7);
  EXPECT_NEAR(out[1], (0.4 + 0.8) / 4, 1e-7);
}

TEST(DpMechanism, NoiseHasTheStatedDeviationAndRepeatsOnlyForTheSameKeyAndRound) {
  const DpKey key = make_dp_key();
  const int64_t n = 200001;
  const std::vector<float> zero(n, 0.0f);
  DpMechanism dp(/*clip=*/2.0, /*noise=*/1.5, key), again(2.0, 1.5, key),
      other(2.0, 1.5, make_dp_key());
  std::vector<float> x(n), y(n), z(n), w(n);
  dp.noised_mean({zero.data()}, n, 1.0, 3, 0, x.data());
  again.noised_mean({zero.data()}, n, 1.0, 3, 0, y.data());
  dp.noised_mean({zero.data()}, n, 1.0, 3, 1, z.data());
  other.noised_mean({zero.data()}, n, 1.0, 3, 0, w.data());
  EXPECT_EQ(x, y);
  double sum = 0, squares = 0, cross_z = 0, cross_w = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    squares += double{x[i]} * x[i];
    cross_z += double{x[i]} * z[i];
    cross_w += double{x[i]} * w[i];
  }
  const double sigma = 1.5 * 2.0, mean = sum / n, sd = std::sqrt(squares / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 5 * sigma / std::sqrt(double(n)));
  EXPECT_NEAR(sd, sigma, 0.01 * sigma);
  // Independent draws: correlations within 5 standard errors of 0.
  EXPECT_LT(std::abs(cross_z / n) / (sigma * sigma), 5 / std::sqrt(double(n)));
  EXPECT_LT(std::abs(cross_w / n) / (sigma * sigma), 5 / std::sqrt(double(n)));
}

TEST(DpMechanism, PoissonSampleHasTheStatedRateAndDependsOnTheKey) {
  DpMechanism a(1, 1, make_dp_key()), b(1, 1, make_dp_key());
  int64_t in_a = 0, both = 0, total = 0;
  for (int64_t round = 0; round < 200; ++round) {
    for (int client = 0; client < 100; ++client) {
      const bool sa = a.sampled(client, round, 0, 0.1), sb = b.sampled(client, round, 0, 0.1);
      in_a += sa;
      both += sa && sb;
      ++total;
    }
  }
  const double rate = double(in_a) / total;
  EXPECT_NEAR(rate, 0.1, 5 * std::sqrt(0.1 * 0.9 / total));
  EXPECT_NEAR(double(both) / total, 0.01, 5 * std::sqrt(0.01 * 0.99 / total));  // independent
  EXPECT_TRUE(a.sampled(7, 3, 0, 1.0));
}

}  // namespace
}  // namespace brigade
