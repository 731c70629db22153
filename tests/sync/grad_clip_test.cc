// Gradient-norm clipping against a naive sum of squares.
#include "brigade/optim/grad_clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "brigade/tensor/rng.h"

namespace brigade {
namespace {

std::vector<float> random_grads(int64_t n, uint64_t key) {
  std::vector<float> g(static_cast<size_t>(n));
  fill_normal(g.data(), n, 0.0f, 1.0f, 99, key);
  return g;
}

double naive_norm(const std::vector<float>& g) {
  double s = 0.0;
  for (float x : g) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

TEST(GradClip, NormEqualsNaive) {
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{100003}}) {
    const auto g = random_grads(n, static_cast<uint64_t>(n));
    EXPECT_NEAR(global_grad_norm(g.data(), n), naive_norm(g), 1e-9 * naive_norm(g)) << n;
  }
  EXPECT_EQ(global_grad_norm(nullptr, 0), 0.0);
}

TEST(GradClip, PartialSquaresCombineToTheGlobalNorm) {
  // What data parallelism does: each rank sums its range, the sums are added, then sqrt.
  const auto g = random_grads(1000, 1);
  const double parts = grad_sum_squares(g.data(), 300) + grad_sum_squares(g.data() + 300, 700);
  EXPECT_NEAR(std::sqrt(parts), naive_norm(g), 1e-9 * naive_norm(g));
}

TEST(GradClip, ClipsToMaxNormAndReturnsThePreClipNorm) {
  auto g = random_grads(5000, 2);
  const auto before = g;
  const double norm = naive_norm(g);
  ASSERT_GT(norm, 1.0);
  const float returned = clip_grad_norm(g.data(), 5000, 1.0f);
  EXPECT_NEAR(returned, norm, 1e-5 * norm);
  EXPECT_NEAR(naive_norm(g), 1.0, 1e-5);
  // Direction is kept: every element scaled by the same factor.
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], before[i] / norm, 1e-6) << i;
}

TEST(GradClip, LeavesSmallNormsAndDisabledClippingAlone) {
  auto g = random_grads(100, 3);
  const auto before = g;
  clip_grad_norm(g.data(), 100, 1000.0f);
  EXPECT_EQ(g, before);
  clip_grad_norm(g.data(), 100, 0.0f);  // max_norm <= 0: off
  EXPECT_EQ(g, before);
  EXPECT_EQ(clip_scale(INFINITY, 1.0f), 1.0f);
  EXPECT_EQ(clip_scale(NAN, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_scale(4.0, 1.0f), 1.0f / (4.0f + 1e-6f));
}

}  // namespace
}  // namespace brigade
