// DiLoCo's outer step in one process (replicas simulated by computing their mean
// pseudo-gradient here): the Nesterov and heavy-ball updates against a double-precision
// recurrence, "outer lr 1, momentum 0 = the mean of the replicas", and the streaming
// fragments and schedule as pure functions.
#include "brigade/sync/lowcomm/diloco.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>

#include "brigade/base/error.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::normal_vector;

// Replica r's theta_local after its inner steps of round t: theta_global moved by a
// replica-specific amount.
std::vector<float> local_theta(const float* global, int64_t n, int r, int t) {
  std::vector<float> d =
      normal_vector(n, 3, "inner/" + std::to_string(r) + "/" + std::to_string(t), 0.01f);
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = global[i] - d[i];
  return out;
}

void check_outer_recurrence(bool nesterov) {
  const int64_t n = 500, W = 3;
  DilocoConfig c{.outer_lr = 0.7f, .momentum = 0.9f, .nesterov = nesterov};
  std::vector<float> params = normal_vector(n, 1, "theta");
  DilocoOuter outer(c, params.data(), 0, n);
  std::vector<double> g(params.begin(), params.end()), v(n, 0.0);
  for (int t = 0; t < 4; ++t) {
    std::vector<float> mean(n, 0.0f), delta(n);
    std::vector<double> mean_d(n, 0.0);
    for (int r = 0; r < W; ++r) {
      const std::vector<float> local = local_theta(outer.global(), n, r, t);
      outer.pseudo_gradient(local.data(), delta.data());
      for (int64_t i = 0; i < n; ++i) {
        mean[i] += delta[i] / W;
        mean_d[i] += (double{outer.global()[i]} - local[i]) / W;
      }
    }
    outer.apply_mean(mean.data(), params.data());
    for (int64_t i = 0; i < n; ++i) {
      v[i] = 0.9 * v[i] + mean_d[i];
      g[i] -= nesterov ? 0.7 * (mean_d[i] + 0.9 * v[i]) : 0.7 * v[i];
    }
    double err = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      err = std::max(err, std::fabs(params[i] - g[i]));
      ASSERT_EQ(params[i], outer.global()[i]) << "theta_local is not theta_global";
    }
    EXPECT_LE(err, 1e-5) << "round " << t;
  }
  const auto views = outer.state_tensors();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "diloco.global");
  EXPECT_EQ(views[1].name, "diloco.momentum");
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(views[1].data[i], v[i], 1e-6);
}

TEST(DilocoOuter, NesterovMatchesDoubleRecurrence) {
  check_outer_recurrence(true);
}
TEST(DilocoOuter, HeavyBallMatchesDoubleRecurrence) {
  check_outer_recurrence(false);
}

// Outer lr 1, momentum 0: theta_global - mean(theta_global - theta_i) = mean(theta_i).
TEST(DilocoOuter, UnitLrNoMomentumAveragesTheReplicas) {
  const int64_t n = 1000, W = 4;
  std::vector<float> params = normal_vector(n, 2, "theta");
  // A sub-range: elements outside it are not touched.
  DilocoOuter outer({.outer_lr = 1.0f, .momentum = 0.0f}, params.data(), 100, 900);
  EXPECT_EQ(outer.state_tensors().size(), 1u);
  std::vector<float> mean(n, 0.0f), delta(800);
  std::vector<double> avg(n, 0.0);
  for (int r = 0; r < W; ++r) {
    std::vector<float> local = params;
    const std::vector<float> d = normal_vector(n, 4, "step/" + std::to_string(r), 0.05f);
    for (int64_t i = 0; i < n; ++i) local[i] -= d[i];
    outer.pseudo_gradient(local.data(), delta.data());
    for (int64_t i = 0; i < 800; ++i) mean[i] += delta[i] / W;
    for (int64_t i = 0; i < n; ++i) avg[i] += double{local[i]} / W;
  }
  std::vector<float> out = params;
  out[0] = 123.0f;
  outer.apply_mean(mean.data(), out.data());
  EXPECT_EQ(out[0], 123.0f);
  EXPECT_EQ(out[950], params[950]);
  for (int64_t i = 100; i < 900; ++i) {
    EXPECT_NEAR(out[i], avg[i], 4 * FLT_EPSILON * (std::fabs(avg[i]) + 0.05)) << i;
  }
}

