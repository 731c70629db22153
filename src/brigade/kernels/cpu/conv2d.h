#pragma once
// 2-D convolution (cross-correlation, as PyTorch's Conv2d) over NCHW tensors, by im2col and one
// gemm() per pass (gemm_backend.h: oneDNN or OpenBLAS). Backward accumulates into its gradient
// outputs, as every backward kernel does (matmul.h). The kernels allocate nothing: the caller
// passes scratch sized by Conv2dShape for its largest batch.
#include <cstdint>

namespace brigade {

// One convolution: input (N, C, H, W), weight (OC, C, KH, KW), output (N, OC, OH, OW) with
// OH = (H + 2 pad - KH) / stride + 1 (the windows that fit; zero padding on every side).
struct Conv2dShape {
  int64_t N = 1, C = 1, H = 1, W = 1;  // input
  int64_t OC = 1, KH = 1, KW = 1;      // output channels, kernel
  int64_t stride = 1, pad = 0;

  int64_t out_h() const { return (H + 2 * pad - KH) / stride + 1; }
  int64_t out_w() const { return (W + 2 * pad - KW) / stride + 1; }
  int64_t patch() const { return C * KH * KW; }  // fan-in of one output element
  int64_t inp_numel() const { return N * C * H * W; }
  int64_t out_numel() const { return N * OC * out_h() * out_w(); }
  int64_t weight_numel() const { return OC * patch(); }
  // Scratch of the im2col matrix (C*KH*KW, N*OH*OW).
  int64_t col_numel() const { return patch() * N * out_h() * out_w(); }
};

// out = conv(inp, weight) + bias.
// out is (N,OC,OH,OW), inp (N,C,H,W), weight (OC,C,KH,KW), bias (OC) or nullptr.
// col (s.col_numel()) receives im2col(inp), which conv2d_backward reads for the weight gradient;
// tmp (s.out_numel()) is scratch for the product in (OC, N, OH, OW) order.
void conv2d_forward(float* out, float* col, float* tmp, const float* inp, const float* weight,
                    const float* bias, const Conv2dShape& s);

// dinp += conv^T(dout, weight); dweight += dout (x) inp; dbias += dout summed over (N, OH, OW).
// Any of dinp, dweight, dbias may be nullptr to skip it. col is conv2d_forward's im2col of the
// same inp (read only for dweight); weight is read only for dinp. tmp (s.out_numel()) is scratch;
// dcol (s.col_numel()) is scratch for dinp and may be nullptr without it.
void conv2d_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* col,
                     const float* weight, float* tmp, float* dcol, const Conv2dShape& s);

}  // namespace brigade
