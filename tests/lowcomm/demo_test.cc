// DeMo's math in one process, with W replicas simulated by W Demo objects whose payloads are
// concatenated as the all_gather would: sign-SGD on the mean gradient when every coefficient
// is sent, a naive double-precision reference for the first step, the error-feedback
// invariant over several steps, the per-coefficient mean over the replicas that picked it,
// byte sizes from the documented layout, and rejection of mismatched peers.
#include "brigade/sync/lowcomm/demo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "brigade/tensor/bf16.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::mixed_layout;
using testutil::naive_basis;
using testutil::replica_grad;

// Runs one simulated step of W replicas that all start from params; returns each replica's
// params afterwards.
std::vector<std::vector<float>> simulated_step(std::vector<Demo>& demos,
                                               const std::vector<float>& params,
                                               const std::vector<std::vector<float>>& grads,
                                               float lr) {
  const int W = static_cast<int>(demos.size());
  const int64_t bytes = demos[0].payload_bytes();
  std::vector<uint8_t> gathered(W * bytes);
  for (int r = 0; r < W; ++r) demos[r].compress(grads[r].data(), lr, gathered.data() + r * bytes);
  std::vector<std::vector<float>> out(W, params);
  for (int r = 0; r < W; ++r) demos[r].apply(gathered.data(), W, out[r].data(), lr);
  return out;
}

std::vector<Demo> make_demos(int W, const DemoConfig& c, const ParamLayout& l) {
  std::vector<Demo> d;
  for (int r = 0; r < W; ++r) d.emplace_back(c, l, 0, l.total());
  return d;
}

TEST(Demo, WholeChunkAndBetaZeroIsSignSgdOnTheMeanGradient) {
  const ParamLayout layout = mixed_layout();
  const int64_t n = layout.total();
  DemoConfig c{.beta = 0.0f, .k = 4096, .weight_decay = 0.1f};
  const float lr = 0.05f;
  for (int W : {1, 3}) {
    std::vector<Demo> demos = make_demos(W, c, layout);
    const std::vector<float> p0 = testutil::normal_vector(n, 1, "p0");
    std::vector<std::vector<float>> g(W);
    for (int r = 0; r < W; ++r) g[r] = replica_grad(n, r, 0);
    // Keep the mean gradient away from 0 so its sign is unambiguous.
    for (int64_t i = 0; i < n; ++i) g[0][i] += (i % 3 == 0 ? -10.0f : 10.0f) * W;
    const auto out = simulated_step(demos, p0, g, lr);
    for (const ParamSpec& s : layout.specs()) {
      const float keep = s.weight_decay ? 1.0f - lr * c.weight_decay : 1.0f;
      for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
        double mean = 0.0;
        for (int r = 0; r < W; ++r) mean += g[r][i];
        const float want = p0[i] * keep - lr * (mean > 0 ? 1.0f : -1.0f);
        for (int r = 0; r < W; ++r) ASSERT_NEAR(out[r][i], want, 1e-6f) << s.name << " " << i;
      }
    }
    for (int r = 0; r < W; ++r) {
      const StateView d = demos[r].state_tensors()[0];
      EXPECT_EQ(d.name, "demo.delta");
      float worst = 0.0f;
      for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(d.data[i]));
      // Only the f32 round-trip error of the transform remains.
      EXPECT_LE(worst, 4e-6f * lr * (testutil::max_abs(g[r]))) << "delta of replica " << r;
    }
  }
}

// The reference: per replica, per chunk, double-precision DCT of lr * g (first step: delta
// starts at 0), full sort for the top k, mean over pickers, double IDCT, sign.
struct Reference {
  std::vector<float> params;
  std::vector<std::vector<double>> delta;  // per replica, after the step
  std::vector<double> u;
};

