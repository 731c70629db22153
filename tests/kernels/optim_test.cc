// Optimizer kernels against naive scalar implementations in double, step by step.
#include "brigade/kernels/cpu/optim.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "grad_check.h"

namespace brigade::optim_test {
namespace {

using test::all_close;
using test::random_vector;

constexpr int64_t kN = 203;  // not a multiple of any unrolling width
constexpr int kSteps = 6;

TEST(AdamW, MatchesNaiveOverSeveralSteps) {
  for (float wd : {0.0f, 0.1f}) {
    AdamWParams hp{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = wd};
    auto p = random_vector(kN, 1);
    std::vector<float> m(kN), v(kN);
    auto rp = test::to_double(p);
    std::vector<double> rm(kN), rv(kN);
    for (int step = 1; step <= kSteps; ++step) {
      // Gradients of varying scale, a few exactly zero.
      auto g = random_vector(kN, 100 + step, -step * 1.0f, step * 1.0f);
      g[3] = 0.0f;
      hp.step = step;
      adamw_update(p.data(), g.data(), m.data(), v.data(), kN, hp);
      const double b1 = hp.beta1, b2 = hp.beta2;
      for (int64_t i = 0; i < kN; ++i) {
        rm[i] = b1 * rm[i] + (1 - b1) * g[i];
        rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
        const double mhat = rm[i] / (1 - std::pow(b1, step));
        const double vhat = rv[i] / (1 - std::pow(b2, step));
        rp[i] -= hp.lr * (mhat / (std::sqrt(vhat) + hp.eps) + wd * rp[i]);
      }
      EXPECT_TRUE(all_close(m, rm, 1e-5, 1e-7)) << "step " << step << " wd " << wd;
      EXPECT_TRUE(all_close(v, rv, 1e-5, 1e-7)) << "step " << step << " wd " << wd;
      EXPECT_TRUE(all_close(p, rp, 1e-5, 1e-6)) << "step " << step << " wd " << wd;
    }
  }
}

TEST(AdamW, FirstStepIsSignSized) {
  // Closed form at step 1: mhat = g, vhat = g^2, so the step is lr * g/(|g|+eps) ~ lr sign(g).
  AdamWParams hp{.lr = 0.5f, .step = 1};
  std::vector<float> p = {1.0f, 1.0f, 1.0f}, g = {3.0f, -0.01f, 0.0f}, m(3), v(3);
  adamw_update(p.data(), g.data(), m.data(), v.data(), 3, hp);
  EXPECT_NEAR(p[0], 0.5f, 1e-6);
  EXPECT_NEAR(p[1], 1.5f, 1e-5);
  EXPECT_EQ(p[2], 1.0f);
}

void naive_sgd(std::vector<double>& p, const std::vector<float>& g, std::vector<double>& buf,
               const SgdParams& hp) {
  for (size_t i = 0; i < p.size(); ++i) {
    const double gi = g[i] + static_cast<double>(hp.weight_decay) * p[i];
    if (hp.momentum == 0.0f) {
      p[i] -= hp.lr * gi;
      continue;
    }
    buf[i] = hp.momentum * buf[i] + gi;
    p[i] -= hp.lr * (hp.nesterov ? gi + hp.momentum * buf[i] : buf[i]);
  }
}

TEST(Sgd, MatchesNaiveOverSeveralSteps) {
  const SgdParams configs[] = {
      {.lr = 0.1f},
      {.lr = 0.1f, .weight_decay = 0.01f},
      {.lr = 0.05f, .momentum = 0.9f},
      {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f},
      {.lr = 0.05f, .momentum = 0.9f, .nesterov = true},
      {.lr = 0.05f, .momentum = 0.8f, .weight_decay = 0.05f, .nesterov = true},
  };
  int c = 0;
  for (const SgdParams& hp : configs) {
    auto p = random_vector(kN, 2);
    std::vector<float> buf(kN);
    auto rp = test::to_double(p);
    std::vector<double> rbuf(kN);
    for (int step = 1; step <= kSteps; ++step) {
      auto g = random_vector(kN, 200 + step);
      // Momentum 0: the buffer is documented as optional.
      sgd_update(p.data(), g.data(), hp.momentum == 0.0f ? nullptr : buf.data(), kN, hp);
      naive_sgd(rp, g, rbuf, hp);
      EXPECT_TRUE(all_close(p, rp, 1e-5, 1e-6)) << "config " << c << " step " << step;
      if (hp.momentum != 0.0f) {
        EXPECT_TRUE(all_close(buf, rbuf, 1e-5, 1e-6)) << "config " << c << " step " << step;
      }
    }
    ++c;
  }
}

TEST(SumSquares, MatchesDoubleSum) {
  for (int64_t n : {0, 1, 3, 4, 5, 1000, 12345}) {
    auto x = random_vector(n, 3, -2.0f, 2.0f);
    double expected = 0;
    for (float v : x) expected += static_cast<double>(v) * v;
    EXPECT_NEAR(sum_squares(x.data(), n), expected, 1e-12 * (1 + expected)) << n;
  }
  // Squares beyond float range: each must be formed in double.
  std::vector<float> big = {1e20f, -1e20f, 1.0f};
  const double b = static_cast<double>(1e20f);
  EXPECT_NEAR(sum_squares(big.data(), 3), 2 * b * b, 1e-12 * b * b);
  // Small terms must not vanish next to a large one as they would in float.
  std::vector<float> mixed(10001, 1.0f);
  mixed[0] = 1e4f;
  EXPECT_EQ(sum_squares(mixed.data(), mixed.size()), 1e8 + 10000.0);
}

TEST(ScaleInplace, Scales) {
  auto x = random_vector(37, 4);
  auto y = x;
  scale_inplace(y.data(), -0.25f, y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] * -0.25f);
}

TEST(AllFinite, DetectsNanAndInfAnywhere) {
  EXPECT_TRUE(all_finite(nullptr, 0));
  const int64_t n = 3000;  // spans several internal chunks
  std::vector<float> x = random_vector(n, 5);
  x[7] = FLT_MAX;
  x[8] = -FLT_MAX;
  x[9] = FLT_MIN / 4;  // subnormal
  x[10] = -0.0f;
  ASSERT_TRUE(all_finite(x.data(), n));
  const float bad[] = {
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  for (float v : bad) {
    for (int64_t pos : {int64_t{0}, int64_t{1023}, int64_t{1024}, int64_t{2047}, n - 1}) {
      auto y = x;
      y[pos] = v;
      EXPECT_FALSE(all_finite(y.data(), n)) << "value " << v << " at " << pos;
      // The element just past the range is not looked at.
      EXPECT_TRUE(all_finite(y.data(), pos)) << "value " << v << " at " << pos;
    }
  }
}

}  // namespace
}  // namespace brigade::optim_test
