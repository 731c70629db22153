#pragma once
// AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay, applied only to the
// tensors whose ParamSpec asks for it.
#include <vector>

#include "brigade/optim/optimizer.h"

namespace brigade {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW : public Optimizer {
 public:
  // State m and v start at zero for the flat range [begin, end) of layout; the tensors freeze
  // names (optim/trainable_mask.h) are never updated.
  AdamW(const AdamWConfig& config, const ParamLayout& layout, int64_t begin, int64_t end,
        const std::vector<std::string>& freeze = {});

  void step(float* params, const float* grads, int64_t begin, int64_t end, float lr,
            int64_t step) override;
  std::vector<StateView> state_tensors() override;  // "adamw.m", "adamw.v"

 private:
  AdamWConfig config_;
  std::vector<float> m_, v_;
};

}  // namespace brigade
