#pragma once
// bfloat16 storage: the top 16 bits of an IEEE float. Conversion rounds to nearest even;
// NaN stays NaN. bf16 is for wire payloads, checkpoints and, under train.precision = "bf16", the
// operands of GEMMs (gemm_backend.h); everything else computes in f32.
#include <cstdint>
#include <cstring>

namespace brigade {

using bf16 = uint16_t;

inline bf16 float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) {
    return static_cast<bf16>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16>((bits + rounding) >> 16);
}

inline float bf16_to_float(bf16 h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void float_to_bf16(bf16* out, const float* in, int64_t n);
void bf16_to_float(float* out, const bf16* in, int64_t n);
// out[i] = bf16_to_float(float_to_bf16(in[i])): each value rounded to the nearest bf16, kept as
// an f32 (exactly representable), for GEMMs that take bf16 operands on f32 hardware.
void round_to_bf16(float* out, const float* in, int64_t n);

}  // namespace brigade
