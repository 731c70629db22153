// Convolution as a GEMM. im2col lays the input out as col (C*KH*KW, N*OH*OW): row (c, kh, kw)
// holds, for every output position (n, oh, ow), the input pixel that weight[., c, kh, kw]
// multiplies there (0 over the padding). Then
//   forward    out (OC, N*P)  = weight (OC, C*KH*KW) @ col
//   dweight    (OC, C*KH*KW) += dout (OC, N*P) @ col^T
//   dinp       dcol = weight^T @ dout, scattered back by col2im (the adjoint of im2col)
// with P = OH*OW. The whole batch is one product whose long side is N*P, so small channel counts
// (6 or 16) still give the GEMM a wide, vectorisable dimension; the price is a transpose between
// NCHW and (OC, N, P) on each side, O(N*OC*P), small next to the product's O(N*OC*P*C*KH*KW).
#include "brigade/kernels/cpu/conv2d.h"

#include <algorithm>
#include <cstring>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/gemm_backend.h"
#include "brigade/kernels/cpu/vec.h"

namespace brigade {

namespace {

// The output columns [lo, hi) whose input column ow * stride - pad + kw lies inside [0, W).
void valid_columns(const Conv2dShape& s, int64_t kw, int64_t* lo, int64_t* hi) {
  const int64_t first = s.pad - kw;           // ow * stride must be >= first
  const int64_t last = s.W - 1 + s.pad - kw;  // ... and <= last
  *hi = last < 0 ? 0 : std::min(s.out_w(), last / s.stride + 1);
  *lo = first <= 0 ? 0 : std::min(*hi, (first + s.stride - 1) / s.stride);
}

// Calls row(col_row, inp_row, lo, hi, kw) for every (row of col, image, output row), with the
// offsets of that stretch of col and of the input row it reads (-1 over vertical padding).
// Inlined into both users, so the per-row work is a few plain loops the compiler vectorises.
template <typename Row>
inline void for_each_col_row(const Conv2dShape& s, Row&& row) {
  const int64_t OH = s.out_h(), OW = s.out_w(), P = OH * OW, NP = s.N * P;
  for (int64_t c = 0; c < s.C; ++c) {
    for (int64_t kh = 0; kh < s.KH; ++kh) {
      for (int64_t kw = 0; kw < s.KW; ++kw) {
        int64_t lo, hi;
        valid_columns(s, kw, &lo, &hi);
        const int64_t r = (c * s.KH + kh) * s.KW + kw;
        for (int64_t n = 0; n < s.N; ++n) {
          const int64_t plane = (n * s.C + c) * s.H * s.W;
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t ih = oh * s.stride - s.pad + kh;
            const int64_t inp_row = ih < 0 || ih >= s.H ? -1 : plane + ih * s.W;
            row(r * NP + n * P + oh * OW, inp_row, lo, hi, kw);
          }
        }
      }
    }
  }
}

void im2col(float* __restrict col, const float* __restrict inp, const Conv2dShape& s) {
  const int64_t OW = s.out_w(), stride = s.stride;
  for_each_col_row(s, [&](int64_t col_row, int64_t inp_row, int64_t lo, int64_t hi, int64_t kw) {
    float* __restrict dst = col + col_row;
    if (inp_row < 0) {
      for (int64_t ow = 0; ow < OW; ++ow) dst[ow] = 0.0f;
      return;
    }
    const float* __restrict src = inp + inp_row - s.pad + kw;  // src[ow * stride]: column iw
    for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = 0.0f;
    if (stride == 1) {
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * stride];
    }
    for (int64_t ow = hi; ow < OW; ++ow) dst[ow] = 0.0f;
  });
}

void col2im(float* __restrict dinp, const float* __restrict dcol, const Conv2dShape& s) {
  const int64_t stride = s.stride;
  for_each_col_row(s, [&](int64_t col_row, int64_t inp_row, int64_t lo, int64_t hi, int64_t kw) {
    if (inp_row < 0) return;  // padding has no gradient
    const float* __restrict src = dcol + col_row;
    float* __restrict dst = dinp + inp_row - s.pad + kw;
    if (stride == 1) {
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += src[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) dst[ow * stride] += src[ow];
    }
  });
}

void check_shape(const Conv2dShape& s) {
  BRIGADE_CHECK(s.N >= 0 && s.C > 0 && s.H > 0 && s.W > 0 && s.OC > 0 && s.KH > 0 && s.KW > 0 &&
                s.stride > 0 && s.pad >= 0 && s.H + 2 * s.pad >= s.KH && s.W + 2 * s.pad >= s.KW)
      << "conv2d N=" << s.N << " C=" << s.C << " H=" << s.H << " W=" << s.W << " OC=" << s.OC
      << " KH=" << s.KH << " KW=" << s.KW << " stride=" << s.stride << " pad=" << s.pad;
}

}  // namespace

void conv2d_forward(float* out, float* col, float* tmp, const float* inp, const float* weight,
                    const float* bias, const Conv2dShape& s) {
  check_shape(s);
  if (s.N == 0) return;
  const int64_t P = s.out_h() * s.out_w(), NP = s.N * P, K = s.patch();
  im2col(col, inp, s);
  // tmp (OC, N*P) = weight (OC, K) @ col (K, N*P)
  gemm(false, false, s.OC, NP, K, 1.0f, weight, K, col, NP, 0.0f, tmp, NP);
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t oc = 0; oc < s.OC; ++oc) {
      const float* src = tmp + oc * NP + n * P;
      float* dst = out + (n * s.OC + oc) * P;
      const float b = bias ? bias[oc] : 0.0f;
      for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + b;
    }
  }
}

void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* col,
                     const float* weight, float* tmp, float* dcol, const Conv2dShape& s) {
  check_shape(s);
  BRIGADE_CHECK(dinp == nullptr || dcol != nullptr) << "conv2d_backward: dinp needs dcol scratch";
  if (s.N == 0) return;
  const int64_t P = s.out_h() * s.out_w(), NP = s.N * P, K = s.patch();
  // tmp (OC, N*P) = dout (N, OC, P) with the first two axes swapped; dbias sums its rows.
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t oc = 0; oc < s.OC; ++oc) {
      std::memcpy(tmp + oc * NP + n * P, dout + (n * s.OC + oc) * P,
                  static_cast<size_t>(P) * sizeof(float));
    }
  }
  if (dbias) {
    for (int64_t oc = 0; oc < s.OC; ++oc) dbias[oc] += detail::sum(tmp + oc * NP, NP);
  }
  if (dweight) {
    // dweight (OC, K) += tmp (OC, N*P) @ col (K, N*P)^T
    gemm(false, true, s.OC, K, NP, 1.0f, tmp, NP, col, NP, 1.0f, dweight, K);
  }
  if (dinp) {
    // dcol (K, N*P) = weight (OC, K)^T @ tmp (OC, N*P)
    gemm(true, false, K, NP, s.OC, 1.0f, weight, K, tmp, NP, 0.0f, dcol, NP);
    col2im(dinp, dcol, s);
  }
}

}  // namespace brigade
