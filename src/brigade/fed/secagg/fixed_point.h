#pragma once
// The fixed-point code secure aggregation sums in: masks are uniform mod 2^32, so updates are
// summed as uint32, and a real value x becomes
//
//   q = round(clamp(x, -clip, clip) * scale)  as int32 two's complement, scale = M / clip
//   M = floor((2^31 - 1) / max_clients)        the largest |q| one client may send
//
// A sum of at most max_clients such values lies in [-(2^31 - 1), 2^31 - 1], so read back as an
// int32 it is exact: the mod 2^32 wrap of the masked sum never makes it ambiguous. The step is
// 1 / scale = clip / M (clip = 1, 10 clients: 4.7e-9; 255 clients: 1.2e-7, still below an f32
// ulp at 1), and quantising one value is off by at most half a step. Values past the clip bound
// are clipped (counted, so a client can say how many): pick clip from the update norms a round
// expects, max_clients >= the clients a round may sum (the roster size; the federation size
// keeps the scale the same across rounds).
#include <cstdint>
#include <optional>
#include <string>

namespace brigade::secagg {

struct FixedPoint {
  float clip = 1.0f;        // |x| above this is clipped; finite and > 0
  int64_t max_clients = 0;  // the most values one sum may hold; 1 .. 2^31 - 1

  // M: the largest magnitude of one quantised value.
  int64_t max_magnitude() const {
    return max_clients > 0 ? ((int64_t{1} << 31) - 1) / max_clients : 0;
  }
  // scale = M / clip: quantised units per real unit.
  double scale() const { return static_cast<double>(max_magnitude()) / clip; }
};

// Whether `fixed` is usable; if not, *why names the field, its value and what is allowed.
bool validate_fixed_point(const FixedPoint& fixed, std::string* why);

// out[i] = round(clamp(x[i], -clip, clip) * scale) mod 2^32, for x (n). Returns how many values
// were clipped; nullopt (and why) when a value is not finite, leaving out unspecified.
std::optional<int64_t> quantize(const float* x, int64_t n, const FixedPoint& fixed, uint32_t* out,
                                std::string* why);

// The real value of a sum of at most max_clients quantised values: int32(sum) / scale.
double fixed_to_real(uint32_t sum, const FixedPoint& fixed);

// out[i] = fixed_to_real(sum[i]) rounded to f32, for sum (n).
void dequantize_sum(const uint32_t* sum, int64_t n, const FixedPoint& fixed, float* out);

}  // namespace brigade::secagg
