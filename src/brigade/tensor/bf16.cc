#include "brigade/tensor/bf16.h"

namespace brigade {

void float_to_bf16(bf16* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

void bf16_to_float(float* out, const bf16* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

}  // namespace brigade
