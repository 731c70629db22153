// The CNN's kernels: conv2d forward against a naive 7-loop double reference, its backward against
// the naive adjoint and by finite differences (every shape on each GEMM backend), the accumulate
// contract and nullptr skipping; max-pooling forward, argmax and backward against a naive
// reference and finite differences; ReLU forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>
#include <vector>

#include "brigade/kernels/cpu/conv2d.h"
#include "brigade/kernels/cpu/maxpool.h"
#include "brigade/kernels/cpu/relu.h"
#include "gemm_backends.h"
#include "grad_check.h"

namespace brigade {

std::ostream& operator<<(std::ostream& os, const Conv2dShape& s) {
  return os << "N" << s.N << "_C" << s.C << "_H" << s.H << "_W" << s.W << "_OC" << s.OC << "_K"
            << s.KH << "x" << s.KW << "_s" << s.stride << "_p" << s.pad;
}

namespace {

using test::all_close;
using test::random_vector;

// ---- conv2d ----

// out (N,OC,OH,OW) = sum over (c, kh, kw) of inp (N,C,H,W) x weight (OC,C,KH,KW) + bias, in
// double, written from the definition: the 7 loops, padding as out-of-range reads.
std::vector<double> naive_conv(const std::vector<double>& inp, const std::vector<double>& w,
                               const std::vector<double>* bias, const Conv2dShape& s) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  std::vector<double> out(static_cast<size_t>(s.out_numel()));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oc = 0; oc < s.OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? (*bias)[oc] : 0.0;
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                acc += inp[((n * s.C + c) * s.H + ih) * s.W + iw] *
                       w[((oc * s.C + c) * s.KH + kh) * s.KW + kw];
              }
          out[((n * s.OC + oc) * OH + oh) * OW + ow] = acc;
        }
  return out;
}

struct ConvGrads {
  std::vector<double> dinp, dweight, dbias;
};

// The adjoint of naive_conv for dout, loop by loop: every product inp x weight sends dout back
// to both factors.
ConvGrads naive_conv_backward(const std::vector<float>& inp, const std::vector<float>& w,
                              const std::vector<float>& dout, const Conv2dShape& s) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  ConvGrads g{std::vector<double>(inp.size()), std::vector<double>(w.size()),
              std::vector<double>(static_cast<size_t>(s.OC))};
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oc = 0; oc < s.OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double d = dout[((n * s.OC + oc) * OH + oh) * OW + ow];
          g.dbias[oc] += d;
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t kh = 0; kh < s.KH; ++kh)
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                const int64_t i = ((n * s.C + c) * s.H + ih) * s.W + iw;
                const int64_t k = ((oc * s.C + c) * s.KH + kh) * s.KW + kw;
                g.dinp[i] += d * w[k];
                g.dweight[k] += d * inp[i];
              }
        }
  return g;
}

// The buffers of one conv2d call of shape s.
struct ConvCall {
  explicit ConvCall(const Conv2dShape& s)
      : col(s.col_numel()), tmp(s.out_numel()), dcol(s.col_numel()), out(s.out_numel(), 123.0f) {}
  std::vector<float> col, tmp, dcol, out;
};

class ConvTest : public ::testing::TestWithParam<std::tuple<GemmBackend, Conv2dShape>> {
 protected:
  test::ScopedGemmBackend backend_{std::get<0>(GetParam())};
  const Conv2dShape s = std::get<1>(GetParam());
  std::vector<float> inp = random_vector(s.inp_numel(), 1);
  std::vector<float> w = random_vector(s.weight_numel(), 2);
  std::vector<float> bias = random_vector(s.OC, 3);
  std::vector<float> dout = random_vector(s.out_numel(), 4);
  // Float rounding of sums of patch() or N*OH*OW products of values in [-1, 1].
  double patch_tol() const { return 1e-5 * static_cast<double>(s.patch()); }
  double batch_tol() const { return 1e-5 * static_cast<double>(s.N * s.out_h() * s.out_w()); }

