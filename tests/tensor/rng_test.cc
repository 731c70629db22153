// Counter-based RNG: Philox known-answer vectors, determinism, statistics of fill_normal,
// independence from how a range is split, and the RandomPermutation bijection.
#include "brigade/tensor/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace brigade {
namespace {

// Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors):
// counter words (c0..c3), key words (k0, k1) -> output words. philox4x32 takes the counter
// as (hi = c3:c2, lo = c1:c0) and the key as k1:k0.
TEST(Philox, KnownAnswerVectors) {
  struct Kat {
    uint32_t c[4], k[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& kat : kats) {
    const uint64_t key = (uint64_t{kat.k[1]} << 32) | kat.k[0];
    const uint64_t hi = (uint64_t{kat.c[3]} << 32) | kat.c[2];
    const uint64_t lo = (uint64_t{kat.c[1]} << 32) | kat.c[0];
    const auto r = philox4x32(key, hi, lo);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r[i], kat.out[i]) << "word " << i;
  }
}

TEST(Philox, DeterministicAndKeySensitive) {
  EXPECT_EQ(philox4x32(42, 7, 9), philox4x32(42, 7, 9));
  EXPECT_NE(philox4x32(42, 7, 9), philox4x32(43, 7, 9));
  EXPECT_NE(philox4x32(42, 7, 9), philox4x32(42, 8, 9));
  EXPECT_NE(philox4x32(42, 7, 9), philox4x32(42, 7, 10));
  EXPECT_EQ(random_uniform(1, 2, 3), random_uniform(1, 2, 3));
  EXPECT_NE(hash_name("h.0.attn.weight"), hash_name("h.1.attn.weight"));
  EXPECT_EQ(hash_name("wte"), hash_name("wte"));
  EXPECT_NE(mix_keys(1, 2), mix_keys(2, 1));
}

// DISABLED: src/brigade/tensor/rng.cc has the offset basis as 1469598103934665603, the
// published 14695981039346656037 (0xcbf29ce484222325) with its last digit missing, so
// hash_name is a hash but not FNV-1a as rng.h says. Enable once rng.cc is fixed (this changes
// every stream key, hence every initialisation).
TEST(Philox, FnvHashKnownValues) {
  // FNV-1a 64 reference values: the empty string hashes to the offset basis; "a" is published.
  EXPECT_EQ(hash_name(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(hash_name("a"), 0xaf63dc4c8601ec8cull);
}

TEST(RandomUniform, RangeAndMean) {
  const int n = 100000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const float u = random_uniform(5, 6, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  // Mean of U(0,1) is 1/2 with standard error sqrt(1/12/n) ~ 9e-4; allow 5 sigma.
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
}

TEST(FillNormal, MomentsMatch) {
  const int64_t n = 200000;
  std::vector<float> x(n);
  for (auto [mean, stddev] : {std::pair{0.0f, 1.0f}, std::pair{2.0f, 0.5f}}) {
    fill_normal(x.data(), n, mean, stddev, 123, 456);
    double s = 0, s2 = 0;
    int64_t beyond2 = 0;
    for (float v : x) {
      s += v;
      s2 += (v - mean) * (v - mean);
      if (std::fabs(v - mean) > 2 * stddev) ++beyond2;
    }
    const double m = s / n, sd = std::sqrt(s2 / n);
    // Standard errors: mean sd/sqrt(n), std ~ sd/sqrt(2n); 5 sigma bounds.
    EXPECT_NEAR(m, mean, 5 * stddev / std::sqrt(n));
    EXPECT_NEAR(sd, stddev, 5 * stddev / std::sqrt(2.0 * n));
    // P(|Z| > 2) = 0.0455; binomial standard error ~ 4.7e-4.
    EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.0455, 5 * std::sqrt(0.0455 * 0.9545 / n));
  }
}

TEST(FillNormal, IndexIndependence) {
  const int64_t n = 1000;
  std::vector<float> whole(n), parts(n);
  fill_normal(whole.data(), n, 0.0f, 1.0f, 7, 8);
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{333}, n - 1, n}) {
    fill_normal(parts.data(), k, 0.0f, 1.0f, 7, 8, 0);
    fill_normal(parts.data() + k, n - k, 0.0f, 1.0f, 7, 8, k);
    EXPECT_EQ(parts, whole) << "split at " << k;
  }
  // A different key or seed gives a different stream.
  std::vector<float> other(n);
  fill_normal(other.data(), n, 0.0f, 1.0f, 7, 9);
  EXPECT_NE(other, whole);
  fill_normal(other.data(), n, 0.0f, 1.0f, 8, 8);
  EXPECT_NE(other, whole);
}

class PermutationTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(PermutationTest, IsABijection) {
  const uint64_t n = GetParam();
  for (uint64_t seed : {1ull, 2ull}) {
    RandomPermutation perm(n, seed, 99);
    ASSERT_EQ(perm.size(), n);
    std::vector<bool> seen(n, false);
    uint64_t fixed_points = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t j = perm(i);
      ASSERT_LT(j, n) << "i " << i;
      ASSERT_FALSE(seen[j]) << "value " << j << " produced twice";
      seen[j] = true;
      fixed_points += (j == i);
      ASSERT_EQ(perm(i), j) << "not deterministic";
    }
    // A shuffle, not the identity: a random permutation has ~1 fixed point on average.
    if (n >= 100) {
      EXPECT_LT(fixed_points, 10u) << "seed " << seed;
    }
  }
  if (n >= 7) {
    RandomPermutation a(n, 1, 99), b(n, 2, 99);
    uint64_t same = 0;
    for (uint64_t i = 0; i < n; ++i) same += (a(i) == b(i));
    EXPECT_LT(same, n) << "seeds 1 and 2 give the same permutation";
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, PermutationTest,
                         ::testing::Values(1u, 2u, 3u, 7u, 1000u, 1024u, (1u << 16) + 3));

}  // namespace
}  // namespace brigade
