// The DCT top-k codec DeMo and compressed DiLoCo share (sync/lowcomm/dct_topk.h), in one
// process: against a naive double-precision DCT and top-k (which coefficients go out and what a
// receiver decodes, bf16 and 1-bit with a per-chunk scale), the error-feedback invariant
// (residual + decoded payload == input), the exact byte size from the documented layout, and
// rejection of payloads of another size or with a bad scale.
#include "brigade/sync/lowcomm/dct_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "brigade/base/error.h"
#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::mixed_layout;
using testutil::naive_basis;

// Naive coefficients of block (rb, jb) of an (n1, n2) tensor in s1 x s2 blocks, in double.
std::vector<double> naive_block(const float* x, int64_t n2, int s1, int s2, int64_t rb,
                                int64_t jb) {
  const std::vector<double> t1 = naive_basis(s1), t2 = naive_basis(s2);
  std::vector<double> c(s1 * s2, 0.0);
  for (int b1 = 0; b1 < s1; ++b1) {
    for (int b2 = 0; b2 < s2; ++b2) {
      double s = 0.0;
      for (int i = 0; i < s1; ++i) {
        for (int j = 0; j < s2; ++j) {
          s += t1[i * s1 + b1] * t2[j * s2 + b2] * x[(rb * s1 + i) * n2 + jb * s2 + j];
        }
      }
      c[b1 * s2 + b2] = s;
    }
  }
  return c;
}

// For every chunk of every tensor, the payload carries the naive top-k indices, and the values
// a receiver decodes are bf16(C) or mean|top-k C| * sign(C).
void check_against_naive(ValueFormat values) {
  const ParamLayout layout = mixed_layout();
  const int64_t n = layout.total();
  const int k = 5;
  DctTopkCodec codec({.k = k, .max_chunk = 64, .values = values, .chunk_scales = true}, layout, 0,
                     n, "test");
  const std::vector<float> x0 = testutil::normal_vector(n, 11, "x");
  std::vector<float> x = x0;
  std::vector<uint8_t> payload(codec.size_bytes());
  codec.encode(x.data(), payload.data(), DctTopkCodec::Residual::kDecoded);
  codec.validate(payload.data(), codec.size_bytes());
  std::vector<uint32_t> idx(codec.max_chunk_size());
  std::vector<float> val(codec.max_chunk_size());
  int t = 0;
  for (const ParamSpec& s : layout.specs()) {
    const ChunkGeometry g = dct_geometry(s.shape);
    for (int64_t rb = 0; rb < g.n1 / g.s1; ++rb) {
      for (int64_t jb = 0; jb < g.n2 / g.s2; ++jb) {
        std::vector<double> c = naive_block(x0.data() + s.offset, g.n2, g.s1, g.s2, rb, jb);
        std::vector<int> order(c.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int b) { return std::fabs(c[a]) > std::fabs(c[b]); });
        const int kk = std::min<int>(k, static_cast<int>(c.size()));
        std::vector<int> top(order.begin(), order.begin() + kk);
        std::sort(top.begin(), top.end());
        double scale = 0.0;
        for (int i : top) scale += std::fabs(c[i]) / kk;
        codec.get_chunk(payload.data(), t, rb * (g.n2 / g.s2) + jb, idx.data(), val.data());
        for (int j = 0; j < kk; ++j) {
          ASSERT_EQ(static_cast<int>(idx[j]), top[j]) << s.name << " chunk " << rb << "," << jb;
          const double want = values == ValueFormat::kSign ? (c[top[j]] < 0 ? -scale : scale)
                                                           : round_trip_value(values, c[top[j]]);
          // bf16 rounding of a value within 1e-5 of the naive one can land one ulp away.
          EXPECT_NEAR(val[j], want, 1e-5 + 8e-3 * std::fabs(want)) << s.name;
        }
      }
    }
    ++t;
  }
  // Error feedback: what was not sent plus what receivers decode is the input.
  std::vector<float> decoded(n, 0.0f);
  codec.decode_add(payload.data(), 1.0f, decoded.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i] + decoded[i], x0[i], 2e-5) << i;
}

