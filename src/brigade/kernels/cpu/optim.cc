// Optimizer update kernels: element-wise over a range of the flat buffers. Bias corrections
// and other per-call constants are computed once, in double, outside the loops.
#include "brigade/kernels/cpu/optim.h"

#include <cmath>
#include <cstring>

namespace brigade {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                  const AdamWParams& hp) {
  const double t = static_cast<double>(hp.step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), t));
  const float b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, eps = hp.eps, wd = hp.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1;
    const float vhat = vi / bc2;
    param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * param[i]);
  }
}

void sgd_update(float* param, const float* grad, float* buf, int64_t n, const SgdParams& hp) {
  const float lr = hp.lr, mu = hp.momentum, wd = hp.weight_decay;
  if (mu == 0.0f) {
    for (int64_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + wd * param[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + wd * param[i];
    const float b = mu * buf[i] + g;
    buf[i] = b;
    param[i] -= lr * (hp.nesterov ? g + mu * b : b);
  }
}

double sum_squares(const float* x, int64_t n) {
  // Independent partial sums let the compiler vectorise the reduction.
  constexpr int kLanes = 4;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double xi = x[i + l];
      acc[l] += xi * xi;
    }
  }
  double s = 0.0;
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

void scale_inplace(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

bool all_finite(const float* x, int64_t n) {
  // A float is Inf or NaN exactly when its exponent bits are all ones. Checking in chunks
  // keeps the inner loop branch-free (vectorised) while still stopping early.
  constexpr uint32_t kExp = 0x7f800000u;
  constexpr int64_t kChunk = 1024;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = start + kChunk < n ? start + kChunk : n;
    uint32_t bad = 0;
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], 4);
      bad |= static_cast<uint32_t>((bits & kExp) == kExp);
    }
    if (bad) return false;
  }
  return true;
}

}  // namespace brigade
