#include "brigade/model/gpt_config.h"

#include <string>

#include "brigade/base/error.h"

namespace brigade {

namespace {

void require_positive(const char* key, int64_t value) {
  if (value <= 0)
    throw ConfigError(std::string("model.") + key + " = " + std::to_string(value) +
                      ": must be > 0");
}

}  // namespace

void GptConfig::validate() const {
  require_positive("vocab", vocab);
  require_positive("seq_len", seq_len);
  require_positive("d_model", d_model);
  require_positive("n_layer", n_layer);
  require_positive("n_head", n_head);
  if (d_model % n_head != 0)
    throw ConfigError("model.n_head = " + std::to_string(n_head) +
                      ": must divide model.d_model = " + std::to_string(d_model));
  if (n_experts < 0)
    throw ConfigError("model.n_experts = " + std::to_string(n_experts) +
                      ": must be >= 0 (0 = dense MLPs)");
  if (lora_rank < 0)
    throw ConfigError("lora.rank = " + std::to_string(lora_rank) +
                      ": must be >= 0 (0 = no adapters)");
  if (lora()) {
    if (lora_targets == 0)
      throw ConfigError("lora.targets = []: lora.rank = " + std::to_string(lora_rank) +
                        " needs at least one layer to adapt (\"attn.c_attn\", ...)");
    if (!(lora_alpha > 0.0 && lora_alpha <= 1e6))
      throw ConfigError("lora.alpha = " + std::to_string(lora_alpha) + ": must be in (0, 1e6]");
    if (lora_rank > d_model)
      throw ConfigError("lora.rank = " + std::to_string(lora_rank) +
                        ": must be at most model.d_model = " + std::to_string(d_model) +
                        " (the smallest side of an adapted layer)");
    if (moe())
      throw ConfigError(
          "lora.rank = " + std::to_string(lora_rank) +
          " with model.n_experts = " + std::to_string(n_experts) +
          ": adapters are supported on dense GPT blocks only; use model.n_experts = 0");
  }
  if (!moe()) return;
  if (moe_every < 1 || moe_every > n_layer)
    throw ConfigError("model.moe_every = " + std::to_string(moe_every) +
                      ": must be in [1, model.n_layer = " + std::to_string(n_layer) + "]");
  moe_config().validate();  // n_experts, moe_top_k, capacity_factor, aux_loss_coef
}

}  // namespace brigade
