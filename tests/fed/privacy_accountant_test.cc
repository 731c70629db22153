// The RDP accountant (fed/privacy_accountant.h) against the closed form of the unsampled
// Gaussian mechanism, against the values Google's dp_accounting lists in its own tests
// (rdp_privacy_accountant_test.py) for the sampled one, and against the exact privacy curve of
// the Gaussian mechanism (Balle and Wang, ICML 2018), which RDP must bound from above.
#include "brigade/fed/privacy_accountant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace brigade {
namespace {

TEST(PrivacyAccountant, UnsampledGaussianIsTheClosedForm) {
  for (double z : {0.5, 1.0, 2.71828}) {
    for (double order : {1.5, 2.0, 3.14159, 32.0}) {
      EXPECT_NEAR(sampled_gaussian_rdp(1.0, z, order), order / (2 * z * z), 1e-12);
    }
  }
  PrivacyAccountant a({3.0});
  a.compose(1.0, 2.0, 10);
  EXPECT_NEAR(a.rdp()[0], 10 * 3.0 / 8.0, 1e-12);
}

// dp_accounting: test_compute_rdp_poisson_sampled_gaussian (q = 0.01, z = 2.5, 50 rounds).
TEST(PrivacyAccountant, SampledGaussianMatchesDpAccounting) {
  PrivacyAccountant a({1.5, 2.5, 5, 50, 100});
  a.compose(0.01, 2.5, 50);
  const std::vector<double> want = {6.70579741e-04, 1.08548710e-03, 2.18075656e-03, 2.38460375e-02,
                                    1.67416308e02};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(a.rdp()[i], want[i], 1e-4 * want[i]) << "order index " << i;
  }
}

// A_alpha = E_{x ~ N(0, z^2)} [(1 - q + q exp((2x - 1) / (2 z^2)))^alpha] by the trapezoid
// rule: at integer orders the accountant is exact, at fractional ones it may only be above.
double rdp_by_quadrature(double q, double z, double order) {
  const double lo = -40 * z, hi = 40 * z, h = 1e-4 * z;
  double sum = 0;
  for (double x = lo; x <= hi; x += h) {
    const double density = std::exp(-x * x / (2 * z * z)) / (z * std::sqrt(2 * M_PI));
    sum += density * std::pow(1 - q + q * std::exp((2 * x - 1) / (2 * z * z)), order) * h;
  }
  return std::log(sum) / (order - 1);
}

TEST(PrivacyAccountant, SampledGaussianAgreesWithNumericalIntegration) {
  for (double order : {2.0, 7.0, 1.5, 3.7}) {
    const double exact = rdp_by_quadrature(0.05, 1.3, order);
    const double rdp = sampled_gaussian_rdp(0.05, 1.3, order);
    if (order == std::floor(order)) {
      EXPECT_NEAR(rdp, exact, 1e-6 * exact) << order;
    } else {
      EXPECT_GE(rdp, exact * (1 - 1e-6)) << order;
      EXPECT_LT(rdp, exact * 1.2) << order;
    }
  }
}

TEST(PrivacyAccountant, FractionalOrdersJoinTheIntegerOnes) {
  for (double q : {0.001, 0.05, 0.3}) {
    const double at4 = sampled_gaussian_rdp(q, 1.1, 4.0);
    EXPECT_NEAR(sampled_gaussian_rdp(q, 1.1, 4.0 + 1e-7), at4, 1e-5 * at4) << q;
    EXPECT_NEAR(sampled_gaussian_rdp(q, 1.1, 4.0 - 1e-7), at4, 1e-5 * at4) << q;
  }
}

// dp_accounting: test_compute_epsilon_delta_pure_dp.
TEST(PrivacyAccountant, EpsilonOfAConstantRdpMatchesDpAccounting) {
  std::vector<double> orders, rdp;
  for (int a = 2; a <= 32; ++a) {
    orders.push_back(a);
    rdp.push_back(1.1);
  }
  double order = 0;
  EXPECT_NEAR(rdp_to_epsilon(orders, rdp, 1e-5, &order), 1.32783806176, 1e-9);
  EXPECT_EQ(order, 32);
}

// dp_accounting: test_compute_epsilon_delta_gaussian, z chosen for exactly (1, 1e-6)-DP.
TEST(PrivacyAccountant, GaussianNoiseForEpsilonOneMatchesDpAccounting) {
  std::vector<double> orders;
  for (int i = 1000; i < 100000; ++i) orders.push_back(0.001 * i);
  PrivacyAccountant a(orders);
  a.compose(1.0, 4.530877117);
  EXPECT_NEAR(a.epsilon(1e-6), 1.0, 1e-6);
}

// The exact delta(epsilon) of T Gaussian mechanisms of multiplier z (a Gaussian of mu =
// sqrt(T) / z): what RDP reports must be an upper bound, and not a loose one.
TEST(PrivacyAccountant, EpsilonBoundsTheExactGaussianCurve) {
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  for (double z : {0.8, 2.0, 5.0}) {
    for (int64_t rounds : {1, 10, 100}) {
      PrivacyAccountant a;
      a.compose(1.0, z, rounds);
      const double delta = 1e-5;
      const double eps = a.epsilon(delta);
      const double mu = std::sqrt(static_cast<double>(rounds)) / z;
      const double exact = phi(-eps / mu + mu / 2) - std::exp(eps) * phi(-eps / mu - mu / 2);
      EXPECT_LE(exact, delta) << "z " << z << " rounds " << rounds;
      EXPECT_GT(exact, delta / 20) << "a loose bound: z " << z << " rounds " << rounds;
    }
  }
}

TEST(PrivacyAccountant, SamplingAmplifiesAndNoNoiseIsNoPrivacy) {
  PrivacyAccountant all, tenth, none, silent;
  all.compose(1.0, 1.0, 100);
  tenth.compose(0.1, 1.0, 100);
  none.compose(0.0, 1.0, 100);
  silent.compose(0.5, 0.0, 1);
  EXPECT_LT(tenth.epsilon(1e-5), all.epsilon(1e-5) / 3);
  EXPECT_EQ(none.epsilon(1e-5), 0);
  EXPECT_TRUE(std::isinf(silent.epsilon(1e-5)));
}

}  // namespace
}  // namespace brigade
