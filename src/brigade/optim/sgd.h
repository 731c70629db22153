#pragma once
// SGD with optional (Nesterov) momentum and L2 weight decay on the tensors whose ParamSpec
// asks for it (PyTorch's torch.optim.SGD semantics).
#include <vector>

#include "brigade/optim/optimizer.h"

namespace brigade {

struct SgdConfig {
  float momentum = 0.9f;  // 0: plain SGD, no state
  bool nesterov = false;
  float weight_decay = 0.0f;
};

class Sgd : public Optimizer {
 public:
  // The momentum buffer starts at zero for the flat range [begin, end) of layout; the tensors
  // freeze names (optim/trainable_mask.h) are never updated.
  Sgd(const SgdConfig& config, const ParamLayout& layout, int64_t begin, int64_t end,
      const std::vector<std::string>& freeze = {});

  void step(float* params, const float* grads, int64_t begin, int64_t end, float lr,
            int64_t step) override;
  std::vector<StateView> state_tensors() override;  // "sgd.momentum" unless momentum == 0

 private:
  SgdConfig config_;
  std::vector<float> momentum_;
};

}  // namespace brigade
