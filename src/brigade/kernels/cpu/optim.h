#pragma once
// Optimizer update kernels on ranges of the flat buffers (a whole model, a ZeRO shard, a
// tensor). The optimizer classes in sync/ decide the ranges and the hyper-parameters.
#include <cstdint>

namespace brigade {

struct AdamWParams {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: p -= lr * wd * p
  int64_t step = 1;           // 1-based, for bias correction
};

// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mhat = m/(1-b1^t); vhat = v/(1-b2^t);
// p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p). All arrays are (n).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                  const AdamWParams& hp);

struct SgdParams {
  float lr = 0.1f;
  float momentum = 0.0f;  // 0 disables the buffer
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// g' = g + wd p; buf = momentum buf + g'; p -= lr * (nesterov ? g' + momentum buf : buf).
// With momentum 0, buf may be nullptr and p -= lr g'.
void sgd_update(float* param, const float* grad, float* buf, int64_t n, const SgdParams& hp);

// sum of x[i]^2 in double, for global gradient-norm clipping across ranges and ranks.
double sum_squares(const float* x, int64_t n);

// x[i] *= s
void scale_inplace(float* x, float s, int64_t n);

// true if every x[i] is finite
bool all_finite(const float* x, int64_t n);

}  // namespace brigade
