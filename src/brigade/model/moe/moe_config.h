#pragma once
// Configuration of a mixture-of-experts MLP (Switch Transformer, GShard, Mixtral): n_experts
// GPT-2 MLPs (C -> 4C GELU -> C) behind a softmax router that sends every token to its top_k
// experts.
#include <cstdint>

namespace brigade {

struct MoeConfig {
  int64_t d_model = 256;  // C (model.d_model)
  int64_t n_experts = 8;  // E (model.n_experts)
  int top_k = 1;          // 1 or 2 (model.moe_top_k)
  // Tokens an expert takes per forward: capacity = ceil(capacity_factor * N * top_k / E), N
  // the tokens routed together (one ep group's union under expert parallelism). Assignments
  // past it are dropped: they add 0 to the output (the residual carries the token). <= 0 means
  // dropless: every assignment is computed. (model.capacity_factor)
  double capacity_factor = 1.25;
  // Weight of the load-balancing loss E * sum_e f_e P_e added to the task loss
  // (model.aux_loss_coef; Switch uses 0.01).
  double aux_loss_coef = 0.01;

  // Throws ConfigError naming the key (model.n_experts, model.moe_top_k, ...).
  void validate() const;

  bool dropless() const { return capacity_factor <= 0.0; }
  // Per-expert capacity for n_tokens routed together; -1 when dropless.
  int64_t capacity(int64_t n_tokens) const;
};

}  // namespace brigade
