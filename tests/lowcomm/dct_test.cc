// The block DCT against an independent double-precision transform written from the formula:
// the basis is orthonormal, forward/inverse round-trip, blocks of every shape class match
// the naive separable transform, and DeMo's chunk rule picks the expected divisors.
#include "brigade/sync/lowcomm/dct.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lowcomm/lowcomm_test_util.h"

namespace brigade {
namespace {

using testutil::naive_basis;
using testutil::normal_vector;

TEST(DctBasis, OrthonormalForEverySize) {
  for (int s = 1; s <= kMaxDctSize; ++s) {
    const DctBasis& b = dct_basis(s);
    ASSERT_EQ(b.size, s);
    const std::vector<double> ref = naive_basis(s);
    double worst = 0.0, worst_entry = 0.0;
    for (int i = 0; i < s; ++i) {
      for (int j = 0; j < s; ++j) {
        // (T T^T)[i][j] and (T^T T)[i][j]
        double rows = 0.0, cols = 0.0;
        for (int k = 0; k < s; ++k) {
          rows += double{b.t[i * s + k]} * b.t[j * s + k];
          cols += double{b.t[k * s + i]} * b.t[k * s + j];
        }
        const double want = i == j ? 1.0 : 0.0;
        worst = std::max({worst, std::fabs(rows - want), std::fabs(cols - want)});
        worst_entry = std::max(worst_entry, std::fabs(b.t[i * s + j] - ref[i * s + j]));
        EXPECT_EQ(b.tt[j * s + i], b.t[i * s + j]);
      }
    }
    EXPECT_LE(worst, 1e-6) << "size " << s;
    EXPECT_LE(worst_entry, 1e-7) << "size " << s;
  }
}

TEST(DctChunk, LargestDivisorAtMost64) {
  struct Case {
    int64_t n, want;
  };
  // 50257 = 29 * 1733 (GPT-2's vocabulary); 97 is prime; 130 = 2 * 5 * 13.
  for (Case c : {Case{768, 64}, Case{2304, 64}, Case{3072, 64}, Case{50257, 29}, Case{1024, 64},
                 Case{100, 50}, Case{97, 1}, Case{1, 1}, Case{63, 63}, Case{64, 64}, Case{65, 13},
                 Case{130, 26}, Case{96, 48}, Case{40, 40}}) {
    EXPECT_EQ(dct_chunk_size(c.n), c.want) << c.n;
  }
  // Against a brute-force scan of every divisor.
  for (int64_t n = 1; n <= 3000; ++n) {
    int64_t best = 1;
    for (int64_t d = 1; d <= 64 && d <= n; ++d) {
      if (n % d == 0) best = d;
    }
    ASSERT_EQ(dct_chunk_size(n), best) << n;
    ASSERT_EQ(dct_chunk_size(n, 8), [&] {
      int64_t b = 1;
      for (int64_t d = 1; d <= 8 && d <= n; ++d) {
        if (n % d == 0) b = d;
      }
      return b;
    }()) << n;
  }
}

TEST(DctChunk, GeometryOfModelShapes) {
  ChunkGeometry g = dct_geometry({768, 2304});
  EXPECT_EQ(g.s1, 64);
  EXPECT_EQ(g.s2, 64);
  EXPECT_EQ(g.num_chunks(), 12 * 36);
  EXPECT_EQ(g.chunk_size(), 4096);
  g = dct_geometry({50257, 768});
  EXPECT_EQ(g.s1, 29);
  EXPECT_EQ(g.s2, 64);
  EXPECT_EQ(g.num_chunks(), 1733 * 12);
  g = dct_geometry({768});  // a bias: rows of 64
  EXPECT_EQ(g.n1, 1);
  EXPECT_EQ(g.s1, 1);
  EXPECT_EQ(g.s2, 64);
  EXPECT_EQ(g.num_chunks(), 12);
  g = dct_geometry({4, 6, 8});  // rank 3: (4, 48)
  EXPECT_EQ(g.n1, 4);
  EXPECT_EQ(g.n2, 48);
  EXPECT_EQ(g.s2, 48);
  g = dct_geometry({});
  EXPECT_EQ(g.num_chunks(), 1);
  EXPECT_EQ(g.chunk_size(), 1);
  g = dct_geometry({768, 2304}, 16);
  EXPECT_EQ(g.s1, 16);
  EXPECT_EQ(g.s2, 16);
  // Block offsets walk the (n1/s1, s1, n2/s2, s2) view row-major over blocks.
  g = dct_geometry({6, 10}, 3);  // s1 = 3, s2 = 2 (10's largest divisor <= 3)
  ASSERT_EQ(g.s2, 2);
  EXPECT_EQ(g.block_offset(0), 0);
  EXPECT_EQ(g.block_offset(4), 8);
  EXPECT_EQ(g.block_offset(5), 3 * 10);
  EXPECT_EQ(g.block_offset(9), 3 * 10 + 8);
}

// Naive reference: for block (B1, B2) of x, C[b1][b2] = sum_ij T1[i][b1] X[i][j] T2[j][b2].
std::vector<double> naive_forward(const ChunkGeometry& g, const std::vector<float>& x) {
  const std::vector<double> t1 = naive_basis(g.s1), t2 = naive_basis(g.s2);
  std::vector<double> out(g.n1 * g.n2);
  const int64_t blocks2 = g.n2 / g.s2;
  for (int64_t c = 0; c < g.num_chunks(); ++c) {
    const int64_t r0 = (c / blocks2) * g.s1, c0 = (c % blocks2) * g.s2;
    for (int b1 = 0; b1 < g.s1; ++b1) {
      for (int b2 = 0; b2 < g.s2; ++b2) {
        double sum = 0.0;
        for (int i = 0; i < g.s1; ++i) {
          for (int j = 0; j < g.s2; ++j) {
            sum += t1[i * g.s1 + b1] * x[(r0 + i) * g.n2 + c0 + j] * t2[j * g.s2 + b2];
          }
        }
        out[c * g.chunk_size() + b1 * g.s2 + b2] = sum;
      }
    }
  }
  return out;
}

TEST(BlockDct, MatchesNaiveTransformAndRoundTrips) {
  struct Case {
    std::vector<int64_t> shape;
    int max_chunk;
  };
  for (const Case& c : {Case{{6, 10}, 64}, Case{{128, 96}, 64}, Case{{12, 20}, 4},
                        Case{{7, 130}, 64}, Case{{200}, 64}, Case{{4, 6, 8}, 64}, Case{{97, 3}, 64},
                        Case{{1}, 64}, Case{{64, 64}, 64}}) {
    const ChunkGeometry g = dct_geometry(c.shape, c.max_chunk);
    const int64_t n = g.n1 * g.n2;
    const std::vector<float> x = normal_vector(n, 3, "dct");
    BlockDct dct(g);
    std::vector<float> coeffs(n), back(n);
    dct.forward(x.data(), coeffs.data());
    const std::vector<double> want = naive_forward(g, x);
    double err = 0.0, norm_x = 0.0, norm_c = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      err = std::max(err, std::fabs(coeffs[i] - want[i]));
      norm_x += double{x[i]} * x[i];
      norm_c += double{coeffs[i]} * coeffs[i];
    }
    const std::string what = shape_string(c.shape);
    EXPECT_LE(err, 1e-6 * testutil::max_abs(x)) << what;
    // The strip form (two sgemm calls per s1 rows) against the same reference.
    std::vector<float> strip(g.s1 * g.n2), work(g.s1 * g.n2);
    double strip_err = 0.0;
    const int64_t blocks2 = g.n2 / g.s2;
    for (int64_t rb = 0; rb < g.n1 / g.s1; ++rb) {
      dct.forward_rows(x.data() + rb * g.s1 * g.n2, strip.data(), work.data());
      for (int64_t jb = 0; jb < blocks2; ++jb) {
        const int64_t ch = rb * blocks2 + jb;
        for (int b1 = 0; b1 < g.s1; ++b1) {
          for (int b2 = 0; b2 < g.s2; ++b2) {
            strip_err = std::max(strip_err, std::fabs(strip[b1 * g.n2 + jb * g.s2 + b2] -
                                                      want[ch * g.chunk_size() + b1 * g.s2 + b2]));
          }
        }
      }
    }
    EXPECT_LE(strip_err, 1e-6 * testutil::max_abs(x)) << what << " forward_rows";
    EXPECT_NEAR(norm_c, norm_x, 1e-5 * norm_x) << what << " (Parseval)";
    dct.inverse(coeffs.data(), back.data());
    // Relative to the data's scale: four f32 products of up to 64 terms each.
    EXPECT_LE(testutil::max_abs_diff(back.data(), x.data(), n), 1e-6 * testutil::max_abs(x))
        << what << " round trip";
  }
}

TEST(BlockDct, RoundTripEverySize1D) {
  for (int s = 1; s <= kMaxDctSize; ++s) {
    BlockDct dct(dct_geometry({s}));
    ASSERT_EQ(dct.geometry().s2, s);
    const std::vector<float> x = normal_vector(s, 5, "dct1d/" + std::to_string(s));
    std::vector<float> c(s), back(s);
    dct.forward_block(x.data(), s, c.data());
    dct.inverse_block(c.data(), back.data(), s);
    EXPECT_LE(testutil::max_abs_diff(back.data(), x.data(), s), 1e-6) << "size " << s;
  }
}

TEST(BlockDct, SparseInverseEqualsDenseInverse) {
  const ChunkGeometry g = dct_geometry({48, 40});  // one 48x40 block
  BlockDct dct(g);
  const int cs = g.chunk_size();
  const std::vector<uint32_t> idx = {0, 7, 41, 300, 1919};
  const std::vector<float> val = {1.5f, -2.0f, 0.25f, 3.0f, -0.5f};
  std::vector<float> dense(cs, 0.0f), want(cs), got(cs);
  for (size_t j = 0; j < idx.size(); ++j) dense[idx[j]] = val[j];
  dct.inverse_block(dense.data(), want.data(), g.s2);
  // Start from a non-zero block: add_inverse_sparse accumulates.
  const std::vector<float> base = normal_vector(cs, 9, "base");
  got = base;
  dct.add_inverse_sparse(idx.data(), val.data(), idx.size(), -2.0f, got.data(), g.s2);
  for (int i = 0; i < cs; ++i) EXPECT_NEAR(got[i], base[i] - 2.0f * want[i], 1e-5) << i;
}

}  // namespace
}  // namespace brigade
