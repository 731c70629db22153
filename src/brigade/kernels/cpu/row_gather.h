#pragma once
// Row gathers and scatters by index: how a mixture-of-experts layer moves token rows into the
// per-expert buffers and back (dispatch and combine), and their backward passes.
#include <cstdint>

namespace brigade {

// out (M,C): out[i] = inp[rows[i]] * (scale ? scale[i] : 1). inp is (N,C) for any N > max(rows).
void gather_rows(float* out, const float* inp, const int32_t* rows, const float* scale, int64_t M,
                 int64_t C);

// out[rows[i]] += inp[i] * (scale ? scale[i] : 1) for i in [0, M), in order of i. inp is (M,C).
void scatter_add_rows(float* out, const float* inp, const int32_t* rows, const float* scale,
                      int64_t M, int64_t C);

// dot (M): dot[i] = <a[rows[i]], b[i]>; a is (N,C), b is (M,C). The backward of
// scatter_add_rows with respect to scale. WRITES dot.
void rows_dot(float* dot, const float* a, const int32_t* rows, const float* b, int64_t M,
              int64_t C);

}  // namespace brigade