  // Backward from zeroed gradients, with forward first (it fills col).
  void backward(std::vector<float>& dinp, std::vector<float>& dw, std::vector<float>& db) {
    ConvCall call(s);
    conv2d_forward(call.out.data(), call.col.data(), call.tmp.data(), inp.data(), w.data(),
                   bias.data(), s);
    conv2d_backward(dinp.data(), dw.data(), db.data(), dout.data(), call.col.data(), w.data(),
                    call.tmp.data(), call.dcol.data(), s);
  }
};

TEST_P(ConvTest, ForwardMatchesNaive) {
  ConvCall call(s);  // out starts at 123: forward must overwrite it
  const auto di = test::to_double(inp), dw = test::to_double(w), db = test::to_double(bias);
  conv2d_forward(call.out.data(), call.col.data(), call.tmp.data(), inp.data(), w.data(),
                 bias.data(), s);
  EXPECT_TRUE(all_close(call.out, naive_conv(di, dw, &db, s), 1e-5, patch_tol()));
  conv2d_forward(call.out.data(), call.col.data(), call.tmp.data(), inp.data(), w.data(), nullptr,
                 s);
  EXPECT_TRUE(all_close(call.out, naive_conv(di, dw, nullptr, s), 1e-5, patch_tol()));
}

TEST_P(ConvTest, BackwardMatchesNaiveAdjoint) {
  std::vector<float> dinp(inp.size()), dw(w.size()), db(bias.size());
  backward(dinp, dw, db);
  const ConvGrads want = naive_conv_backward(inp, w, dout, s);
  EXPECT_TRUE(all_close(dinp, want.dinp, 1e-4, 1e-5 * static_cast<double>(s.OC * s.KH * s.KW)));
  EXPECT_TRUE(all_close(dw, want.dweight, 1e-4, batch_tol()));
  EXPECT_TRUE(all_close(db, want.dbias, 1e-4, batch_tol()));
}

TEST_P(ConvTest, BackwardMatchesFiniteDifferences) {
  std::vector<float> dinp(inp.size()), dw(w.size()), db(bias.size());
  backward(dinp, dw, db);
  auto xi = test::to_double(inp), xw = test::to_double(w), xb = test::to_double(bias);
  auto loss = [&](const std::vector<double>& i, const std::vector<double>& ww,
                  const std::vector<double>& b) {
    return test::weighted_sum(naive_conv(i, ww, &b, s), dout);
  };
  // The objective is linear in each argument, so central differences are exact up to rounding.
  constexpr double kTol = 1e-5;
  constexpr int64_t kSamples = 40;
  EXPECT_TRUE(test::check_grad_fd(
      dinp, xi, test::sample_indices(xi.size(), kSamples, 1),
      [&](const auto& x) { return loss(x, xw, xb); }, kTol));
  EXPECT_TRUE(test::check_grad_fd(
      dw, xw, test::sample_indices(xw.size(), kSamples, 2),
      [&](const auto& x) { return loss(xi, x, xb); }, kTol));
  EXPECT_TRUE(test::check_grad_fd(
      db, xb, test::sample_indices(xb.size(), kSamples, 3),
      [&](const auto& x) { return loss(xi, xw, x); }, kTol));
}

