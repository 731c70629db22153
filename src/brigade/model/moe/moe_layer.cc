#include "brigade/model/moe/moe_layer.h"

#include "brigade/base/check.h"

namespace brigade {

MoeLayer::MoeLayer(const MoeConfig& config, const MoeParams& params, int64_t max_tokens)
    : config_(config),
      params_(params),
      router_(config, max_tokens),
      dispatch_(config, max_tokens),
      experts_(config.d_model, max_tokens * config.top_k) {
  BRIGADE_CHECK(params.expert_begin == 0 && params.expert_end == config.n_experts)
      << "MoeLayer holds every expert; got [" << params.expert_begin << ", " << params.expert_end
      << ") of " << config.n_experts;
  const int64_t E = config.n_experts, K = config.top_k, C = config.d_model;
  const auto sz = [](int64_t n) { return static_cast<size_t>(n); };
  starts_.resize(sz(E * K));
  load_fraction_.resize(sz(E));
  stats_.load.resize(sz(E));
  stats_.kept.resize(sz(E));
  for (auto* v : {&rows_in_, &rows_out_, &drows_out_, &drows_in_})
    v->resize(sz(max_tokens * K * C));
  dgate_.resize(sz(max_tokens * K));
}

float MoeLayer::forward(float* out, const float* x, int64_t N, const float* params) {
  const int64_t E = config_.n_experts;
  const int K = config_.top_k;
  router_.forward(x, params + params_.router_w, N);
  // One process routes all the tokens: a single "rank" in the priority order.
  assignment_starts(router_.counts(), 1, 0, E, K, starts_.data());
  const int64_t capacity = config_.capacity(N);
  dispatch_.plan(router_.expert(), router_.gate(), N, starts_.data(), capacity);
  dispatch_.gather(rows_in_.data(), x);
  experts_.forward(rows_out_.data(), rows_in_.data(), dispatch_.row_begin(), params_.experts,
                   params);
  dispatch_.combine(out, rows_out_.data());
  summarize_routing(router_.counts(), router_.prob_sums(), E, K, N, capacity, stats_,
                    load_fraction_.data());
  return static_cast<float>(config_.aux_loss_coef * stats_.aux_loss);
}

void MoeLayer::backward(float* dx, const float* dout, const float* x, float loss_grad,
                        const float* params, float* grads) {
  dispatch_.combine_backward(dgate_.data(), drows_out_.data(), dout, rows_out_.data());
  experts_.backward(drows_in_.data(), drows_out_.data(), rows_in_.data(), dispatch_.row_begin(),
                    params_.experts, params, grads);
  dispatch_.gather_backward(dx, drows_in_.data());
  const float aux_grad = static_cast<float>(config_.aux_loss_coef * loss_grad);
  router_.backward(dx, grads + params_.router_w, x, params + params_.router_w, dgate_.data(),
                   aux_grad, load_fraction_.data(), router_.tokens());
}

}  // namespace brigade
