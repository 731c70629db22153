#include "brigade/kernels/cpu/encoder.h"

#include "brigade/base/check.h"

namespace brigade {

void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                     int64_t B, int64_t T, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int32_t tok = tokens[b * T + t];
      // The data layer validates token ids against the vocabulary; this guards the index.
      BRIGADE_CHECK(tok >= 0) << "negative token id " << tok << " at (" << b << "," << t << ")";
      float* o = out + (b * T + t) * C;
      const float* e = wte + static_cast<int64_t>(tok) * C;
      const float* p = wpe + t * C;
      for (int64_t c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                      int64_t T, int64_t C) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int32_t tok = tokens[b * T + t];
      BRIGADE_CHECK(tok >= 0) << "negative token id " << tok << " at (" << b << "," << t << ")";
      const float* d = dout + (b * T + t) * C;
      float* de = dwte + static_cast<int64_t>(tok) * C;
      float* dp = dwpe + t * C;
      for (int64_t c = 0; c < C; ++c) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
  }
}

}  // namespace brigade
