// EF-signSGD and top-k with error feedback in one process: the error-feedback invariant
// (sent + new error = scale * g + old error), the scale ||q||_1 / d per tensor, the decoded
// mean of W simulated replicas, payload sizes from the documented layouts, and rejection of
// corrupt or mismatched payloads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "brigade/sync/lowcomm/signef.h"
#include "brigade/sync/lowcomm/topk_ef.h"
#include "brigade/tensor/bf16.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::mixed_layout;
using testutil::replica_grad;

TEST(SignEf, ErrorFeedbackAndScalePerTensor) {
  const ParamLayout l = mixed_layout();
  const int64_t n = l.total();
  // A range that cuts w1 and w3: segments are the tensors' parts inside it.
  const int64_t begin = 1000, end = n - 50;
  SignEf ef(l, begin, end);
  EXPECT_EQ(ef.num_segments(), 4);
  const int64_t d = end - begin;
  EXPECT_EQ(ef.payload_bytes(), 20 + 4 * 4 + (d + 7) / 8);
  std::vector<uint8_t> payload(ef.payload_bytes());
  std::vector<float> sent(d), update(n, 0.0f);
  const float lr = 0.1f;
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = replica_grad(n, 0, step);
    const float* e = ef.state_tensors()[0].data;
    const std::vector<float> old(e, e + d);
    ef.compress(g.data(), lr, payload.data(), sent.data());
    for (const ParamSpec& s : l.specs()) {
      const int64_t lo = std::max(begin, s.offset) - begin;
      const int64_t hi = std::min(end, s.offset + s.numel) - begin;
      if (lo >= hi) continue;
      double l1 = 0.0;
      for (int64_t i = lo; i < hi; ++i) l1 += std::fabs(double{lr} * g[begin + i] + old[i]);
      for (int64_t i = lo; i < hi; ++i) {
        const double q = double{lr} * g[begin + i] + old[i];
        ASSERT_NEAR(std::fabs(sent[i]), l1 / (hi - lo), 1e-6 * l1 / (hi - lo)) << s.name;
        ASSERT_EQ(sent[i] < 0, q < 0) << s.name << " " << i;
        ASSERT_NEAR(sent[i] + e[i], q, 1e-6 * (std::fabs(q) + std::fabs(sent[i])));
      }
    }
    // One replica: the decoded mean is its own Delta.
    ef.decode_mean(payload.data(), 1, update.data());
    for (int64_t i = 0; i < d; ++i) ASSERT_EQ(update[begin + i], sent[i]);
    EXPECT_EQ(update[begin - 1], 0.0f);
  }
}

TEST(SignEf, MeanOfReplicasAndCorruptPayloads) {
  const ParamLayout l = mixed_layout();
  const int64_t n = l.total();
  const int W = 3;
  std::vector<SignEf> rep;
  for (int r = 0; r < W; ++r) rep.emplace_back(l, 0, n);
  const int64_t bytes = rep[0].payload_bytes();
  std::vector<uint8_t> all(W * bytes);
  std::vector<std::vector<float>> sent(W, std::vector<float>(n));
  for (int r = 0; r < W; ++r) {
    const std::vector<float> g = replica_grad(n, r, 0);
    rep[r].compress(g.data(), 1.0f, all.data() + r * bytes, sent[r].data());
  }
  std::vector<float> update(n);
  rep[1].decode_mean(all.data(), W, update.data());
  for (int64_t i = 0; i < n; ++i) {
    const double want = (double{sent[0][i]} + sent[1][i] + sent[2][i]) / W;
    ASSERT_NEAR(update[i], want, 1e-6 * std::fabs(want) + 1e-7) << i;
  }
  for (size_t at : {size_t{0}, size_t{4}, size_t{6}, size_t{8}, size_t{12}, size_t{19}}) {
    std::vector<uint8_t> b(all.begin(), all.begin() + bytes);
    b[at] ^= 0x21;
    EXPECT_THROW(rep[0].validate(b.data(), bytes), PayloadError) << at;
    EXPECT_THROW(rep[0].decode_mean(b.data(), 1, update.data()), PayloadError) << at;
  }
  EXPECT_THROW(rep[0].validate(all.data(), bytes - 1), PayloadError);
  SignEf other(l, 0, n - 1);
  EXPECT_THROW(other.validate(all.data(), bytes), PayloadError);
}

