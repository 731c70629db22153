#pragma once
// The shape of a GPT-2 model (model.* keys of the config).
#include <cstdint>

#include "brigade/model/moe/moe_config.h"

namespace brigade {

struct GptConfig {
  int64_t vocab = 256;    // V
  int64_t seq_len = 256;  // T: the context length, also the size of wpe
  int64_t d_model = 256;  // C
  int64_t n_layer = 4;    // L
  int64_t n_head = 4;     // NH; must divide d_model
  // Mixture of experts (model/moe/, docs/parallelism.md): with n_experts > 0 every moe_every-th
  // block (blocks moe_every-1, 2 moe_every-1, ...) replaces its MLP by n_experts expert MLPs
  // behind a top-k softmax router. 0 keeps every block dense (the GPT-2 model, bitwise).
  int64_t n_experts = 0;          // E (model.n_experts)
  int moe_top_k = 1;              // 1 or 2 (model.moe_top_k)
  double capacity_factor = 1.25;  // <= 0: dropless (model.capacity_factor)
  double aux_loss_coef = 0.01;    // load-balancing loss weight (model.aux_loss_coef)
  int64_t moe_every = 1;          // (model.moe_every)
  // Activation recomputation (train.recompute = "block"): forward keeps only each block's input
  // and backward re-runs the block's forward before its backward. Gradients are bitwise the same.
  bool recompute_blocks = false;
  // LoRA adapters (model/lora.h, the [lora] keys): with lora_rank > 0 every linear layer of
  // lora_targets (kLora* bits) in every block gains lora_A (r, in) and lora_B (out, r),
  // scaled by lora_alpha / r. 0 = no adapters (the plain model, bitwise).
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;
  unsigned lora_targets = 0;

  // Throws ConfigError naming the field when a value is out of range.
  void validate() const;

  bool moe() const { return n_experts > 0; }
  bool lora() const { return lora_rank > 0; }
  float lora_scale() const {
    return static_cast<float>(lora_alpha / static_cast<double>(lora_rank));
  }
  // Whether block l has a mixture-of-experts MLP.
  bool moe_block(int64_t l) const { return moe() && (l + 1) % moe_every == 0; }
  // The MoE layer's configuration (valid when moe()).
  MoeConfig moe_config() const {
    return MoeConfig{.d_model = d_model,
                     .n_experts = n_experts,
                     .top_k = moe_top_k,
                     .capacity_factor = capacity_factor,
                     .aux_loss_coef = aux_loss_coef};
  }
};

}  // namespace brigade
