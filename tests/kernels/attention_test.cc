// Blocked causal attention against a naive reference that materialises the full T x T score
// matrix in double: forward (out and lse), backward by finite differences and by the naive
// analytic formulas, and the accumulate contract. T is chosen around the block size
// (kAttentionBlock = 128) so that partial blocks and several blocks per row are exercised. Every
// test runs on each GEMM backend (the tile products are gemm() calls).
#include "brigade/kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <sstream>
#include <vector>

#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade {
namespace {

using test::all_close;
using test::random_vector;

struct Shape {
  int64_t B, T, C, NH;
};

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << "B" << s.B << "_T" << s.T << "_C" << s.C << "_NH" << s.NH;
}

struct Ref {
  std::vector<double> out, lse;
};

// Softmax probabilities of row t of head (b,h): p[j] for j <= t, materialised in full.
std::vector<double> naive_probs(const std::vector<double>& qkv, const Shape& s, int64_t b,
                                int64_t h, int64_t t, double* lse) {
  const int64_t hs = s.C / s.NH, C3 = 3 * s.C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> p(t + 1);
  double mx = -INFINITY;
  for (int64_t j = 0; j <= t; ++j) {
    double d = 0;
    for (int64_t i = 0; i < hs; ++i) {
      d += qkv[(b * s.T + t) * C3 + h * hs + i] * qkv[(b * s.T + j) * C3 + s.C + h * hs + i];
    }
    p[j] = scale * d;
    mx = std::max(mx, p[j]);
  }
  double z = 0;
  for (auto& v : p) z += std::exp(v - mx);
  if (lse) *lse = mx + std::log(z);
  for (auto& v : p) v = std::exp(v - mx) / z;
  return p;
}

// Batches [b_begin, b_end) only (the others stay zero): finite differences of an element in
// batch b need only that batch.
Ref naive_attention(const std::vector<double>& qkv, const Shape& s, int64_t b_begin = 0,
                    int64_t b_end = -1) {
  const int64_t hs = s.C / s.NH, C3 = 3 * s.C;
  Ref r{std::vector<double>(s.B * s.T * s.C), std::vector<double>(s.B * s.NH * s.T)};
  if (b_end < 0) b_end = s.B;
  for (int64_t b = b_begin; b < b_end; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto p = naive_probs(qkv, s, b, h, t, &r.lse[(b * s.NH + h) * s.T + t]);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < hs; ++i)
            r.out[(b * s.T + t) * s.C + h * hs + i] +=
                p[j] * qkv[(b * s.T + j) * C3 + 2 * s.C + h * hs + i];
      }
  return r;
}

// Gradient of sum(out * dout) w.r.t. qkv with the full probability matrix:
// dv_j += p_j dout_t, dp_j = dout_t . v_j, ds_j = p_j (dp_j - sum_k p_k dp_k),
// dq_t += scale sum_j ds_j k_j, dk_j += scale ds_j q_t.
std::vector<double> naive_attention_backward(const std::vector<double>& qkv,
                                             const std::vector<float>& dout, const Shape& s) {
  const int64_t hs = s.C / s.NH, C3 = 3 * s.C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> g(qkv.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        auto p = naive_probs(qkv, s, b, h, t, nullptr);
        const float* d = &dout[(b * s.T + t) * s.C + h * hs];
        std::vector<double> dp(t + 1);
        double pdp = 0;
        for (int64_t j = 0; j <= t; ++j) {
          for (int64_t i = 0; i < hs; ++i)
            dp[j] += d[i] * qkv[(b * s.T + j) * C3 + 2 * s.C + h * hs + i];
          pdp += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= t; ++j) {
          const double ds = p[j] * (dp[j] - pdp);
          for (int64_t i = 0; i < hs; ++i) {
            g[(b * s.T + t) * C3 + h * hs + i] +=
                scale * ds * qkv[(b * s.T + j) * C3 + s.C + h * hs + i];
            g[(b * s.T + j) * C3 + s.C + h * hs + i] +=
                scale * ds * qkv[(b * s.T + t) * C3 + h * hs + i];
            g[(b * s.T + j) * C3 + 2 * s.C + h * hs + i] += p[j] * d[i];
          }
        }
      }
  return g;
}

class AttentionTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Shape>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const Shape s = std::get<1>(GetParam());
};

