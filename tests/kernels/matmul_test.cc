// matmul_forward / matmul_backward against a naive double-precision triple loop and against
// finite differences; checks the accumulate contract and nullptr skipping. Every test runs on
// each GEMM backend (oneDNN, OpenBLAS).
#include "brigade/kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <sstream>
#include <vector>

#include "brigade/kernels/cpu/gemm_backend.h"
#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade::matmul_test {
namespace {

using test::all_close;
using test::random_vector;

struct Shape {
  int64_t N, C, OC;
};

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << "N" << s.N << "_C" << s.C << "_OC" << s.OC;
}

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias, in double.
std::vector<double> naive_matmul(const std::vector<double>& inp, const std::vector<double>& w,
                                 const std::vector<double>* bias, const Shape& s) {
  std::vector<double> out(static_cast<size_t>(s.N * s.OC));
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t o = 0; o < s.OC; ++o) {
      double acc = bias ? (*bias)[o] : 0.0;
      for (int64_t c = 0; c < s.C; ++c) acc += inp[n * s.C + c] * w[o * s.C + c];
      out[n * s.OC + o] = acc;
    }
  }
  return out;
}

class MatmulTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Shape>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const Shape s = std::get<1>(GetParam());
};

TEST_P(MatmulTest, ForwardMatchesNaive) {
  auto inp = random_vector(s.N * s.C, 1), w = random_vector(s.OC * s.C, 2);
  auto bias = random_vector(s.OC, 3);
  std::vector<float> out(s.N * s.OC, 123.0f);  // forward must overwrite, not accumulate
  auto di = test::to_double(inp), dw = test::to_double(w), db = test::to_double(bias);

  matmul_forward(out.data(), inp.data(), w.data(), bias.data(), s.N, s.C, s.OC);
  EXPECT_TRUE(all_close(out, naive_matmul(di, dw, &db, s), 1e-5, 1e-5 * s.C));

  matmul_forward(out.data(), inp.data(), w.data(), nullptr, s.N, s.C, s.OC);
  EXPECT_TRUE(all_close(out, naive_matmul(di, dw, nullptr, s), 1e-5, 1e-5 * s.C));
}

TEST_P(MatmulTest, BackwardMatchesFiniteDifferences) {
  auto inp = random_vector(s.N * s.C, 4), w = random_vector(s.OC * s.C, 5);
  auto bias = random_vector(s.OC, 6), wout = random_vector(s.N * s.OC, 7);
  std::vector<float> dinp(inp.size()), dw(w.size()), db(bias.size());
  matmul_backward(dinp.data(), dw.data(), db.data(), wout.data(), inp.data(), w.data(), s.N, s.C,
                  s.OC);

  auto xi = test::to_double(inp), xw = test::to_double(w), xb = test::to_double(bias);
  auto loss = [&](const std::vector<double>& i, const std::vector<double>& ww,
                  const std::vector<double>& b) {
    return test::weighted_sum(naive_matmul(i, ww, &b, s), wout);
  };
  constexpr double kTol = 1e-5;
  // Each sample costs two naive products; keep the total (and the sanitizer run) small.
  const int64_t samples = std::clamp<int64_t>(20'000'000 / (s.N * s.C * s.OC), 20, 300);
  EXPECT_TRUE(test::check_grad_fd(
      dinp, xi, test::sample_indices(xi.size(), samples, 1),
      [&](const auto& x) { return loss(x, xw, xb); }, kTol));
  EXPECT_TRUE(test::check_grad_fd(
      dw, xw, test::sample_indices(xw.size(), samples, 2),
      [&](const auto& x) { return loss(xi, x, xb); }, kTol));
  EXPECT_TRUE(test::check_grad_fd(
      db, xb, test::sample_indices(xb.size(), samples, 3),
      [&](const auto& x) { return loss(xi, xw, x); }, kTol));
}

