#include "brigade/kernels/cpu/row_gather.h"

#include "brigade/kernels/cpu/vec.h"

namespace brigade {

void gather_rows(float* out, const float* inp, const int32_t* rows, const float* scale, int64_t M,
                 int64_t C) {
  for (int64_t i = 0; i < M; ++i) {
    const float* src = inp + static_cast<int64_t>(rows[i]) * C;
    float* dst = out + i * C;
    const float s = scale ? scale[i] : 1.0f;
    for (int64_t c = 0; c < C; ++c) dst[c] = src[c] * s;
  }
}

void scatter_add_rows(float* out, const float* inp, const int32_t* rows, const float* scale,
                      int64_t M, int64_t C) {
  for (int64_t i = 0; i < M; ++i) {
    float* dst = out + static_cast<int64_t>(rows[i]) * C;
    const float* src = inp + i * C;
    const float s = scale ? scale[i] : 1.0f;
    for (int64_t c = 0; c < C; ++c) dst[c] += src[c] * s;
  }
}

void rows_dot(float* dot, const float* a, const int32_t* rows, const float* b, int64_t M,
              int64_t C) {
  for (int64_t i = 0; i < M; ++i)
    dot[i] = detail::dot(a + static_cast<int64_t>(rows[i]) * C, b + i * C, C);
}

}  // namespace brigade