TEST_P(AttentionTest, ForwardMatchesNaive) {
  auto qkv = random_vector(s.B * s.T * 3 * s.C, 1, -1.5f, 1.5f);
  std::vector<float> out(s.B * s.T * s.C, 9.0f), lse(s.B * s.NH * s.T);
  attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  auto ref = naive_attention(test::to_double(qkv), s);
  EXPECT_TRUE(all_close(out, ref.out, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(lse, ref.lse, 1e-5, 1e-5));
}

TEST_P(AttentionTest, ForwardStableForLargeScores) {
  // Scores of several hundred: exp() of them overflows unless the running max is subtracted,
  // and the max moves between blocks.
  auto qkv = random_vector(s.B * s.T * 3 * s.C, 2, -12.0f, 12.0f);
  std::vector<float> out(s.B * s.T * s.C), lse(s.B * s.NH * s.T);
  attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  auto ref = naive_attention(test::to_double(qkv), s);
  // Nearly one-hot softmaxes amplify the float rounding of the scores; still tight vs 12.
  EXPECT_TRUE(all_close(out, ref.out, 1e-3, 1e-3));
  EXPECT_TRUE(all_close(lse, ref.lse, 1e-5, 1e-3));
}

TEST_P(AttentionTest, BackwardMatchesReferenceAndFiniteDifferences) {
  auto qkv = random_vector(s.B * s.T * 3 * s.C, 3, -1.5f, 1.5f);
  auto w = random_vector(s.B * s.T * s.C, 4);
  std::vector<float> out(s.B * s.T * s.C), lse(s.B * s.NH * s.T), dqkv(qkv.size());
  attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  attention_backward(dqkv.data(), w.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C,
                     s.NH);
  auto x = test::to_double(qkv);
  // Every element against the naive formulas ...
  auto expected = naive_attention_backward(x, w, s);
  EXPECT_TRUE(all_close(dqkv, expected, 1e-4, 1e-4 * test::max_abs(expected)));
  // ... and a random sample by finite differences of the naive forward (which is
  // independent of the backward formulas). The perturbed element's batch is the only one
  // whose outputs move, so the objective is evaluated on that batch alone.
  const auto indices = test::sample_indices(x.size(), 48, 5);
  const int64_t per_batch = s.T * 3 * s.C;
  for (int64_t b = 0; b < s.B; ++b) {
    std::vector<int64_t> in_batch;
    for (int64_t i : indices) {
      if (i / per_batch == b) in_batch.push_back(i);
    }
    if (in_batch.empty()) continue;
    EXPECT_TRUE(test::check_grad_fd(
        dqkv, x, in_batch,
        [&](const auto& v) { return test::weighted_sum(naive_attention(v, s, b, b + 1).out, w); },
        1e-4));
  }
}

TEST_P(AttentionTest, BackwardAccumulates) {
  auto qkv = random_vector(s.B * s.T * 3 * s.C, 6, -1.5f, 1.5f);
  auto dout = random_vector(s.B * s.T * s.C, 7);
  std::vector<float> out(s.B * s.T * s.C), lse(s.B * s.NH * s.T), g(qkv.size());
  attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  attention_backward(g.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C,
                     s.NH);
  auto pre = random_vector(qkv.size(), 8);
  auto acc = pre;
  attention_backward(acc.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C,
                     s.NH);
  EXPECT_TRUE(test::accumulated(acc, pre, g, 1e-5));
  std::vector<float> twice(qkv.size());
  for (int rep = 0; rep < 2; ++rep) {
    attention_backward(twice.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.B, s.T, s.C,
                       s.NH);
  }
  EXPECT_TRUE(test::accumulated(twice, g, g, 1e-5));
}

// T: one key, exactly one block, one past a block, two full blocks + 2 (T=130), and 70
// (a full and a partial block). hs: 12 and 5 (not multiples of the 8-wide unrolling), 8, 16.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Combine(test::kGemmBackends,
                       ::testing::Values(Shape{2, 1, 8, 2}, Shape{2, 70, 36, 3},
                                         Shape{2, 130, 32, 4}, Shape{1, 64, 16, 1},
                                         Shape{1, 65, 10, 2}, Shape{2, 129, 24, 1},
                                         Shape{1, 128, 16, 1}, Shape{1, 259, 16, 2})),
    test::BackendShapeName{});

}  // namespace
}  // namespace brigade