Reference reference_first_step(const ParamLayout& layout, const DemoConfig& c,
                               const std::vector<float>& p0,
                               const std::vector<std::vector<float>>& g, float lr) {
  const int W = static_cast<int>(g.size());
  Reference ref;
  ref.params = p0;
  ref.u.assign(layout.total(), 0.0);
  ref.delta.assign(W, std::vector<double>(layout.total(), 0.0));
  for (const ParamSpec& s : layout.specs()) {
    const ChunkGeometry geo = dct_geometry(s.shape, c.max_chunk);
    const std::vector<double> t1 = naive_basis(geo.s1), t2 = naive_basis(geo.s2);
    const int cs = geo.chunk_size();
    const int k = std::min(c.k, cs);
    for (int64_t ch = 0; ch < geo.num_chunks(); ++ch) {
      const int64_t base = s.offset + geo.block_offset(ch);
      auto at = [&](int i, int j) { return base + int64_t{i} * geo.n2 + j; };
      std::vector<double> sum(cs, 0.0);
      std::vector<int> count(cs, 0);
      for (int r = 0; r < W; ++r) {
        std::vector<double> C(cs, 0.0);
        for (int b1 = 0; b1 < geo.s1; ++b1)
          for (int b2 = 0; b2 < geo.s2; ++b2)
            for (int i = 0; i < geo.s1; ++i)
              for (int j = 0; j < geo.s2; ++j)
                C[b1 * geo.s2 + b2] +=
                    t1[i * geo.s1 + b1] * double{lr * g[r][at(i, j)]} * t2[j * geo.s2 + b2];
        std::vector<int> order(cs);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return std::fabs(C[a]) > std::fabs(C[b]); });
        std::vector<double> kept(cs, 0.0);
        for (int e = 0; e < k; ++e) {
          const int idx = order[e];
          kept[idx] = C[idx];
          sum[idx] += round_trip_value(c.values, static_cast<float>(C[idx]));
          count[idx] += 1;
        }
        for (int i = 0; i < geo.s1; ++i) {
          for (int j = 0; j < geo.s2; ++j) {
            double back = 0.0;
            for (int b1 = 0; b1 < geo.s1; ++b1)
              for (int b2 = 0; b2 < geo.s2; ++b2)
                back += t1[i * geo.s1 + b1] * kept[b1 * geo.s2 + b2] * t2[j * geo.s2 + b2];
            ref.delta[r][at(i, j)] = double{lr * g[r][at(i, j)]} - back;
          }
        }
      }
      for (int i = 0; i < geo.s1; ++i) {
        for (int j = 0; j < geo.s2; ++j) {
          double u = 0.0;
          for (int q = 0; q < cs; ++q) {
            if (count[q] == 0) continue;
            u += t1[i * geo.s1 + q / geo.s2] * (sum[q] / count[q]) * t2[j * geo.s2 + q % geo.s2];
          }
          ref.u[at(i, j)] = u;
        }
      }
    }
    const float keep = s.weight_decay ? 1.0f - lr * c.weight_decay : 1.0f;
    for (int64_t i = s.offset; i < s.offset + s.numel; ++i) {
      ref.params[i] = p0[i] * keep - lr * static_cast<float>((ref.u[i] > 0) - (ref.u[i] < 0));
    }
  }
  return ref;
}

TEST(Demo, FirstStepMatchesNaiveReference) {
  const ParamLayout layout = mixed_layout();
  const int64_t n = layout.total();
  const int W = 3;
  const float lr = 0.1f;
  // Sign ambiguity: where |u| is within the reference's error, either sign is right.
  struct Case {
    ValueFormat f;
    double ambiguous;  // relative to max |u|
  };
  for (Case cs : {Case{ValueFormat::kF32, 1e-4}, Case{ValueFormat::kBF16, 2e-2},
                  Case{ValueFormat::kSign, 1e-4}}) {
    DemoConfig c{.beta = 0.9f, .k = 5, .values = cs.f, .weight_decay = 0.01f};
    std::vector<Demo> demos = make_demos(W, c, layout);
    const std::vector<float> p0 = testutil::normal_vector(n, 2, "p0");
    std::vector<std::vector<float>> g(W);
    for (int r = 0; r < W; ++r) g[r] = replica_grad(n, r, 1);
    const auto out = simulated_step(demos, p0, g, lr);
    const Reference ref = reference_first_step(layout, c, p0, g, lr);
    double umax = 0.0;
    for (double u : ref.u) umax = std::max(umax, std::fabs(u));
    int64_t checked = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::fabs(ref.u[i]) <= cs.ambiguous * umax) continue;
      ++checked;
      for (int r = 0; r < W; ++r) {
        ASSERT_NEAR(out[r][i], ref.params[i], 1e-6f) << value_format_name(cs.f) << " " << i;
      }
    }
    EXPECT_GT(checked, n * 8 / 10) << value_format_name(cs.f);
    for (int r = 0; r < W; ++r) {
      const float* d = demos[r].state_tensors()[0].data;
      double err = 0.0;
      for (int64_t i = 0; i < n; ++i) err = std::max(err, std::fabs(d[i] - ref.delta[r][i]));
      EXPECT_LE(err, 1e-6 * lr * testutil::max_abs(g[r])) << "delta, replica " << r;
    }
  }
}

