#include "brigade/train/model_flops.h"

#include "brigade/train/model_factory.h"

namespace brigade {

double train_flops_per_example(const ModelConfig& m, int64_t num_params) {
  if (m.kind == ModelKind::kCnn) return cnn_flops_per_example(cnn_config(m));
  if (m.kind != ModelKind::kGpt) return 6.0 * static_cast<double>(num_params);
  const double C = static_cast<double>(m.d_model), T = static_cast<double>(m.seq_len);
  double matmul_params = static_cast<double>(m.vocab) * C;  // the tied head
  for (int64_t l = 0; l < m.n_layer; ++l) {
    matmul_params += 4 * C * C;  // c_attn (3C x C) and attn.c_proj (C x C)
    const bool moe = m.n_experts > 0 && (l + 1) % m.moe_every == 0;
    matmul_params +=
        moe ? static_cast<double>(m.n_experts) * C + static_cast<double>(m.moe_top_k) * 8 * C * C
            : 8 * C * C;
  }
  const double per_token = 6 * matmul_params + 12 * static_cast<double>(m.n_layer) * T * C;
  return per_token * T;
}

}  // namespace brigade