TEST_P(ConvTest, BackwardAccumulatesAndSkipsNullGradients) {
  std::vector<float> di0(inp.size()), dw0(w.size()), db0(bias.size());
  backward(di0, dw0, db0);

  // Prefilled buffers end up holding prefill + gradient.
  const auto pi = random_vector(inp.size(), 5), pw = random_vector(w.size(), 6);
  const auto pb = random_vector(bias.size(), 7);
  auto di = pi, dw = pw, db = pb;
  backward(di, dw, db);
  EXPECT_TRUE(test::accumulated(di, pi, di0, 1e-5));
  EXPECT_TRUE(test::accumulated(dw, pw, dw0, 1e-5));
  EXPECT_TRUE(test::accumulated(db, pb, db0, 1e-5));

  // One gradient at a time, the others (and dcol without dinp) null: the same values.
  ConvCall call(s);
  conv2d_forward(call.out.data(), call.col.data(), call.tmp.data(), inp.data(), w.data(),
                 bias.data(), s);
  std::vector<float> di1(inp.size()), dw1(w.size()), db1(bias.size());
  conv2d_backward(di1.data(), nullptr, nullptr, dout.data(), nullptr, w.data(), call.tmp.data(),
                  call.dcol.data(), s);
  conv2d_backward(nullptr, dw1.data(), nullptr, dout.data(), call.col.data(), nullptr,
                  call.tmp.data(), nullptr, s);
  conv2d_backward(nullptr, nullptr, db1.data(), dout.data(), nullptr, nullptr, call.tmp.data(),
                  nullptr, s);
  EXPECT_EQ(di1, di0);
  EXPECT_EQ(dw1, dw0);
  EXPECT_EQ(db1, db0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Combine(
        test::kGemmBackends,
        ::testing::Values(
            // The smallest case, one output pixel per window position.
            Conv2dShape{.N = 1, .C = 1, .H = 5, .W = 5, .OC = 1, .KH = 3, .KW = 3},
            // Batch and channels > 1, non-square image and kernel.
            Conv2dShape{.N = 3, .C = 2, .H = 7, .W = 6, .OC = 4, .KH = 3, .KW = 2},
            // Stride and padding, with windows that hang over the edge.
            Conv2dShape{
                .N = 2, .C = 3, .H = 8, .W = 9, .OC = 5, .KH = 3, .KW = 3, .stride = 2, .pad = 1},
            Conv2dShape{
                .N = 2, .C = 2, .H = 5, .W = 4, .OC = 3, .KH = 5, .KW = 4, .stride = 3, .pad = 2},
            // The NIID-Bench CNN's two convolutions.
            Conv2dShape{.N = 2, .C = 1, .H = 28, .W = 28, .OC = 6, .KH = 5, .KW = 5},
            Conv2dShape{.N = 3, .C = 6, .H = 12, .W = 12, .OC = 16, .KH = 5, .KW = 5})),
    test::BackendShapeName{});

// ---- max-pooling ----

struct PoolCase {
  Pool2dShape s;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& p) {
  return os << "N" << p.s.N << "_C" << p.s.C << "_H" << p.s.H << "_W" << p.s.W << "_win"
            << p.s.window << "_s" << p.s.stride;
}

// Max and its first position per window, by scanning each window from the definition.
template <typename T>
void naive_pool(const std::vector<T>& inp, const Pool2dShape& s, std::vector<double>* out,
                std::vector<int32_t>* at) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  out->assign(static_cast<size_t>(s.out_numel()), 0.0);
  at->assign(static_cast<size_t>(s.out_numel()), -1);
  for (int64_t plane = 0; plane < s.N * s.C; ++plane)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t o = plane * OH * OW + oh * OW + ow;
        for (int64_t i = 0; i < s.window; ++i)
          for (int64_t j = 0; j < s.window; ++j) {
            const int64_t k = (oh * s.stride + i) * s.W + ow * s.stride + j;
            const double v = inp[plane * s.H * s.W + k];
            if ((*at)[o] < 0 || v > (*out)[o]) {
              (*out)[o] = v;
              (*at)[o] = static_cast<int32_t>(k);
            }
          }
      }
}

class PoolTest : public ::testing::TestWithParam<PoolCase> {
 protected:
  const Pool2dShape s = GetParam().s;
  std::vector<float> inp = random_vector(s.inp_numel(), 11);
};