// delta_new + IDCT(sent) = beta * delta_old + lr * g, step after step; the residual does not
// depend on how values are encoded (1-bit still subtracts the unquantized values).
TEST(Demo, ResidualKeepsWhatWasNotSent) {
  ParamLayout layout;
  layout.add({.name = "w", .shape = {64, 128}});
  layout.add({.name = "b", .shape = {96}});
  const int64_t n = layout.total();
  DemoConfig c{.beta = 0.9f, .k = 3};
  DemoConfig c1 = c;
  c1.values = ValueFormat::kSign;
  Demo demo(c, layout, 0, n), demo1(c1, layout, 0, n);
  std::vector<uint8_t> payload(demo.payload_bytes()), payload1(demo1.payload_bytes());
  const float lr = 0.3f;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = replica_grad(n, 0, step);
    const std::vector<float> old(demo.state_tensors()[0].data, demo.state_tensors()[0].data + n);
    demo.compress(g.data(), lr, payload.data());
    demo1.compress(g.data(), lr, payload1.data());
    const float* d = demo.state_tensors()[0].data;
    const float* d1 = demo1.state_tensors()[0].data;
    ASSERT_EQ(0, std::memcmp(d, d1, sizeof(float) * n)) << "1-bit residual differs, step " << step;
    // Reconstruct IDCT(sent) from this replica's own (f32) payload.
    std::vector<float> sent(n, 0.0f);
    const SparsePayloadFormat& fmt = demo.payload_format();
    ASSERT_NO_THROW(fmt.validate(payload.data(), payload.size()));
    for (size_t t = 0; t < layout.specs().size(); ++t) {
      const ParamSpec& s = layout.specs()[t];
      BlockDct dct(dct_geometry(s.shape));
      const ChunkGeometry& geo = dct.geometry();
      const int k = std::min(c.k, geo.chunk_size());
      std::vector<uint32_t> idx(k);
      std::vector<float> val(k);
      for (int64_t ch = 0; ch < geo.num_chunks(); ++ch) {
        fmt.get_chunk(payload.data(), static_cast<int>(t), ch, idx.data(), val.data());
        dct.add_inverse_sparse(idx.data(), val.data(), k, 1.0f,
                               sent.data() + s.offset + geo.block_offset(ch), geo.n2);
      }
    }
    double err = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = double{c.beta} * old[i] + double{lr} * g[i];
      err = std::max(err, std::fabs(d[i] + sent[i] - want));
      scale = std::max(scale, std::fabs(want));
    }
    EXPECT_LE(err, 1e-6 * scale) << "step " << step;
  }
}

// Replica 0 sends coefficient 1, replicas 1 and 2 send coefficient 2 (value 1 each): the mean
// over pickers is (1, 1), where sum / W would be (1/3, 2/3) -- and the signs differ.
TEST(Demo, CoefficientMeanIsOverTheReplicasThatPickedIt) {
  ParamLayout layout;
  layout.add({.name = "w", .shape = {8, 8}});  // one 8x8 chunk
  DemoConfig c{.beta = 0.0f, .k = 1};
  Demo demo(c, layout, 0, 64);
  const SparsePayloadFormat& fmt = demo.payload_format();
  ASSERT_EQ(fmt.groups().size(), 1u);
  const int64_t bytes = fmt.size_bytes();
  std::vector<uint8_t> gathered(3 * bytes);
  const uint32_t picks[3] = {1, 2, 2};
  const float one = 1.0f;
  for (int r = 0; r < 3; ++r) {
    fmt.begin(gathered.data() + r * bytes);
    fmt.put_chunk(gathered.data() + r * bytes, 0, 0, &picks[r], &one);
  }
  std::vector<float> p(64, 0.0f);
  const float lr = 0.5f;
  demo.apply(gathered.data(), 3, p.data(), lr);
  const std::vector<double> t = naive_basis(8);
  auto phi = [&](int coeff, int i, int j) { return t[i * 8 + coeff / 8] * t[j * 8 + coeff % 8]; };
  int differs = 0;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      const double mean_rule = phi(1, i, j) + phi(2, i, j);
      const double sum_rule = phi(1, i, j) / 3 + 2 * phi(2, i, j) / 3;
      const float want = -lr * static_cast<float>((mean_rule > 0) - (mean_rule < 0));
      EXPECT_FLOAT_EQ(p[i * 8 + j], want) << i << "," << j;
      differs += (mean_rule > 0) != (sum_rule > 0);
    }
  }
  EXPECT_GT(differs, 0) << "the example does not tell the two rules apart";
}

