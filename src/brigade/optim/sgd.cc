#include "brigade/optim/sgd.h"

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/optim.h"

namespace brigade {

Sgd::Sgd(const SgdConfig& config, const ParamLayout& layout, int64_t begin, int64_t end,
         const std::vector<std::string>& freeze)
    : Optimizer(layout, begin, end, freeze), config_(config) {
  BRIGADE_CHECK(!config.nesterov || config.momentum > 0.0f) << "nesterov needs momentum";
  if (config_.momentum != 0.0f) momentum_.assign(static_cast<size_t>(end - begin), 0.0f);
}

void Sgd::step(float* params, const float* grads, int64_t begin, int64_t end, float lr,
               int64_t /*step*/) {
  BRIGADE_CHECK(begin_ <= begin && begin <= end && end <= end_)
      << "step on [" << begin << ", " << end << ") outside [" << begin_ << ", " << end_ << ")";
  SgdParams hp{
      .lr = lr, .momentum = config_.momentum, .weight_decay = 0.0f, .nesterov = config_.nesterov};
  for_each_segment(begin, end, [&](int64_t lo, int64_t hi, bool decay) {
    hp.weight_decay = decay ? config_.weight_decay : 0.0f;
    float* buf = momentum_.empty() ? nullptr : momentum_.data() + (lo - begin_);
    sgd_update(params + lo, grads + lo, buf, hi - lo, hp);
  });
}

std::vector<StateView> Sgd::state_tensors() {
  if (momentum_.empty()) return {};
  return {{"sgd.momentum", momentum_.data(), begin_, end_}};
}

}  // namespace brigade
