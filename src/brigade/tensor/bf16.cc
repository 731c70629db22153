#include "brigade/tensor/bf16.h"

namespace brigade {

// The scalar function's rounding without its branch, so that the loop vectorizes (it converts
// every GEMM operand under train.precision = "bf16"); the same bits for every input.
void float_to_bf16(bf16* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], 4);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    out[i] = static_cast<bf16>(nan ? quiet_nan : rounded);
  }
}

void round_to_bf16(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], 4);
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    const uint32_t quiet_nan = (bits & 0xffff0000u) | 0x00400000u;
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t result = nan ? quiet_nan : rounded;
    std::memcpy(&out[i], &result, 4);
  }
}

void bf16_to_float(float* out, const bf16* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

}  // namespace brigade
