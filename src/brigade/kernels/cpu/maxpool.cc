// Max-pooling, one (H, W) plane at a time. The window's winner is data, so it is chosen with
// selects rather than branches (a mispredicted branch per comparison made this 5x slower). NaN
// must propagate, as in PyTorch, but testing for it in every comparison cost as much again, so
// a vectorised scan of each plane sends only planes that hold a NaN down the careful path.
#include "brigade/kernels/cpu/maxpool.h"

#include <limits>

#include "brigade/base/check.h"

namespace brigade {

namespace {

void check_shape(const Pool2dShape& s) {
  BRIGADE_CHECK(s.N >= 0 && s.C > 0 && s.window > 0 && s.stride > 0 && s.H >= s.window &&
                s.W >= s.window && s.H * s.W <= std::numeric_limits<int32_t>::max())
      << "maxpool2d N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W
      << " window=" << s.window << " stride=" << s.stride;
}

bool has_nan(const float* x, int64_t n) {
  int nan = 0;
  for (int64_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  return nan != 0;
}

// One plane; kNan: the plane may hold a NaN, which then wins its window (the first one does).
template <bool kNan>
void pool_plane(float* y, int32_t* at, const float* x, const Pool2dShape& s) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t oh = 0; oh < OH; ++oh) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t corner = oh * s.stride * s.W + ow * s.stride;
      int64_t best = corner;
      float best_value = x[corner];
      for (int64_t i = 0; i < s.window; ++i) {
        for (int64_t j = 0; j < s.window; ++j) {
          const int64_t k = corner + i * s.W + j;
          const float v = x[k];
          const bool take =
              kNan ? v > best_value || (v != v && best_value == best_value) : v > best_value;
          best = take ? k : best;
          best_value = take ? v : best_value;
        }
      }
      y[oh * OW + ow] = best_value;
      at[oh * OW + ow] = static_cast<int32_t>(best);
    }
  }
}

}  // namespace

void maxpool2d_forward(float* out, int32_t* argmax, const float* inp, const Pool2dShape& s) {
  check_shape(s);
  const int64_t P = s.out_h() * s.out_w();
  for (int64_t plane = 0; plane < s.N * s.C; ++plane) {
    const float* x = inp + plane * s.H * s.W;
    if (has_nan(x, s.H * s.W)) {
      pool_plane<true>(out + plane * P, argmax + plane * P, x, s);
    } else {
      pool_plane<false>(out + plane * P, argmax + plane * P, x, s);
    }
  }
}

void maxpool2d_backward(float* dinp, const float* dout, const int32_t* argmax,
                        const Pool2dShape& s) {
  check_shape(s);
  const int64_t P = s.out_h() * s.out_w();
  for (int64_t plane = 0; plane < s.N * s.C; ++plane) {
    float* dx = dinp + plane * s.H * s.W;
    const float* dy = dout + plane * P;
    const int32_t* at = argmax + plane * P;
    for (int64_t p = 0; p < P; ++p) dx[at[p]] += dy[p];
  }
}

}  // namespace brigade