TEST(TopkEf, SentPlusErrorIsExactlyTheAccumulator) {
  const int64_t n = 10000;
  for (ValueFormat f : {ValueFormat::kF32, ValueFormat::kBF16}) {
    TopkEf ef({.fraction = 0.01, .values = f}, 500, 500 + n);
    ASSERT_EQ(ef.k(), 100);
    EXPECT_EQ(ef.payload_bytes(), 24 + 100 * 4 + (f == ValueFormat::kF32 ? 400 : 200));
    std::vector<uint8_t> payload(ef.payload_bytes());
    std::vector<float> sent(n), update(n + 1000, 0.0f);
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = replica_grad(n + 1000, 0, step);
      const float* e = ef.state_tensors()[0].data;
      const std::vector<float> old(e, e + n);
      ef.compress(g.data(), 0.5f, payload.data(), sent.data());
      // Sent entries are the k largest |acc|; everything else is kept.
      std::vector<float> acc(n);
      for (int64_t i = 0; i < n; ++i) acc[i] = old[i] + 0.5f * g[500 + i];
      std::vector<float> mags(n);
      for (int64_t i = 0; i < n; ++i) mags[i] = std::fabs(acc[i]);
      std::nth_element(mags.begin(), mags.begin() + 99, mags.end(), std::greater<float>());
      const float kth = mags[99];
      int64_t nonzero = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(sent[i] + e[i], acc[i]) << value_format_name(f) << " " << i;
        if (sent[i] != 0.0f) {
          ++nonzero;
          ASSERT_GE(std::fabs(acc[i]), kth);
          ASSERT_EQ(sent[i], round_trip_value(f, acc[i]));
        } else {
          ASSERT_LE(std::fabs(acc[i]), kth);
        }
      }
      EXPECT_EQ(nonzero, 100);
      ef.decode_mean(payload.data(), 1, update.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(update[500 + i], sent[i]);
    }
  }
}

TEST(TopkEf, MeanOfSparseContributionsAndCorruptPayloads) {
  const int64_t n = 3000;
  const int W = 3;
  std::vector<TopkEf> rep;
  for (int r = 0; r < W; ++r) rep.emplace_back(TopkEfConfig{.fraction = 0.001}, 0, n);
  EXPECT_EQ(rep[0].k(), 3);  // ceil(0.001 * 3000)
  const int64_t bytes = rep[0].payload_bytes();
  std::vector<uint8_t> all(W * bytes);
  std::vector<double> want(n, 0.0);
  for (int r = 0; r < W; ++r) {
    std::vector<float> sent(n);
    const std::vector<float> g = replica_grad(n, r, 0);
    rep[r].compress(g.data(), 1.0f, all.data() + r * bytes, sent.data());
    for (int64_t i = 0; i < n; ++i) want[i] += double{sent[i]} / W;
  }
  std::vector<float> update(n);
  rep[2].decode_mean(all.data(), W, update.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(update[i], want[i], 1e-6 * std::fabs(want[i])) << i;
  auto corrupt = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b(all.begin(), all.begin() + bytes);
    b[at] = v;
    return b;
  };
  for (auto [at, v] : {std::pair<size_t, uint8_t>{0, 0},
                       {4, 9},
                       {5, 1},
                       {6, 1},
                       {8, 0},
                       {16, 9},
                       {24 + 3, 0xff} /* index >= n */}) {
    std::vector<uint8_t> b = corrupt(at, v);
    EXPECT_THROW(rep[0].validate(b.data(), bytes), PayloadError) << at;
  }
  // Indices must ascend: swap the first two.
  std::vector<uint8_t> b(all.begin(), all.begin() + bytes);
  std::swap_ranges(b.begin() + 24, b.begin() + 28, b.begin() + 28);
  EXPECT_THROW(rep[0].validate(b.data(), bytes), PayloadError);
  EXPECT_THROW(TopkEf({.fraction = 0.0}, 0, 10), ConfigError);
  EXPECT_THROW(TopkEf({.fraction = 1.5}, 0, 10), ConfigError);
  EXPECT_THROW(TopkEf({.values = ValueFormat::kSign}, 0, 10), ConfigError);
}

}  // namespace
}  // namespace brigade
