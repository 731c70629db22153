// The inner-loop helpers of kernels/cpu/vec.h that the kernels' accuracy rests on: fast exp
// and tanh against libm in double, their edge cases, and the array forms' tails and aliasing.
#include "brigade/kernels/cpu/vec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "grad_check.h"

namespace brigade::detail {
namespace {

TEST(FastExp, RelativeErrorBelowTwoUlp) {
  double worst = 0;
  float worst_x = 0;
  // A geometric-ish sweep over the whole normal range, both signs.
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    const double err = std::fabs(fast_exp(x) - ref) / ref;
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  EXPECT_LT(worst, 2.5e-7) << "at x = " << worst_x;  // float epsilon is 1.19e-7
}

TEST(FastExp, EdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-inf), 0.0f);  // masked scores / padding
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(fast_exp(1000.0f)));  // saturates instead of overflowing
  EXPECT_GT(fast_exp(1000.0f), 1e38f);
}

TEST(FastTanh, AbsoluteError) {
  double worst = 0;
  for (float x = -30.0f; x < 30.0f; x += 0.0031f) {
    worst = std::max(worst, std::fabs(fast_tanh(x) - std::tanh(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-100.0f), -1.0f);
}

TEST(ArrayHelpers, TailsAndAliasing) {
  // Lengths around the four-wide groups, the 8-wide lanes and the 256-element runs.
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 17, 255, 256, 257, 1000}) {
    auto x = test::random_vector(n, n, -5.0f, 5.0f);
    const float shift = 0.75f;
    std::vector<float> out(n);
    exp_shifted(out.data(), x.data(), shift, n);
    std::vector<double> ref(n);
    double ref_sum = 0, ref_dot = 0, ref_plain_sum = 0;
    float ref_max = x[0];
    for (int64_t i = 0; i < n; ++i) {
      ref[i] = std::exp(static_cast<double>(x[i]) - shift);
      ref_sum += ref[i];
      ref_dot += static_cast<double>(x[i]) * out[i];
      ref_plain_sum += x[i];
      ref_max = std::max(ref_max, x[i]);
    }
    EXPECT_TRUE(test::all_close(out, ref, 3e-7, 0)) << "n " << n;
    EXPECT_NEAR(sum_exp_shifted(x.data(), shift, n), ref_sum, 1e-6 * ref_sum) << "n " << n;
    EXPECT_EQ(max_of(x.data(), n), ref_max) << "n " << n;
    EXPECT_NEAR(dot(x.data(), out.data(), n), ref_dot, 1e-5 * (1 + std::fabs(ref_dot))) << n;
    EXPECT_NEAR(sum(x.data(), n), ref_plain_sum, 1e-5 * n) << "n " << n;
    // In place gives the same values, and nothing past n is written.
    std::vector<float> in_place(x);
    in_place.push_back(42.0f);
    exp_shifted(in_place.data(), in_place.data(), shift, n);
    EXPECT_EQ(in_place.back(), 42.0f);
    in_place.pop_back();
    EXPECT_EQ(in_place, out) << "n " << n;
  }
}

}  // namespace
}  // namespace brigade::detail
