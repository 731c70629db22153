// LayerNorm over the last axis, formulas as in llm.c. With xhat = (x - mean) * rstd and
// g = weight * dout, the input gradient is rstd * (g - mean(g) - xhat * mean(g * xhat)).
// The variance is the biased one (divide by C), as in PyTorch's LayerNorm. A backend may compute
// it instead (train.kernels = "onednn": oneDNN's layer_normalization, pointwise_onednn.cc,
// measured faster); this is the kernel otherwise.
#include "brigade/kernels/cpu/layernorm.h"

#include <cmath>

#include "brigade/kernels/cpu/backend_registry.h"
#include "brigade/kernels/cpu/vec.h"

namespace brigade {

namespace {
constexpr float kLayerNormEps = 1e-5f;
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (const auto backend = detail::selected_backend_ops().layernorm_forward) {
    return backend(out, mean, rstd, inp, weight, bias, N, C);
  }
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float* o = out + n * C;
    const float m = detail::sum(x, C) / static_cast<float>(C);
    // Two passes (mean, then squared deviations) avoid E[x^2] - E[x]^2 cancellation.
    float acc[detail::kLanes] = {};
    int64_t c = 0;
    for (; c + detail::kLanes <= C; c += detail::kLanes) {
      for (int l = 0; l < detail::kLanes; ++l) {
        const float d = x[c + l] - m;
        acc[l] += d * d;
      }
    }
    float var = 0.0f;
    for (; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    for (int l = 0; l < detail::kLanes; ++l) var += acc[l];
    var /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + kLayerNormEps);
    for (c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (const auto backend = detail::selected_backend_ops().layernorm_backward) {
    return backend(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    float* dx = dinp + n * C;
    const float m = mean[n];
    const float s = rstd[n];
    // First pass: the two row means the input gradient needs.
    float acc_g[detail::kLanes] = {}, acc_gx[detail::kLanes] = {};
    int64_t c = 0;
    for (; c + detail::kLanes <= C; c += detail::kLanes) {
      for (int l = 0; l < detail::kLanes; ++l) {
        const float xhat = (x[c + l] - m) * s;
        const float g = weight[c + l] * d[c + l];
        acc_g[l] += g;
        acc_gx[l] += g * xhat;
      }
    }
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (; c < C; ++c) {
      const float xhat = (x[c] - m) * s;
      const float g = weight[c] * d[c];
      sum_g += g;
      sum_gx += g * xhat;
    }
    for (int l = 0; l < detail::kLanes; ++l) {
      sum_g += acc_g[l];
      sum_gx += acc_gx[l];
    }
    const float mean_g = sum_g / static_cast<float>(C);
    const float mean_gx = sum_gx / static_cast<float>(C);
    // Second pass: accumulate all three gradients.
    for (c = 0; c < C; ++c) {
      const float xhat = (x[c] - m) * s;
      const float g = weight[c] * d[c];
      dbias[c] += d[c];
      dweight[c] += xhat * d[c];
      dx[c] += s * (g - mean_g - xhat * mean_gx);
    }
  }
}

}  // namespace brigade
