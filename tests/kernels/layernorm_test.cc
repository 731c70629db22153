// layernorm_forward / layernorm_backward against a naive double LayerNorm and finite
// differences of it; checks the saved mean/rstd and the accumulate contract. Each runs on both
// backends (oneDNN's layer_normalization under "onednn", the hand-written kernel otherwise).
#include "brigade/kernels/cpu/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <sstream>
#include <vector>

#include "brigade/kernels/cpu/gemm_onednn.h"
#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade::layernorm_test {
namespace {

using test::all_close;
using test::random_vector;

struct Ref {
  std::vector<double> out, mean, rstd;
};

Ref naive_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, int64_t N, int64_t C) {
  Ref r{std::vector<double>(N * C), std::vector<double>(N), std::vector<double>(N)};
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double s = 1.0 / std::sqrt(v + 1e-5);
    for (int64_t c = 0; c < C; ++c) r.out[n * C + c] = (x[n * C + c] - m) * s * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

struct Shape {
  int64_t N, C;
};

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << "N" << s.N << "_C" << s.C;
}

class LayerNormTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Shape>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const Shape shape_ = std::get<1>(GetParam());
};

TEST_P(LayerNormTest, ForwardMatchesNaive) {
  const auto [N, C] = shape_;
  // An offset mean checks that the variance does not suffer from cancellation.
  auto x = random_vector(N * C, 1, 3.0f, 5.0f), w = random_vector(C, 2), b = random_vector(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto ref = naive_layernorm(test::to_double(x), test::to_double(w), test::to_double(b), N, C);
  EXPECT_TRUE(all_close(out, ref.out, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(mean, ref.mean, 1e-6, 0));
  EXPECT_TRUE(all_close(rstd, ref.rstd, 1e-4, 0));
}

TEST_P(LayerNormTest, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const auto [N, C] = shape_;
  auto x = random_vector(N * C, 4, -2.0f, 2.0f), w = random_vector(C, 5, 0.5f, 1.5f);
  auto b = random_vector(C, 6), wout = random_vector(N * C, 7);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  std::vector<float> dx(x.size()), dw(C), db(C);
  layernorm_backward(dx.data(), dw.data(), db.data(), wout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);

  auto xx = test::to_double(x), xw = test::to_double(w), xb = test::to_double(b);
  auto loss = [&](const auto& xi, const auto& wi, const auto& bi) {
    return test::weighted_sum(naive_layernorm(xi, wi, bi, N, C).out, wout);
  };
  constexpr double kTol = 1e-4;
  EXPECT_TRUE(test::check_grad_fd(
      dx, xx, test::sample_indices(xx.size(), 300, 1),
      [&](const auto& v) { return loss(v, xw, xb); }, kTol));
  EXPECT_TRUE(test::check_grad_fd(
      dw, xw, test::sample_indices(C, 300, 2), [&](const auto& v) { return loss(xx, v, xb); },
      kTol));
  EXPECT_TRUE(test::check_grad_fd(
      db, xb, test::sample_indices(C, 300, 3), [&](const auto& v) { return loss(xx, xw, v); },
      kTol));

  auto px = random_vector(x.size(), 8), pw = random_vector(C, 9), pb = random_vector(C, 10);
  auto ax = px, aw = pw, ab = pb;
  layernorm_backward(ax.data(), aw.data(), ab.data(), wout.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  EXPECT_TRUE(test::accumulated(ax, px, dx, 1e-5));
  EXPECT_TRUE(test::accumulated(aw, pw, dw, 1e-5));
  EXPECT_TRUE(test::accumulated(ab, pb, db, 1e-5));
  std::vector<float> tx(x.size()), tw(C), tb(C);
  for (int rep = 0; rep < 2; ++rep) {
    layernorm_backward(tx.data(), tw.data(), tb.data(), wout.data(), x.data(), w.data(),
                       mean.data(), rstd.data(), N, C);
  }
  EXPECT_TRUE(test::accumulated(tx, dx, dx, 1e-5));
  EXPECT_TRUE(test::accumulated(tw, dw, dw, 1e-5));
  EXPECT_TRUE(test::accumulated(tb, db, db, 1e-5));
}

// C below, at and above the 8-wide unrolling of the row reductions; N = 16 is one of oneDNN's
// row blocks exactly, N = 300 takes a 256-row block, two 16-row blocks and a padded tail.
INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest,
                         ::testing::Combine(test::kGemmBackends,
                                            ::testing::Values(Shape{1, 3}, Shape{3, 5}, Shape{4, 8},
                                                              Shape{6, 19}, Shape{8, 64},
                                                              Shape{5, 203}, Shape{16, 32},
                                                              Shape{300, 48})),
                         test::BackendShapeName{});

// oneDNN's LayerNorm is two row blocks per width (pointwise_onednn.cc): any N after the first
// call at a width creates nothing.
TEST(LayerNormOneDnn, PrimitivesAreMadeOncePerWidth) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  constexpr int64_t C = 24, kMaxN = 600;
  auto x = random_vector(kMaxN * C, 11), w = random_vector(C, 12), b = random_vector(C, 13);
  std::vector<float> out(x.size()), mean(kMaxN), rstd(kMaxN), dx(x.size()), dw(C), db(C);
  const auto both = [&](int64_t n) {
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, C);
    layernorm_backward(dx.data(), dw.data(), db.data(), out.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), n, C);
  };
  both(3);
  const int64_t created = detail::onednn_gemm_stats().primitives_created;
  for (int64_t n : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{256}, kMaxN}) both(n);
  EXPECT_EQ(detail::onednn_gemm_stats().primitives_created, created);
}

}  // namespace
}  // namespace brigade::layernorm_test