TEST_P(MatmulTest, BackwardAccumulates) {
  auto inp = random_vector(s.N * s.C, 8), w = random_vector(s.OC * s.C, 9);
  auto dout = random_vector(s.N * s.OC, 10);
  std::vector<float> di0(inp.size()), dw0(w.size()), db0(s.OC);
  matmul_backward(di0.data(), dw0.data(), db0.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                  s.OC);

  // Prefilled buffers end up holding prefill + gradient.
  auto pi = random_vector(inp.size(), 11), pw = random_vector(w.size(), 12);
  auto pb = random_vector(s.OC, 13);
  auto di = pi, dw = pw, db = pb;
  matmul_backward(di.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                  s.OC);
  EXPECT_TRUE(test::accumulated(di, pi, di0, 1e-5));
  EXPECT_TRUE(test::accumulated(dw, pw, dw0, 1e-5));
  EXPECT_TRUE(test::accumulated(db, pb, db0, 1e-5));

  // Twice from zero doubles the gradient.
  std::vector<float> di2(inp.size()), dw2(w.size()), db2(s.OC);
  for (int rep = 0; rep < 2; ++rep) {
    matmul_backward(di2.data(), dw2.data(), db2.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                    s.OC);
  }
  EXPECT_TRUE(test::accumulated(di2, di0, di0, 1e-6));
  EXPECT_TRUE(test::accumulated(dw2, dw0, dw0, 1e-6));
  EXPECT_TRUE(test::accumulated(db2, db0, db0, 1e-6));
}

TEST_P(MatmulTest, NullGradientsAreSkipped) {
  auto inp = random_vector(s.N * s.C, 14), w = random_vector(s.OC * s.C, 15);
  auto dout = random_vector(s.N * s.OC, 16);
  std::vector<float> di0(inp.size()), dw0(w.size()), db0(s.OC);
  matmul_backward(di0.data(), dw0.data(), db0.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                  s.OC);
  std::vector<float> di(inp.size()), dw(w.size()), db(s.OC);
  matmul_backward(di.data(), nullptr, nullptr, dout.data(), inp.data(), w.data(), s.N, s.C, s.OC);
  matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), s.N, s.C, s.OC);
  matmul_backward(nullptr, nullptr, db.data(), dout.data(), inp.data(), w.data(), s.N, s.C, s.OC);
  EXPECT_EQ(di, di0);
  EXPECT_EQ(dw, dw0);
  EXPECT_EQ(db, db0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTest,
                         ::testing::Combine(test::kGemmBackends,
                                            ::testing::Values(Shape{1, 1, 1}, Shape{5, 7, 3},
                                                              Shape{7, 13, 5}, Shape{33, 64, 17},
                                                              Shape{64, 96, 80})),
                         test::BackendShapeName{});

class MatmulBackend : public ::testing::TestWithParam<GemmBackend> {
 protected:
  test::ScopedGemmBackend backend_{GetParam()};
};

// A larger shape, analytic backward against the naive double formulas on every element.
TEST_P(MatmulBackend, LargeBackwardMatchesNaiveFormulas) {
  const Shape s{128, 192, 160};
  auto inp = random_vector(s.N * s.C, 20), w = random_vector(s.OC * s.C, 21);
  auto dout = random_vector(s.N * s.OC, 22);
  std::vector<float> di(inp.size()), dw(w.size()), db(s.OC);
  matmul_backward(di.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), s.N, s.C,
                  s.OC);
  std::vector<double> ei(di.size()), ew(dw.size()), eb(db.size());
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t o = 0; o < s.OC; ++o) {
      const double d = dout[n * s.OC + o];
      eb[o] += d;
      for (int64_t c = 0; c < s.C; ++c) {
        ei[n * s.C + c] += d * w[o * s.C + c];
        ew[o * s.C + c] += d * inp[n * s.C + c];
      }
    }
  }
  EXPECT_TRUE(all_close(di, ei, 1e-4, 1e-5 * s.OC));
  EXPECT_TRUE(all_close(dw, ew, 1e-4, 1e-5 * s.N));
  EXPECT_TRUE(all_close(db, eb, 1e-4, 1e-5 * s.N));
}

TEST_P(MatmulBackend, ResultIndependentOfThreadCount) {
  const Shape s{64, 96, 80};
  auto inp = random_vector(s.N * s.C, 30), w = random_vector(s.OC * s.C, 31);
  std::vector<float> a(s.N * s.OC), b(s.N * s.OC);
  set_blas_threads(1);
  matmul_forward(a.data(), inp.data(), w.data(), nullptr, s.N, s.C, s.OC);
  set_blas_threads(2);
  matmul_forward(b.data(), inp.data(), w.data(), nullptr, s.N, s.C, s.OC);
  set_blas_threads(1);
  std::vector<double> bd(b.begin(), b.end());
  EXPECT_TRUE(all_close(a, bd, 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Backends, MatmulBackend, test::kGemmBackends,
                         [](const auto& info) { return gemm_backend_name(info.param); });

}  // namespace
}  // namespace brigade::matmul_test
