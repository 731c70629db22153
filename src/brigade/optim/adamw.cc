#include "brigade/optim/adamw.h"

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/optim.h"

namespace brigade {

AdamW::AdamW(const AdamWConfig& config, const ParamLayout& layout, int64_t begin, int64_t end,
             const std::vector<std::string>& freeze)
    : Optimizer(layout, begin, end, freeze),
      config_(config),
      m_(static_cast<size_t>(end - begin), 0.0f),
      v_(static_cast<size_t>(end - begin), 0.0f) {}

void AdamW::step(float* params, const float* grads, int64_t begin, int64_t end, float lr,
                 int64_t step) {
  BRIGADE_CHECK(begin_ <= begin && begin <= end && end <= end_)
      << "step on [" << begin << ", " << end << ") outside [" << begin_ << ", " << end_ << ")";
  BRIGADE_CHECK(step >= 1) << "AdamW step is 1-based, got " << step;
  AdamWParams hp{.lr = lr,
                 .beta1 = config_.beta1,
                 .beta2 = config_.beta2,
                 .eps = config_.eps,
                 .weight_decay = 0.0f,
                 .step = step};
  for_each_segment(begin, end, [&](int64_t lo, int64_t hi, bool decay) {
    hp.weight_decay = decay ? config_.weight_decay : 0.0f;
    adamw_update(params + lo, grads + lo, m_.data() + (lo - begin_), v_.data() + (lo - begin_),
                 hi - lo, hp);
  });
}

std::vector<StateView> AdamW::state_tensors() {
  return {{"adamw.m", m_.data(), begin_, end_}, {"adamw.v", v_.data(), begin_, end_}};
}

}  // namespace brigade