TEST(Demo, PayloadBytesFollowTheLayout) {
  const ParamLayout layout = mixed_layout();
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16, ValueFormat::kSign}) {
    for (int k : {1, 4, 32, 64}) {
      Demo demo(DemoConfig{.k = k, .values = f}, layout, 0, layout.total());
      // w1 (96, 40): 2 chunks of 48x40 = 1920 (u16 indices); b1 (100): 2 rows of 50 (u8);
      // w2 (5, 7): 1 chunk of 35 (u8); w3 (4, 6, 8) = (4, 48): 1 chunk of 192 (u8).
      const int64_t k1 = k, k2 = std::min(k, 50), k3 = std::min(k, 35), k4 = k;
      const int64_t entries = 2 * k1 + 2 * k2 + k3 + k4;
      const int64_t index = 2 * k1 * 2 + 2 * k2 + k3 + k4;
      const int64_t values = f == ValueFormat::kF32    ? 4 * entries
                             : f == ValueFormat::kBF16 ? 2 * entries
                                                       : (entries + 7) / 8;
      EXPECT_EQ(demo.payload_bytes(), 12 + 4 * 12 + index + values);
      const Traffic t = demo.bytes_per_step(3, 1);
      EXPECT_EQ(t.sent, 2 * demo.payload_bytes());
      EXPECT_EQ(t.received, 2 * demo.payload_bytes());
    }
  }
}

TEST(Demo, RejectsBadConfigRangesAndPeers) {
  const ParamLayout layout = mixed_layout();
  EXPECT_THROW(Demo(DemoConfig{.beta = 1.0f}, layout, 0, layout.total()), ConfigError);
  EXPECT_THROW(Demo(DemoConfig{.k = 0}, layout, 0, layout.total()), ConfigError);
  EXPECT_THROW(Demo(DemoConfig{.max_chunk = 65}, layout, 0, layout.total()), ConfigError);
  EXPECT_THROW(Demo(DemoConfig{.weight_decay = -1.0f}, layout, 0, layout.total()), ConfigError);
  EXPECT_THROW(Demo(DemoConfig{}, layout, 10, layout.total()), ConfigError);  // cuts w1
  // A sub-range of whole tensors is fine.
  const ParamSpec& b1 = layout.at("b1");
  Demo part(DemoConfig{}, layout, b1.offset, b1.offset + b1.numel);
  EXPECT_EQ(part.payload_format().groups().size(), 1u);
  // A peer with another k sends a payload of another shape.
  Demo mine(DemoConfig{.k = 4}, layout, 0, layout.total());
  Demo theirs(DemoConfig{.k = 5}, layout, 0, layout.total());
  const std::vector<float> g = replica_grad(layout.total(), 0, 0);
  std::vector<uint8_t> a(mine.payload_bytes()), b(theirs.payload_bytes());
  mine.compress(g.data(), 0.1f, a.data());
  theirs.compress(g.data(), 0.1f, b.data());
  std::vector<float> p(layout.total(), 0.0f);
  b.resize(a.size());
  EXPECT_THROW(mine.apply(b.data(), 1, p.data(), 0.1f), PayloadError);
  a[20] ^= 0xff;  // group shape bytes
  EXPECT_THROW(mine.apply(a.data(), 1, p.data(), 0.1f), PayloadError);
}

}  // namespace
}  // namespace brigade
