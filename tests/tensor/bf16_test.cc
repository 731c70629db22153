// bf16 conversion: round to nearest even on crafted bit patterns, NaN/Inf, an exhaustive
// round trip of every bf16 value, and random floats against an independent reference that
// picks the nearer of the two neighbouring bf16 values in double arithmetic.
#include "brigade/tensor/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace brigade {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(Bf16, RoundToNearestEvenOnCraftedPatterns) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80u},                          // 1.0 exact
      {0x3f807fffu, 0x3f80u},                          // just below half an ulp: down
      {0x3f808000u, 0x3f80u},                          // exactly half, even below: down
      {0x3f808001u, 0x3f81u},                          // just above half: up
      {0x3f818000u, 0x3f82u},                          // exactly half, odd below: up to even
      {0x3f81ffffu, 0x3f82u}, {0xbf808000u, 0xbf80u},  // negative ties behave symmetrically
      {0xbf818000u, 0xbf82u}, {0x3fff8000u, 0x4000u},  // carry into the exponent
      {0x00000000u, 0x0000u}, {0x80000000u, 0x8000u},  // -0 keeps its sign
      {0x00008000u, 0x0000u},                          // subnormal tie to even (0)
      {0x00018000u, 0x0002u},                          // subnormal tie to even (2)
      {0x007fffffu, 0x0080u},  // largest subnormal rounds up to the smallest normal
      {0x7f7f7fffu, 0x7f7fu},  // largest bf16 stays
      {0x7f7f8000u, 0x7f80u},  // tie above the largest bf16 (odd) overflows to Inf
      {0x7f7fffffu, 0x7f80u},  // FLT_MAX rounds to Inf
      {0x7f800000u, 0x7f80u},  // +Inf
      {0xff800000u, 0xff80u},  // -Inf
  };
  for (const Case& c : cases) {
    EXPECT_EQ(float_to_bf16(from_bits(c.in)), c.out) << std::hex << "input 0x" << c.in;
  }
}

TEST(Bf16, NanStaysNan) {
  // Quiet, signalling (payload only in the low bits that truncation would drop), negative.
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xff800001u, 0x7fffffffu}) {
    const bf16 h = float_to_bf16(from_bits(bits));
    EXPECT_TRUE(std::isnan(bf16_to_float(h))) << std::hex << "input 0x" << bits;
    EXPECT_EQ(h & 0x8000u, (bits >> 16) & 0x8000u) << "sign kept";
  }
}

TEST(Bf16, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = bf16_to_float(static_cast<bf16>(h));
    ASSERT_EQ(to_bits(f), h << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
    } else {
      ASSERT_EQ(float_to_bf16(f), h) << std::hex << h;
    }
  }
}

// The bf16 nearest to f, ties to the even one, by comparing distances in double. Values past
// the largest bf16 compare against 2^128, where the next bf16 would be if the exponent went
// on; choosing it means overflow to Inf.
bf16 reference_round(float f) {
  const uint32_t bits = to_bits(f);
  const uint16_t below = static_cast<uint16_t>(bits >> 16);  // truncation: toward zero
  const uint16_t above = static_cast<uint16_t>(below + 1);   // next in magnitude
  const double x = std::fabs(static_cast<double>(f));
  const double lo = std::fabs(static_cast<double>(bf16_to_float(below)));
  const double hi = (above & 0x7fffu) == 0x7f80u
                        ? std::ldexp(1.0, 128)
                        : std::fabs(static_cast<double>(bf16_to_float(above)));
  if (x - lo < hi - x) return below;
  if (x - lo > hi - x) return above;
  return (below & 1u) ? above : below;
}

TEST(Bf16, RandomFloatsMatchReference) {
  std::mt19937 gen(7);
  int checked = 0;
  while (checked < 200000) {
    const uint32_t bits = gen();
    const float f = from_bits(bits);
    if (std::isnan(f) || std::isinf(f)) continue;
    ASSERT_EQ(float_to_bf16(f), reference_round(f)) << std::hex << "input 0x" << bits;
    ++checked;
  }
}

TEST(Bf16, ArrayConversionsMatchScalar) {
  std::vector<float> x = {0.0f, 1.0f, -2.5f, 3.14159f, 1e-40f, 6.5e4f, -1e30f};
  std::vector<bf16> h(x.size());
  std::vector<float> back(x.size());
  float_to_bf16(h.data(), x.data(), x.size());
  bf16_to_float(back.data(), h.data(), h.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], float_to_bf16(x[i]));
    EXPECT_EQ(back[i], bf16_to_float(h[i]));
    // Relative error of bf16 (8 significant bits) is at most u = 2^-8 for normal values.
    if (std::fabs(x[i]) > 1e-37f) {
      EXPECT_LE(std::fabs(back[i] - x[i]), std::ldexp(std::fabs(x[i]), -8));
    }
  }
}

// Every exponent and sign with varied significands, NaN payloads and infinities among them, and
// every rounding tie at zero, infinity and one.
std::vector<float> every_class_sweep() {
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 0x10001ull) x.push_back(from_bits(uint32_t(b)));
  for (uint32_t e : {0x00000000u, 0x7f800000u, 0x3f800000u}) {
    for (uint32_t low : {0x1u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0x7fffffu, 0x400000u}) {
      x.push_back(from_bits(e | low));
      x.push_back(from_bits(0x80000000u | e | low));
    }
  }
  x.push_back(from_bits(0x7f800000u));  // +inf
  x.push_back(from_bits(0xff800000u));  // -inf
  return x;
}

// The array conversion is branch-free (it vectorizes: every GEMM operand under bf16 precision
// goes through it); the same bits as the scalar one over a sweep of every exponent and sign with
// varied significands, NaN payloads and infinities among them, and every rounding tie.
TEST(Bf16, BranchFreeArrayConversionMatchesScalarOnEveryClass) {
  std::vector<float> x = every_class_sweep();
  std::vector<bf16> h(x.size());
  float_to_bf16(h.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], float_to_bf16(x[i])) << std::hex << "input 0x" << to_bits(x[i]);
  }
}

// round_to_bf16 keeps the rounded value as an f32: the bits of the scalar conversion there and
// back, over the same sweep (NaN payloads, infinities, every tie), and in place.
TEST(Bf16, RoundToBf16KeepsTheScalarConversionsBitsAsAFloat) {
  std::vector<float> x = every_class_sweep();
  std::vector<float> r(x.size());
  round_to_bf16(r.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(to_bits(r[i]), to_bits(bf16_to_float(float_to_bf16(x[i]))))
        << std::hex << "input 0x" << to_bits(x[i]);
  }
  round_to_bf16(x.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(to_bits(x[i]), to_bits(r[i]));
}

}  // namespace
}  // namespace brigade
