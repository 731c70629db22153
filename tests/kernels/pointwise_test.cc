// The simple kernels: encoder (embedding lookup), GELU, residual. Each against a naive double
// reference, finite differences, and the accumulate contract. GELU runs on each backend (oneDNN's
// eltwise under "onednn", the hand-written kernel under "openblas").
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "brigade/kernels/cpu/encoder.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/gemm_onednn.h"
#include "brigade/kernels/cpu/residual.h"
#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade {
namespace {

using test::all_close;
using test::random_vector;

// ---- encoder ----

constexpr int64_t kB = 2, kT = 5, kC = 6, kV = 4, kMaxT = 7;
// Token 2 appears several times, so its gradient row sums several contributions; token 3
// never appears, so its row must stay untouched.
const std::vector<int32_t> kTokens = {2, 0, 2, 1, 2, 0, 0, 1, 2, 2};

std::vector<double> naive_encoder(const std::vector<double>& wte, const std::vector<double>& wpe) {
  std::vector<double> out(kB * kT * kC);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t t = 0; t < kT; ++t)
      for (int64_t c = 0; c < kC; ++c)
        out[(b * kT + t) * kC + c] = wte[kTokens[b * kT + t] * kC + c] + wpe[t * kC + c];
  return out;
}

TEST(Encoder, ForwardMatchesNaive) {
  auto wte = random_vector(kV * kC, 1), wpe = random_vector(kMaxT * kC, 2);
  std::vector<float> out(kB * kT * kC);
  encoder_forward(out.data(), kTokens.data(), wte.data(), wpe.data(), kB, kT, kC);
  EXPECT_TRUE(all_close(out, naive_encoder(test::to_double(wte), test::to_double(wpe)), 1e-6, 0));
}

TEST(Encoder, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto wte = random_vector(kV * kC, 3), wpe = random_vector(kMaxT * kC, 4);
  auto w = random_vector(kB * kT * kC, 5);
  std::vector<float> dwte(wte.size()), dwpe(wpe.size());
  encoder_backward(dwte.data(), dwpe.data(), w.data(), kTokens.data(), kB, kT, kC);

  auto xe = test::to_double(wte), xp = test::to_double(wpe);
  EXPECT_TRUE(test::check_grad_fd(
      dwte, xe, test::sample_indices(xe.size(), 1000, 1),
      [&](const auto& x) { return test::weighted_sum(naive_encoder(x, xp), w); }, 1e-6));
  // Rows of wpe beyond T get no gradient; finite differences agree (they are 0 there), but
  // check_grad_fd normalises by the scale, so test the first T rows and the rest exactly.
  EXPECT_TRUE(test::check_grad_fd(
      dwpe, xp, test::sample_indices(kT * kC, 1000, 2),
      [&](const auto& x) { return test::weighted_sum(naive_encoder(xe, x), w); }, 1e-6));
  for (int64_t i = kT * kC; i < kMaxT * kC; ++i) EXPECT_EQ(dwpe[i], 0.0f) << i;
  for (int64_t c = 0; c < kC; ++c) EXPECT_EQ(dwte[3 * kC + c], 0.0f) << c;

  auto pe = random_vector(wte.size(), 6), pp = random_vector(wpe.size(), 7);
  auto ae = pe, ap = pp;
  encoder_backward(ae.data(), ap.data(), w.data(), kTokens.data(), kB, kT, kC);
  EXPECT_TRUE(test::accumulated(ae, pe, dwte, 1e-6));
  EXPECT_TRUE(test::accumulated(ap, pp, dwpe, 1e-6));
  std::vector<float> te(wte.size()), tp(wpe.size());
  for (int rep = 0; rep < 2; ++rep) {
    encoder_backward(te.data(), tp.data(), w.data(), kTokens.data(), kB, kT, kC);
  }
  EXPECT_TRUE(test::accumulated(te, dwte, dwte, 1e-6));
  EXPECT_TRUE(test::accumulated(tp, dwpe, dwpe, 1e-6));
}

// ---- GELU ----

double naive_gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// n random values plus special ones. 200 is below every oneDNN chunk (the padded tail alone);
// 70000 takes one chunk of each size (65536, 4096, 256) and a tail.
std::vector<float> gelu_inputs(int64_t n) {
  auto x = random_vector(n, 10, -4.0f, 4.0f);
  // Zero, the far tails (where a cosh-based derivative overflows) and a few typical values.
  for (float v : {0.0f, 1e-4f, -1e-4f, 8.0f, -8.0f, 30.0f, -30.0f, 100.0f, -100.0f}) x.push_back(v);
  return x;
}

class Gelu : public ::testing::TestWithParam<std::tuple<GemmBackend, int64_t>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const int64_t n_ = std::get<1>(GetParam());
};

TEST_P(Gelu, ForwardMatchesNaive) {
  auto x = gelu_inputs(n_);
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = naive_gelu(x[i]);
  std::vector<float> out(x.size());
  gelu_forward(out.data(), x.data(), x.size());
  EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6));
  // In place (out aliases inp).
  auto y = x;
  gelu_forward(y.data(), y.data(), y.size());
  EXPECT_EQ(y, out);
}