TEST(DctTopkCodec, Bf16MatchesNaiveTopkAndResidualIsWhatWasNotSent) {
  check_against_naive(ValueFormat::kBF16);
}
TEST(DctTopkCodec, OneBitWithChunkScaleMatchesNaiveAndResidualIsWhatWasNotSent) {
  check_against_naive(ValueFormat::kSign);
}

// Whole chunks in f32: the payload carries the tensor exactly (up to the DCT's rounding) and
// the residual is ~0.
TEST(DctTopkCodec, WholeChunkF32IsLossless) {
  const ParamLayout layout = mixed_layout();
  const int64_t n = layout.total();
  DctTopkCodec codec({.k = 4096, .values = ValueFormat::kF32}, layout, 0, n, "test");
  const std::vector<float> x0 = testutil::normal_vector(n, 12, "x");
  std::vector<float> x = x0, out(n, 0.0f);
  std::vector<uint8_t> payload(codec.size_bytes());
  codec.encode(x.data(), payload.data(), DctTopkCodec::Residual::kDecoded);
  codec.decode_add(payload.data(), 1.0f, out.data());
  EXPECT_LT(testutil::max_abs(x), 1e-5f);
  EXPECT_LT(testutil::max_abs_diff(out.data(), x0.data(), n), 1e-5);
}

// mixed_layout with k = 8: w1 (96, 40) has 2 chunks of 48 x 40 = 1920 (u16 indices), b1 2
// chunks of 50, w2 one of 35, w3 one of 4 x 48 = 192 (u8 indices); 6 chunks, 48 values.
TEST(DctTopkCodec, SizeFollowsTheLayout) {
  const ParamLayout layout = mixed_layout();
  const int64_t header = 12 + 12 * 4, indices = 2 * 8 * 2 + (2 + 1 + 1) * 8 * 1;
  auto size = [&](ValueFormat v, bool scales) {
    return DctTopkCodec({.k = 8, .values = v, .chunk_scales = scales}, layout, 0, layout.total(),
                        "test")
        .size_bytes();
  };
  EXPECT_EQ(size(ValueFormat::kBF16, false), header + indices + 2 * 48);
  EXPECT_EQ(size(ValueFormat::kBF16, true), header + indices + 2 * 48);  // scales: 1bit only
  EXPECT_EQ(size(ValueFormat::kSign, false), header + indices + 6);
  EXPECT_EQ(size(ValueFormat::kSign, true), header + indices + 6 + 4 * 6);
  EXPECT_EQ(size(ValueFormat::kF32, false), header + indices + 4 * 48);
}

TEST(DctTopkCodec, RejectsBadPayloads) {
  const ParamLayout layout = mixed_layout();
  const int64_t n = layout.total();
  DctTopkCodec codec({.k = 3, .values = ValueFormat::kSign, .chunk_scales = true}, layout, 0, n,
                     "test");
  std::vector<float> x = testutil::normal_vector(n, 13, "x");
  std::vector<uint8_t> p(codec.size_bytes());
  codec.encode(x.data(), p.data(), DctTopkCodec::Residual::kDecoded);
  EXPECT_NO_THROW(codec.validate(p.data(), codec.size_bytes()));
  EXPECT_THROW(codec.validate(p.data(), codec.size_bytes() - 1), PayloadError);
  for (float bad : {-1.0f, NAN, INFINITY}) {
    std::vector<uint8_t> q = p;
    std::memcpy(q.data() + codec.size_bytes() - 4, &bad, 4);  // the last chunk's scale
    EXPECT_THROW(codec.validate(q.data(), codec.size_bytes()), PayloadError) << bad;
  }
  std::vector<uint8_t> q = p;
  q[0] ^= 1;  // magic
  EXPECT_THROW(codec.validate(q.data(), codec.size_bytes()), PayloadError);
}

}  // namespace
}  // namespace brigade
