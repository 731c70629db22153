// PowerSGD in one process, W replicas simulated by averaging the phase buffers here: at full
// rank it reproduces the mean gradient every step; at low rank the error feedback telescopes
// (sum of outputs = sum of mean gradients - mean final error) and sent + new error = input +
// old error; a common rank-1 gradient is reproduced exactly at rank 1; 1-D tensors are exact.
#include "brigade/sync/lowcomm/powersgd.h"

#include <gtest/gtest.h>

#include <cmath>

#include "brigade/base/error.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::replica_grad;

// One reduce() of W replicas; grads[r] is replaced by replica r's output.
void simulated_reduce(std::vector<PowerSgd>& rep, std::vector<std::vector<float>>& grads) {
  const int W = static_cast<int>(rep.size());
  const int64_t np = rep[0].p_floats(), nq = rep[0].q_floats();
  std::vector<std::vector<float>> p(W, std::vector<float>(np)), q(W, std::vector<float>(nq));
  std::vector<float> mean_p(np, 0.0f), mean_q(nq, 0.0f);
  for (int r = 0; r < W; ++r) rep[r].phase_p(grads[r].data(), p[r].data());
  for (int r = 0; r < W; ++r)
    for (int64_t i = 0; i < np; ++i) mean_p[i] += p[r][i] / W;
  for (int r = 0; r < W; ++r) {
    p[r] = mean_p;
    rep[r].phase_q(p[r].data(), q[r].data());
  }
  for (int r = 0; r < W; ++r)
    for (int64_t i = 0; i < nq; ++i) mean_q[i] += q[r][i] / W;
  for (int r = 0; r < W; ++r) rep[r].phase_finish(p[r].data(), mean_q.data(), grads[r].data());
}

ParamLayout layout() {
  ParamLayout l;
  l.add({.name = "w1", .shape = {24, 16}});
  l.add({.name = "b1", .shape = {24}});
  l.add({.name = "w2", .shape = {8, 30}});
  return l;
}

std::vector<PowerSgd> replicas(int W, const PowerSgdConfig& c, const ParamLayout& l) {
  std::vector<PowerSgd> rep;
  for (int r = 0; r < W; ++r) rep.emplace_back(c, l, 0, l.total());
  return rep;
}

TEST(Orthonormalize, ColumnsBecomeOrthonormal) {
  const int64_t n = 50;
  const int r = 4;
  std::vector<float> p = testutil::normal_vector(n * r, 1, "p");
  orthonormalize_columns(p.data(), n, r);
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < r; ++j) {
      double dot = 0.0;
      for (int64_t k = 0; k < n; ++k) dot += double{p[k * r + i]} * p[k * r + j];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << i << "," << j;
    }
  }
  // Column 2 = column 0 + column 1: dependent, becomes zero rather than amplified noise.
  std::vector<float> d = testutil::normal_vector(n * 3, 2, "d");
  for (int64_t k = 0; k < n; ++k) d[k * 3 + 2] = d[k * 3] + d[k * 3 + 1];
  orthonormalize_columns(d.data(), n, 3);
  for (int64_t k = 0; k < n; ++k) EXPECT_EQ(d[k * 3 + 2], 0.0f);
}

TEST(PowerSgd, FullRankReproducesTheMeanGradientEveryStep) {
  const ParamLayout l = layout();
  const int64_t n = l.total();
  const int W = 3;
  std::vector<PowerSgd> rep = replicas(W, {.rank = 30, .skip_incompressible = false}, l);
  ASSERT_EQ(rep[0].compressed_matrices(), 2);
  // rank capped at min(n, m): P is (24 x 16) + (8 x 8), plus b1 uncompressed.
  EXPECT_EQ(rep[0].p_floats(), 24 * 16 + 8 * 8 + 24);
  EXPECT_EQ(rep[0].q_floats(), 16 * 16 + 30 * 8);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> g(W);
    std::vector<double> mean(n, 0.0);
    for (int r = 0; r < W; ++r) {
      g[r] = replica_grad(n, r, step);
      for (int64_t i = 0; i < n; ++i) mean[i] += double{g[r][i]} / W;
    }
    simulated_reduce(rep, g);
    for (int r = 0; r < W; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(g[r][i], mean[i], 2e-4) << "step " << step << " replica " << r << " " << i;
      }
    }
    // The errors are M_i - mean(M): they sum to zero over the replicas.
    for (int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int r = 0; r < W; ++r) s += rep[r].state_tensors()[0].data[i];
      ASSERT_NEAR(s, 0.0, 2e-4) << i;
    }
  }
}

