#pragma once
// Small inner-loop helpers shared by the CPU kernels.
//
// The library is built without -ffast-math, so the compiler may neither reorder a
// floating-point sum (no vectorised reductions) nor speculate the arms of a float select (no
// vectorised clamps), and expf/tanhf are library calls per element. These helpers are
// written for that: dot() and sum() keep kLanes independent partial sums that map onto SIMD
// registers (the result differs from a sequential sum only by rounding), and exp/tanh use
// GCC/Clang vector extensions, four floats at a time, so they are SIMD whatever -march says.
#include <cstdint>
#include <cstring>
#include <limits>

namespace brigade::detail {

inline constexpr int kLanes = 8;
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// sum_i a[i] * b[i]
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// sum_i a[i]
inline float sum(const float* __restrict a, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// ---- four floats at a time ----

using v4f = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4f v) {
  std::memcpy(p, &v, sizeof v);
}
inline v4f splat4(float x) {
  return v4f{} + x;
}

// exp(x) to about 1 ulp (relative error < 2e-7). Cody-Waite reduction x = n ln2 + r with
// |r| <= ln2/2, e^r by the Cephes expf polynomial, 2^n assembled in the exponent bits.
// Returns 0 for x < -87.33 (where expf turns subnormal), saturates at exp(88) = 1.65e38
// above 88, and keeps NaN.
inline v4f exp4(v4f x) {
  const v4f lo = splat4(-87.33654f), hi = splat4(88.0f);
  v4f xc = x < lo ? lo : x;  // NaN compares false and passes through
  xc = xc > hi ? hi : xc;
  // Round to nearest by adding and subtracting 1.5 * 2^23.
  const v4f round = splat4(12582912.0f);
  const v4f n = (xc * 1.44269504088896341f + round) - round;
  v4f r = xc - n * 0.693359375f;  // ln2 in two parts: n * 0.693359375 is exact
  r = r + n * 2.12194440e-4f;
  v4f p = splat4(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const v4i bits = (__builtin_convertvector(n, v4i) + 127) << 23;
  v4f pow2n;
  std::memcpy(&pow2n, &bits, sizeof pow2n);
  return x < lo ? v4f{} : p * pow2n;
}

// tanh(x) = 1 - 2 / (1 + e^{2x}): absolute error ~2e-7 (relative error near 0 is larger,
// harmless where it is used: GELU adds 1 to it).
inline v4f tanh4(v4f x) {
  return 1.0f - 2.0f / (1.0f + exp4(x + x));
}

inline float fast_exp(float x) {
  return exp4(splat4(x))[0];
}
inline float fast_tanh(float x) {
  return tanh4(splat4(x))[0];
}

// out[i] = exp(in[i] - shift). out may alias in (each group of four is read before written).
inline void exp_shifted(float* out, const float* in, float shift, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(out + i, exp4(load4(in + i) - shift));
  if (i < n) {  // the last 1-3 elements, through a padded group
    float tmp[4] = {};
    std::memcpy(tmp, in + i, static_cast<size_t>(n - i) * sizeof(float));
    store4(tmp, exp4(load4(tmp) - shift));
    std::memcpy(out + i, tmp, static_cast<size_t>(n - i) * sizeof(float));
  }
}

// sum_i exp(in[i] - shift) in double: float partial sums over short runs, so a long row
// (a 50k vocabulary) keeps full precision.
inline double sum_exp_shifted(const float* in, float shift, int64_t n) {
  constexpr int64_t kRun = 256;
  double total = 0.0;
  int64_t i = 0;
  while (i + 4 <= n) {
    const int64_t end = i + kRun < n ? i + kRun : n;
    v4f acc{};
    for (; i + 4 <= end; i += 4) acc += exp4(load4(in + i) - shift);
    total += static_cast<double>(acc[0]) + acc[1] + acc[2] + acc[3];
  }
  if (i < n) {  // the last 1-3 elements; the padding is -inf, whose exp is 0
    float tmp[4] = {-kInf, -kInf, -kInf, -kInf};
    std::memcpy(tmp, in + i, static_cast<size_t>(n - i) * sizeof(float));
    const v4f e = exp4(load4(tmp) - shift);
    total += static_cast<double>(e[0]) + e[1] + e[2] + e[3];
  }
  return total;
}

// max_i in[i], n >= 1 (NaN elements may or may not win; callers check finiteness elsewhere).
inline float max_of(const float* in, int64_t n) {
  float m = in[0];
  int64_t i = 0;
  if (n >= 4) {
    v4f mv = load4(in);
    for (i = 4; i + 4 <= n; i += 4) {
      const v4f x = load4(in + i);
      mv = x > mv ? x : mv;
    }
    m = mv[0];
    for (int l = 1; l < 4; ++l) m = mv[l] > m ? mv[l] : m;
  }
  for (; i < n; ++i) m = in[i] > m ? in[i] : m;
  return m;
}

}  // namespace brigade::detail
