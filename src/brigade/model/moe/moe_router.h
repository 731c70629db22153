#pragma once
// The router of a MoE layer: logits = x @ W_r^T (no bias), probs = softmax(logits), each token's
// top_k experts and gates (kernels/cpu/topk_gate.h), and what the capacity and the
// load-balancing loss need from this rank's tokens: assignments per (expert, slot) and the sum
// of each expert's probability. Buffers are sized once for max_tokens; nothing allocates after.
#include <cstdint>
#include <vector>

#include "brigade/model/moe/moe_config.h"

namespace brigade {

class MoeRouter {
 public:
  MoeRouter(const MoeConfig& config, int64_t max_tokens);

  // x is (N,C), router_w (E,C), N <= max_tokens.
  void forward(const float* x, const float* router_w, int64_t N);

  int64_t tokens() const { return n_; }
  const int32_t* expert() const { return expert_.data(); }       // (N,K), first choice first
  const float* gate() const { return gate_.data(); }             // (N,K)
  const float* probs() const { return probs_.data(); }           // (N,E)
  const int64_t* counts() const { return counts_.data(); }       // (E,K) this rank's assignments
  const double* prob_sums() const { return prob_sums_.data(); }  // (E) sum over tokens of probs

  // dgate (N,K) = dL/dgate; aux_grad = dL/d aux, aux = E sum_e f_e P_e over n_total tokens with
  // load_fraction (E) = f_e. Accumulates dx (N,C) and drouter_w (E,C).
  void backward(float* dx, float* drouter_w, const float* x, const float* router_w,
                const float* dgate, float aux_grad, const double* load_fraction, int64_t n_total);

 private:
  int64_t C_, E_;
  int K_;
  int64_t max_tokens_;
  int64_t n_ = 0;
  std::vector<float> logits_, probs_, gate_, dprobs_;
  std::vector<int32_t> expert_;
  std::vector<int64_t> counts_;
  std::vector<double> prob_sums_;
};

}  // namespace brigade