TEST(PowerSgd, LowRankErrorFeedbackTelescopes) {
  const ParamLayout l = layout();
  const int64_t n = l.total();
  const int W = 2, T = 5;
  std::vector<PowerSgd> rep = replicas(W, {.rank = 2}, l);
  EXPECT_EQ(rep[0].p_floats(), 24 * 2 + 8 * 2 + 24);
  EXPECT_EQ(rep[0].q_floats(), 16 * 2 + 30 * 2);
  std::vector<double> sum_out(n, 0.0), sum_mean(n, 0.0);
  for (int step = 0; step < T; ++step) {
    std::vector<std::vector<float>> g(W);
    std::vector<std::vector<float>> e_old(W);
    for (int r = 0; r < W; ++r) {
      g[r] = replica_grad(n, r, step);
      const float* e = rep[r].state_tensors()[0].data;
      e_old[r].assign(e, e + n);
      for (int64_t i = 0; i < n; ++i) sum_mean[i] += double{g[r][i]} / W;
    }
    const std::vector<std::vector<float>> input = g;
    simulated_reduce(rep, g);
    const ParamSpec& b1 = l.at("b1");
    for (int r = 0; r < W; ++r) {
      const float* e = rep[r].state_tensors()[0].data;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(g[r][i], g[0][i]) << "replicas disagree at " << i;
        if (i >= b1.offset && i < b1.offset + b1.numel) {
          // Uncompressed: the exact mean, no error.
          ASSERT_NEAR(g[r][i], (input[0][i] + input[1][i]) / 2, 1e-6) << i;
          ASSERT_EQ(e[i], 0.0f);
        } else {
          // sent (the common approximation) + new error = input + old error
          ASSERT_NEAR(g[r][i] + e[i], input[r][i] + e_old[r][i], 1e-5) << i;
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) sum_out[i] += g[0][i];
  }
  // sum_t out_t = sum_t mean g_t - mean e_T, and the error is not trivially zero.
  double residual = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    double mean_e = 0.0;
    for (int r = 0; r < W; ++r) mean_e += double{rep[r].state_tensors()[0].data[i]} / W;
    EXPECT_NEAR(sum_out[i], sum_mean[i] - mean_e, 1e-4) << i;
    residual = std::max(residual, std::fabs(mean_e));
  }
  EXPECT_GT(residual, 0.1);
  // b1 (1-D) is exact: no error.
  const ParamSpec& b1 = l.at("b1");
  for (int64_t i = b1.offset; i < b1.offset + b1.numel; ++i) {
    EXPECT_EQ(rep[0].state_tensors()[0].data[i], 0.0f);
  }
}

TEST(PowerSgd, RankOneGradientIsExactAtRankOne) {
  ParamLayout l;
  l.add({.name = "w", .shape = {20, 12}});
  const int W = 3;
  std::vector<PowerSgd> rep = replicas(W, {.rank = 1, .seed = 5}, l);
  const std::vector<float> u = testutil::normal_vector(20, 1, "u"),
                           v = testutil::normal_vector(12, 1, "v");
  std::vector<std::vector<float>> g(W, std::vector<float>(240));
  for (int r = 0; r < W; ++r)
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < 12; ++j) g[r][i * 12 + j] = (1.0f + r) * u[i] * v[j];
  simulated_reduce(rep, g);
  for (int i = 0; i < 20; ++i)
    for (int j = 0; j < 12; ++j) EXPECT_NEAR(g[0][i * 12 + j], 2.0f * u[i] * v[j], 1e-5);
}

TEST(PowerSgd, ZeroGradientDoesNotKillTheWarmStart) {
  ParamLayout l;
  l.add({.name = "w", .shape = {10, 10}});
  std::vector<PowerSgd> rep = replicas(1, {.rank = 2}, l);
  std::vector<std::vector<float>> g(1, std::vector<float>(100, 0.0f));
  simulated_reduce(rep, g);  // P = 0: every Q column dies
  for (float x : rep[0].q_state()) ASSERT_EQ(x, 0.0f);
  std::vector<float> u = testutil::normal_vector(10, 2, "u"),
                     v = testutil::normal_vector(10, 2, "v");
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) g[0][i * 10 + j] = u[i] * v[j];
  const std::vector<float> want = g[0];
  simulated_reduce(rep, g);
  EXPECT_LE(testutil::max_abs_diff(g[0].data(), want.data(), 100), 1e-5);
}

TEST(PowerSgd, RejectsBadConfigAndRanges) {
  const ParamLayout l = layout();
  EXPECT_THROW(PowerSgd({.rank = 0}, l, 0, l.total()), ConfigError);
  EXPECT_THROW(PowerSgd({}, l, 1, l.total()), ConfigError);
  // Default: matrices where (n + m) r >= n m go uncompressed.
  PowerSgd big_rank({.rank = 8}, l, 0, l.total());
  EXPECT_EQ(big_rank.compressed_matrices(), 1);  // w1: 40*8 < 384; w2: 38*8 >= 240
  EXPECT_EQ(big_rank.p_floats(), 24 * 8 + 24 + 240);
}

}  // namespace
}  // namespace brigade
