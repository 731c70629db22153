#pragma once
// 2-D max-pooling over NCHW tensors (PyTorch's MaxPool2d without padding, floor mode). Forward
// saves where each maximum came from, so backward routes each gradient to that one input.
#include <cstdint>

namespace brigade {

// Windows of window x window inputs, stride apart: OH = (H - window) / stride + 1.
struct Pool2dShape {
  int64_t N = 1, C = 1, H = 1, W = 1;  // input
  int64_t window = 2, stride = 2;

  int64_t out_h() const { return (H - window) / stride + 1; }
  int64_t out_w() const { return (W - window) / stride + 1; }
  int64_t inp_numel() const { return N * C * H * W; }
  int64_t out_numel() const { return N * C * out_h() * out_w(); }
};

// out[n,c,oh,ow] = max of inp[n,c] over the window at (oh * stride, ow * stride).
// out and argmax are (N,C,OH,OW), inp (N,C,H,W). argmax gets the index in the (H,W) plane of
// the maximum: the first in row-major order on ties, a NaN if there is one (so NaN propagates).
void maxpool2d_forward(float* out, int32_t* argmax, const float* inp, const Pool2dShape& s);

// dinp[n,c][argmax[n,c,oh,ow]] += dout[n,c,oh,ow]. dinp (N,C,H,W), dout and argmax (N,C,OH,OW).
void maxpool2d_backward(float* dinp, const float* dout, const int32_t* argmax,
                        const Pool2dShape& s);

}  // namespace brigade
