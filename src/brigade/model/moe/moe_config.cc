#include "brigade/model/moe/moe_config.h"

#include <fmt/format.h>

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
  // !(x <= hi) rather than x > hi: NaN fails every comparison and must fail the check too.
  if (!std::isfinite(capacity_factor) || !(capacity_factor <= 1e6))
    throw ConfigError(fmt::format(
        "model.capacity_factor = {}: must be finite and at most 1e6 (<= 0 means dropless)",
        capacity_factor));
  if (!std::isfinite(aux_loss_coef) || !(aux_loss_coef >= 0.0))
    throw ConfigError(
        fmt::format("model.aux_loss_coef = {}: must be finite and >= 0", aux_loss_coef));
}

int64_t MoeConfig::capacity(int64_t n_tokens) const {
  if (dropless()) return -1;
  // Integer assignments over double: exact for any realistic N (< 2^53).
  const double want =
      capacity_factor * static_cast<double>(n_tokens) * top_k / static_cast<double>(n_experts);
  return static_cast<int64_t>(std::ceil(want));
}

}  // namespace brigade
