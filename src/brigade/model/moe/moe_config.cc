#include "brigade/model/moe/moe_config.h"

#include <cmath>
#include <string>

#include "brigade/base/error.h"

namespace brigade {

void MoeConfig::validate() const {
  if (d_model <= 0)
    throw ConfigError("model.d_model = " + std::to_string(d_model) + ": must be > 0");
  if (n_experts < 1)
    throw ConfigError("model.n_experts = " + std::to_string(n_experts) + ": must be >= 1");
  if (top_k != 1 && top_k != 2)
    throw ConfigError("model.moe_top_k = " + std::to_string(top_k) + ": must be 1 or 2");
  if (top_k > n_experts)
    throw ConfigError("model.moe_top_k = " + std::to_string(top_k) +
                      ": must be <= model.n_experts = " + std::to_string(n_experts));
  if (!std::isfinite(capacity_factor))
    throw ConfigError("model.capacity_factor: must be finite (<= 0 means dropless)");
  if (!std::isfinite(aux_loss_coef) || aux_loss_coef < 0.0)
    throw ConfigError("model.aux_loss_coef = " + std::to_string(aux_loss_coef) +
                      ": must be finite and >= 0");
}

int64_t MoeConfig::capacity(int64_t n_tokens) const {
  if (dropless()) return -1;
  // Integer assignments over double: exact for any realistic N (< 2^53).
  const double want =
      capacity_factor * static_cast<double>(n_tokens) * top_k / static_cast<double>(n_experts);
  return static_cast<int64_t>(std::ceil(want));
}

}  // namespace brigade
