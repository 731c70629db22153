#pragma once
// What a GPT block calls for its mixture-of-experts MLP (gpt_block.h), so the same block code
// runs the single-process layer (moe_layer.h, every expert here) and the expert-parallel one
// (parallel/expert/ep_moe_layer.h, experts spread over an ep group). Either holds the routing and
// expert activations of the one forward it ran last, which its backward reads.
#include <cstdint>

#include "brigade/model/moe/moe_capacity.h"

namespace brigade {

class MoeMlp {
 public:
  virtual ~MoeMlp() = default;

  // x and out are (N,C); out is written. Returns the loss term aux_loss_coef * aux to add to the
  // task loss; stats() describe this forward (the ep group's union of tokens under expert
  // parallelism).
  virtual float forward(float* out, const float* x, int64_t N, const float* params) = 0;

  // Backward of the last forward (same x): dout (N,C) = d loss / d out, loss_grad = d loss /
  // d (the returned term). Accumulates dx (N,C) and the parameter gradients into grads.
  virtual void backward(float* dx, const float* dout, const float* x, float loss_grad,
                        const float* params, float* grads) = 0;

  virtual const MoeStats& stats() const = 0;
};

}  // namespace brigade
