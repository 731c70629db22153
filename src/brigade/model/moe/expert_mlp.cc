#include "brigade/model/moe/expert_mlp.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/gelu.h"
#include "brigade/kernels/cpu/matmul.h"

namespace brigade {

ExpertMlps::ExpertMlps(int64_t d_model, int64_t max_rows) : C_(d_model), max_rows_(max_rows) {
  const size_t n = static_cast<size_t>(max_rows * 4 * d_model);
  h_.resize(n);
  a_.resize(n);
  da_.resize(n);
  dh_.resize(n);
}

void ExpertMlps::forward(float* out, const float* in, const int64_t* row_begin,
                         const std::vector<ExpertParams>& experts, const float* params) {
  const int64_t C = C_, H = 4 * C_;
  BRIGADE_CHECK(row_begin[experts.size()] <= max_rows_)
      << row_begin[experts.size()] << " expert rows, sized for " << max_rows_;
  for (size_t j = 0; j < experts.size(); ++j) {
    const int64_t r0 = row_begin[j], M = row_begin[j + 1] - r0;
    if (M == 0) continue;
    const ExpertParams& w = experts[j];
    float* h = h_.data() + r0 * H;
    float* a = a_.data() + r0 * H;
    matmul_forward(h, in + r0 * C, params + w.fc_w, params + w.fc_b, M, C, H);
    gelu_forward(a, h, M * H);
    matmul_forward(out + r0 * C, a, params + w.proj_w, params + w.proj_b, M, H, C);
  }
}

void ExpertMlps::backward(float* din, const float* dout, const float* in, const int64_t* row_begin,
                          const std::vector<ExpertParams>& experts, const float* params,
                          float* grads) {
  const int64_t C = C_, H = 4 * C_;
  const int64_t rows = row_begin[experts.size()];
  std::fill(din, din + rows * C, 0.0f);
  for (size_t j = 0; j < experts.size(); ++j) {
    const int64_t r0 = row_begin[j], M = row_begin[j + 1] - r0;
    if (M == 0) continue;
    const ExpertParams& w = experts[j];
    float* da = da_.data();
    float* dh = dh_.data();
    std::fill(da, da + M * H, 0.0f);
    std::fill(dh, dh + M * H, 0.0f);
    matmul_backward(da, grads + w.proj_w, grads + w.proj_b, dout + r0 * C, a_.data() + r0 * H,
                    params + w.proj_w, M, H, C);
    gelu_backward(dh, h_.data() + r0 * H, da, M * H);
    matmul_backward(din + r0 * C, grads + w.fc_w, grads + w.fc_b, dh, in + r0 * C, params + w.fc_w,
                    M, C, H);
  }
}

}  // namespace brigade