TEST_P(PoolTest, ForwardAndArgmaxMatchNaive) {
  std::vector<float> out(s.out_numel(), 123.0f);
  std::vector<int32_t> at(s.out_numel(), -7);
  maxpool2d_forward(out.data(), at.data(), inp.data(), s);
  std::vector<double> want;
  std::vector<int32_t> want_at;
  naive_pool(inp, s, &want, &want_at);
  EXPECT_TRUE(all_close(out, want, 0.0, 0.0));
  EXPECT_EQ(at, want_at);
}

TEST_P(PoolTest, BackwardMatchesFiniteDifferencesAndAccumulates) {
  std::vector<float> out(s.out_numel());
  std::vector<int32_t> at(s.out_numel());
  maxpool2d_forward(out.data(), at.data(), inp.data(), s);
  const auto dout = random_vector(s.out_numel(), 12);
  std::vector<float> dinp(inp.size());
  maxpool2d_backward(dinp.data(), dout.data(), at.data(), s);

  // Random inputs have no ties, so the max is differentiable there; eps stays far below the
  // gap between the two largest values of a window (a window where it did not would show as an
  // O(1) error). The reference runs in double, so the differences are exact up to rounding.
  auto x = test::to_double(inp);
  auto loss = [&](const std::vector<double>& xd) {
    std::vector<double> o;
    std::vector<int32_t> a;
    naive_pool(xd, s, &o, &a);
    return test::weighted_sum(o, dout);
  };
  EXPECT_TRUE(
      test::check_grad_fd(dinp, x, test::sample_indices(x.size(), 200, 4), loss, 1e-6, 1e-6));

  const auto prefill = random_vector(inp.size(), 13);
  auto acc = prefill;
  maxpool2d_backward(acc.data(), dout.data(), at.data(), s);
  EXPECT_TRUE(test::accumulated(acc, prefill, dinp, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PoolTest,
    ::testing::Values(PoolCase{{.N = 1, .C = 1, .H = 2, .W = 2}},
                      // Odd sides: the last row and column are dropped (floor mode).
                      PoolCase{{.N = 2, .C = 3, .H = 7, .W = 6}},
                      // The NIID-Bench CNN's pools.
                      PoolCase{{.N = 2, .C = 6, .H = 24, .W = 24}},
                      PoolCase{{.N = 3, .C = 16, .H = 8, .W = 8}},
                      // Overlapping windows: an input can be the max of several.
                      PoolCase{{.N = 2, .C = 2, .H = 7, .W = 9, .window = 3, .stride = 2}},
                      PoolCase{{.N = 1, .C = 2, .H = 5, .W = 4, .window = 2, .stride = 1}}),
    [](const auto& info) {
      std::ostringstream os;
      os << info.param;
      return os.str();
    });

TEST(MaxPool, TiesPickTheFirstAndNanPropagates) {
  const Pool2dShape s{.N = 1, .C = 1, .H = 2, .W = 4};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Window 0: all equal -> index 0. Window 1: NaN in its last place wins over 5.
  const std::vector<float> inp = {1, 1, 5, 2, 1, 1, 3, nan};
  std::vector<float> out(2);
  std::vector<int32_t> at(2);
  maxpool2d_forward(out.data(), at.data(), inp.data(), s);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(at[0], 0);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(at[1], 7);
}

// ---- ReLU ----

TEST(Relu, ForwardInPlaceAndBackwardThroughTheOutput) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-2.0f, -0.0f, 0.0f, 1e-30f, 3.0f, nan, -1e-30f};
  relu_forward(x.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[3], 1e-30f);
  EXPECT_EQ(x[4], 3.0f);
  EXPECT_TRUE(std::isnan(x[5]));  // a non-finite loss must stay visible
  EXPECT_EQ(x[6], 0.0f);

  // Gradient 1 where the output is positive, else 0; accumulated onto the prefill.
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6, 7};
  std::vector<float> dx(x.size(), 10.0f);
  relu_backward(dx.data(), x.data(), dout.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(dx, (std::vector<float>{10, 10, 10, 14, 15, 10, 10}));
}

}  // namespace
}  // namespace brigade
