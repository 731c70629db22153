#include "brigade/model/moe/moe_router.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/matmul.h"
#include "brigade/kernels/cpu/softmax.h"
#include "brigade/kernels/cpu/topk_gate.h"

namespace brigade {

MoeRouter::MoeRouter(const MoeConfig& config, int64_t max_tokens)
    : C_(config.d_model), E_(config.n_experts), K_(config.top_k), max_tokens_(max_tokens) {
  config.validate();
  BRIGADE_CHECK(max_tokens >= 0) << "max_tokens " << max_tokens;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  logits_.resize(sz(max_tokens * E_));
  probs_.resize(sz(max_tokens * E_));
  dprobs_.resize(sz(max_tokens * E_));
  gate_.resize(sz(max_tokens * K_));
  expert_.resize(sz(max_tokens * K_));
  counts_.resize(sz(E_ * K_));
  prob_sums_.resize(sz(E_));
}

void MoeRouter::forward(const float* x, const float* router_w, int64_t N) {
  BRIGADE_CHECK(N >= 0 && N <= max_tokens_)
      << "router: " << N << " tokens, sized for " << max_tokens_;
  n_ = N;
  matmul_forward(logits_.data(), x, router_w, nullptr, N, C_, E_);
  softmax_forward(probs_.data(), logits_.data(), N, E_);
  topk_gate_forward(expert_.data(), gate_.data(), probs_.data(), N, E_, K_);
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(prob_sums_.begin(), prob_sums_.end(), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int s = 0; s < K_; ++s) ++counts_[expert_[n * K_ + s] * K_ + s];
    for (int64_t e = 0; e < E_; ++e) prob_sums_[e] += probs_[n * E_ + e];
  }
}

void MoeRouter::backward(float* dx, float* drouter_w, const float* x, const float* router_w,
                         const float* dgate, float aux_grad, const double* load_fraction,
                         int64_t n_total) {
  const int64_t N = n_;
  if (N == 0) return;
  // d aux / d p[n,e] = E f_e / n_total for every token (P_e is a plain mean).
  float* dp = dprobs_.data();
  for (int64_t e = 0; e < E_; ++e) {
    const float d = static_cast<float>(static_cast<double>(aux_grad) * E_ * load_fraction[e] /
                                       static_cast<double>(n_total));
    for (int64_t n = 0; n < N; ++n) dp[n * E_ + e] = d;
  }
  topk_gate_backward(dp, probs_.data(), expert_.data(), dgate, N, E_, K_);
  // The logits are no longer needed: their gradient takes their place.
  float* dlogits = logits_.data();
  std::fill(dlogits, dlogits + N * E_, 0.0f);
  softmax_backward(dlogits, probs_.data(), dp, N, E_);
  matmul_backward(dx, drouter_w, nullptr, dlogits, x, router_w, N, C_, E_);
}

}  // namespace brigade