TEST_P(Gelu, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto x = gelu_inputs(n_);
  auto w = random_vector(x.size(), 11);
  std::vector<float> dx(x.size());
  gelu_backward(dx.data(), x.data(), w.data(), x.size());
  for (float g : dx) EXPECT_TRUE(std::isfinite(g));
  // Elementwise: check each derivative against its own finite difference (relative).
  std::vector<double> fd(x.size());
  const double eps = 1e-4;
  for (size_t i = 0; i < x.size(); ++i) {
    fd[i] = w[i] * (naive_gelu(x[i] + eps) - naive_gelu(x[i] - eps)) / (2 * eps);
  }
  // atol: the hand-written kernel's tanh has absolute error d ~ 2e-7 (vec.h), which the derivative
  // 0.5 (1 + th) + 0.5 x (1 - th^2) du carries as at most (0.5 + |x| du) d <= 10.5 d = 2.1e-6 for
  // |x| <= 4 (du = sqrt(2/pi) (1 + 3 0.044715 x^2) <= 2.5), |w| <= 1; beyond |x| = 8 th is +-1
  // and sech^2 ~ 0. 200 inputs happened to stay under 1e-6; 70000 reach 1.07e-6. A wrong
  // formula is off by 1e-2 or more.
  EXPECT_TRUE(all_close(dx, fd, 1e-4, 2.5e-6));

  auto p = random_vector(x.size(), 12);
  auto acc = p;
  gelu_backward(acc.data(), x.data(), w.data(), x.size());
  EXPECT_TRUE(test::accumulated(acc, p, dx, 1e-6));
  std::vector<float> twice(x.size());
  for (int rep = 0; rep < 2; ++rep) gelu_backward(twice.data(), x.data(), w.data(), x.size());
  EXPECT_TRUE(test::accumulated(twice, dx, dx, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Sizes, Gelu,
                         ::testing::Combine(test::kGemmBackends,
                                            ::testing::Values(int64_t{200}, int64_t{70000})),
                         test::BackendShapeName{});

// oneDNN's GELU is a few fixed-size primitives (pointwise_onednn.cc): any N after the first
// call creates none.
TEST(GeluOneDnn, PrimitivesAreMadeOnceForEveryLength) {
  test::ScopedGemmBackend onednn(GemmBackend::kOneDnn);
  auto x = gelu_inputs(70000);
  std::vector<float> out(x.size()), dx(x.size());
  gelu_forward(out.data(), x.data(), 5);
  gelu_backward(dx.data(), x.data(), out.data(), 5);
  const int64_t created = detail::onednn_gemm_stats().primitives_created;
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{4097}, int64_t{70000}}) {
    gelu_forward(out.data(), x.data(), n);
    gelu_backward(dx.data(), x.data(), out.data(), n);
  }
  EXPECT_EQ(detail::onednn_gemm_stats().primitives_created, created);
}

// ---- residual ----

TEST(Residual, ForwardBackward) {
  const int64_t n = 37;
  auto a = random_vector(n, 20), b = random_vector(n, 21), d = random_vector(n, 22);
  std::vector<float> out(n);
  residual_forward(out.data(), a.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], a[i] + b[i]);

  std::vector<float> ga(n), gb(n);
  residual_backward(ga.data(), gb.data(), d.data(), n);
  auto xa = test::to_double(a), xb = test::to_double(b);
  auto loss = [&](const std::vector<double>& u, const std::vector<double>& v) {
    std::vector<double> o(n);
    for (int64_t i = 0; i < n; ++i) o[i] = u[i] + v[i];
    return test::weighted_sum(o, d);
  };
  const auto all = test::sample_indices(n, n, 0);
  EXPECT_TRUE(test::check_grad_fd(
      ga, xa, all, [&](const auto& u) { return loss(u, xb); }, 1e-6));
  EXPECT_TRUE(test::check_grad_fd(
      gb, xb, all, [&](const auto& v) { return loss(xa, v); }, 1e-6));

  // d/da and d/db of sum(out * d) are both d; from prefilled buffers they accumulate.
  auto pa = random_vector(n, 23), pb = random_vector(n, 24);
  auto da = pa, db = pb;
  residual_backward(da.data(), db.data(), d.data(), n);
  EXPECT_TRUE(test::accumulated(da, pa, d, 1e-7));
  EXPECT_TRUE(test::accumulated(db, pb, d, 1e-7));
  std::vector<float> ta(n), tb(n);
  for (int rep = 0; rep < 2; ++rep) residual_backward(ta.data(), tb.data(), d.data(), n);
  EXPECT_TRUE(test::accumulated(ta, d, d, 1e-7));
  EXPECT_TRUE(test::accumulated(tb, d, d, 1e-7));
}

}  // namespace
}  // namespace brigade
