// Fused softmax + cross-entropy against a naive double softmax, finite differences of the
// summed loss, ignored targets, extreme logits, and in-place backward.
#include "brigade/kernels/cpu/crossentropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"

namespace brigade {
namespace {

using test::all_close;
using test::random_vector;

// losses[n] = -log softmax(logits[n])[target], 0 for target < 0; computed by materialising
// the probabilities in double.
std::vector<double> naive_losses(const std::vector<double>& logits,
                                 const std::vector<int32_t>& targets, int64_t N, int64_t V) {
  std::vector<double> losses(N);
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double mx = logits[n * V];
    for (int64_t j = 1; j < V; ++j) mx = std::max(mx, logits[n * V + j]);
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits[n * V + j] - mx);
    const double p = std::exp(logits[n * V + targets[n]] - mx) / z;
    losses[n] = -std::log(p);
  }
  return losses;
}

double naive_lse(const std::vector<double>& logits, int64_t n, int64_t V) {
  double mx = logits[n * V];
  for (int64_t j = 1; j < V; ++j) mx = std::max(mx, logits[n * V + j]);
  double z = 0;
  for (int64_t j = 0; j < V; ++j) z += std::exp(logits[n * V + j] - mx);
  return mx + std::log(z);
}

constexpr int64_t kN = 6, kV = 37;
const std::vector<int32_t> kTargets = {3, -1, 0, 36, 17, -100};

TEST(CrossEntropy, ForwardMatchesNaive) {
  auto logits = random_vector(kN * kV, 1, -3.0f, 3.0f);
  std::vector<float> losses(kN, 7.0f), lse(kN);
  crossentropy_forward(losses.data(), lse.data(), logits.data(), kTargets.data(), kN, kV);
  auto dl = test::to_double(logits);
  EXPECT_TRUE(all_close(losses, naive_losses(dl, kTargets, kN, kV), 1e-5, 1e-6));
  std::vector<double> expected_lse(kN);
  for (int64_t n = 0; n < kN; ++n) expected_lse[n] = naive_lse(dl, n, kV);
  EXPECT_TRUE(all_close(lse, expected_lse, 1e-6, 1e-6));
  EXPECT_EQ(losses[1], 0.0f);
  EXPECT_EQ(losses[5], 0.0f);
}

TEST(CrossEntropy, ExtremeLogitsStayFinite) {
  // exp(1000) overflows float and double; the max-shifted form must not.
  std::vector<float> logits = {1000.0f, 0.0f, -1000.0f, -1000.0f, -1000.0f, 999.0f};
  std::vector<int32_t> targets = {1, 0};
  std::vector<float> losses(2), lse(2);
  crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), 2, 3);
  EXPECT_NEAR(losses[0], 1000.0f, 1e-3);
  EXPECT_NEAR(lse[1], 999.0f, 1e-3);
  // Row 1's log-sum-exp is 999 (the other terms are e^-1999); its target logit -1000 costs 1999.
  EXPECT_NEAR(losses[1], 1999.0f, 1e-2);
  std::vector<float> d(6);
  crossentropy_backward(d.data(), logits.data(), lse.data(), targets.data(), 1.0f, 2, 3);
  for (float g : d) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(d[0], 1.0f, 1e-6);
  EXPECT_NEAR(d[1], -1.0f, 1e-6);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  auto logits = random_vector(kN * kV, 2, -3.0f, 3.0f);
  std::vector<float> losses(kN), lse(kN), dlogits(logits.size(), 5.0f);  // written, not +=
  crossentropy_forward(losses.data(), lse.data(), logits.data(), kTargets.data(), kN, kV);
  const float dloss = 1.0f / 4;  // the mean over the 4 counted rows
  crossentropy_backward(dlogits.data(), logits.data(), lse.data(), kTargets.data(), dloss, kN, kV);
  auto x = test::to_double(logits);
  auto loss = [&](const std::vector<double>& l) {
    double s = 0;
    for (double v : naive_losses(l, kTargets, kN, kV)) s += v;
    return dloss * s;
  };
  EXPECT_TRUE(test::check_grad_fd(dlogits, x, test::sample_indices(x.size(), 1000, 1), loss, 1e-5));
  // Ignored rows get exactly zero.
  for (int64_t j = 0; j < kV; ++j) {
    EXPECT_EQ(dlogits[1 * kV + j], 0.0f);
    EXPECT_EQ(dlogits[5 * kV + j], 0.0f);
  }
  // Each counted row's gradient sums to zero (softmax sums to one).
  for (int64_t n : {0, 2, 3, 4}) {
    double s = 0;
    for (int64_t j = 0; j < kV; ++j) s += dlogits[n * kV + j];
    EXPECT_NEAR(s, 0.0, 1e-6) << n;
  }
}

TEST(CrossEntropy, BackwardInPlace) {
  auto logits = random_vector(kN * kV, 3, -3.0f, 3.0f);
  std::vector<float> losses(kN), lse(kN), separate(logits.size());
  crossentropy_forward(losses.data(), lse.data(), logits.data(), kTargets.data(), kN, kV);
  crossentropy_backward(separate.data(), logits.data(), lse.data(), kTargets.data(), 0.5f, kN, kV);
  crossentropy_backward(logits.data(), logits.data(), lse.data(), kTargets.data(), 0.5f, kN, kV);
  EXPECT_EQ(logits, separate);
}

TEST(CrossEntropy, LargeVocabulary) {
  // A GPT-2-sized row: the sum of ~50k exponentials must keep full precision.
  const int64_t V = 50257, N = 2;
  auto logits = random_vector(N * V, 4, -10.0f, 10.0f);
  std::vector<int32_t> targets = {0, 50256};
  std::vector<float> losses(N), lse(N);
  crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  EXPECT_TRUE(all_close(losses, naive_losses(test::to_double(logits), targets, N, V), 1e-5, 1e-5));
}

}  // namespace
}  // namespace brigade
