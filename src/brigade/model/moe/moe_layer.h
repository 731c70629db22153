#pragma once
// A mixture-of-experts MLP on one process: the router picks each token's top_k experts, the
// kept assignments are gathered into an expert-major buffer, each expert MLP runs on its rows,
// and the outputs are combined weighted by the gates. Every expert lives here; the
// expert-parallel version (parallel/expert/ep_moe_layer.h) runs the same router, capacity rule
// and expert MLPs with the experts spread over an ep group.
//
//   out[n] = sum over kept s of gate[n,s] * expert_{e(n,s)}(x[n])       (0 if all dropped)
//   loss term = aux_loss_coef * E * sum_e f_e P_e                        (moe_capacity.h)
//
// Parameters live in the caller's flat buffer at the offsets of add_moe_params(); forward and
// backward take the buffers as arguments and never allocate.
#include <cstdint>
#include <vector>

#include "brigade/model/moe/expert_mlp.h"
#include "brigade/model/moe/moe_capacity.h"
#include "brigade/model/moe/moe_config.h"
#include "brigade/model/moe/moe_dispatch.h"
#include "brigade/model/moe/moe_mlp.h"
#include "brigade/model/moe/moe_params.h"
#include "brigade/model/moe/moe_router.h"

namespace brigade {

class MoeLayer : public MoeMlp {
 public:
  // params must hold all n_experts experts. Buffers are sized for max_tokens tokens.
  MoeLayer(const MoeConfig& config, const MoeParams& params, int64_t max_tokens);

  // x and out are (N,C), N <= max_tokens; out is written. Returns the loss term
  // aux_loss_coef * aux to add to the task loss; stats() describe this forward.
  float forward(float* out, const float* x, int64_t N, const float* params) override;

  // Backward of the last forward (same x). dout (N,C) is d loss / d out; loss_grad is
  // d loss / d (the returned term), i.e. the loss scale. Accumulates dx (N,C) and grads.
  void backward(float* dx, const float* dout, const float* x, float loss_grad, const float* params,
                float* grads) override;

  const MoeStats& stats() const override { return stats_; }
  const MoeRouter& router() const { return router_; }
  const MoeDispatch& dispatch() const { return dispatch_; }
  const MoeConfig& config() const { return config_; }

 private:
  MoeConfig config_;
  MoeParams params_;
  MoeRouter router_;
  MoeDispatch dispatch_;
  ExpertMlps experts_;
  MoeStats stats_;
  std::vector<int64_t> starts_;                                   // (E,K)
  std::vector<double> load_fraction_;                             // (E)
  std::vector<float> rows_in_, rows_out_, drows_out_, drows_in_;  // (max_tokens*K, C)
  std::vector<float> dgate_;                                      // (max_tokens, K)
};

}  // namespace brigade