TEST(DilocoOuter, ConfigValidation) {
  float p = 0.0f;
  EXPECT_THROW(DilocoOuter({.outer_lr = 0.0f}, &p, 0, 1), ConfigError);
  EXPECT_THROW(DilocoOuter({.momentum = 1.0f}, &p, 0, 1), ConfigError);
  EXPECT_THROW(DilocoOuter({.int8_chunk = 0}, &p, 0, 1), ConfigError);
  DilocoOuter f32({}, &p, 0, 1);
  EXPECT_EQ(f32.payload_bytes(), 4);
  DilocoOuter q8({.wire = OuterWire::kInt8, .int8_chunk = 1}, &p, 0, 1);
  EXPECT_EQ(q8.payload_bytes(), 24 + 1024 + 1);
  EXPECT_THROW(DilocoOuter({.wire = OuterWire::kDctTopk, .dct = {.k = 0}}, &p, 0, 1), ConfigError);
  EXPECT_THROW(DilocoOuter({.wire = OuterWire::kDctTopk, .dct = {.max_chunk = 65}}, &p, 0, 1),
               ConfigError);
}

TEST(Fragments, EvenSplitTilesTheRange) {
  for (int64_t n : {0, 1, 7, 100, 1001}) {
    for (int P : {1, 2, 3, 7}) {
      int64_t at = 50;
      for (int f = 0; f < P; ++f) {
        const FlatRange r = fragment_range(50, 50 + n, P, f);
        EXPECT_EQ(r.begin, at) << n << " " << P << " " << f;
        EXPECT_TRUE(r.size() == n / P || r.size() == n / P + 1);
        EXPECT_EQ(r.size(), n / P + (f < n % P ? 1 : 0));
        at = r.end;
      }
      EXPECT_EQ(at, 50 + n);
    }
  }
}

TEST(Fragments, AlignedCutsLieOnTensorBoundaries) {
  ParamLayout l;
  for (int i = 0; i < 12; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    l.add({.name = name, .shape = {10 + 7 * i}});
  }
  std::set<int64_t> boundaries = {l.total()};
  for (const auto& s : l.specs()) boundaries.insert(s.offset);
  for (int P : {1, 2, 3, 5, 12}) {
    int64_t at = 0;
    for (int f = 0; f < P; ++f) {
      const FlatRange r = fragment_range_aligned(l, 0, l.total(), P, f);
      EXPECT_EQ(r.begin, at);
      EXPECT_LE(r.begin, r.end);
      EXPECT_TRUE(boundaries.count(r.end)) << r.end;
      // The cut is the boundary nearest to the even cut.
      const int64_t even = fragment_range(0, l.total(), P, f).end;
      for (int64_t b : boundaries) {
        if (b >= at) {
          EXPECT_LE(std::llabs(r.end - even), std::llabs(b - even)) << "P " << P;
        }
      }
      at = r.end;
    }
    EXPECT_EQ(at, l.total());
  }
  // One big tensor: every cut lands on its edges, so some fragments are empty.
  ParamLayout big;
  big.add({.name = "a", .shape = {10}});
  big.add({.name = "b", .shape = {1000}});
  EXPECT_EQ(fragment_range_aligned(big, 0, 1010, 4, 1), (FlatRange{10, 10}));
  EXPECT_EQ(fragment_range_aligned(big, 0, 1010, 4, 3), (FlatRange{1010, 1010}));
}

TEST(Fragments, StreamingScheduleSyncsEachFragmentOncePerPeriod) {
  for (int64_t H : {1, 4, 10, 100}) {
    for (int P : {1, 2, 3, 4, 10}) {
      if (P > H) continue;
      std::vector<std::vector<int64_t>> when(P);
      for (int64_t t = 1; t <= 3 * H; ++t) {
        const int f = streaming_fragment_at(t, H, P);
        ASSERT_GE(f, -1);
        ASSERT_LT(f, P);
        if (f >= 0) when[f].push_back(t);
      }
      for (int f = 0; f < P; ++f) {
        ASSERT_EQ(when[f].size(), 3u) << "H " << H << " P " << P << " fragment " << f;
        EXPECT_EQ(when[f][0], (f + 1) * H / P);
        EXPECT_EQ(when[f][1] - when[f][0], H);
        EXPECT_EQ(when[f][2] - when[f][1], H);
        if (f > 0) {
          EXPECT_GT(when[f][0], when[f - 1][0]);  // staggered, in order
        }
      }
    }
  }
  // P = 1 is plain DiLoCo: sync after every H-th inner step.
  EXPECT_EQ(streaming_fragment_at(500, 500, 1), 0);
  EXPECT_EQ(streaming_fragment_at(499, 500, 1), -1);
}

}  // namespace
}  // namespace brigade
