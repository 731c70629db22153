#include "brigade/parallel/expert/stage_grad_sync.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/optim.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/model/tp/tp_layout.h"

namespace brigade {

double stage_grad_squares(const GptStage& stage, const ParamLayout& norm_layout,
                          const TpContext& tp, Communicator* ep, int64_t base) {
  const float* g = stage.grads() + base;
  if (stage.expert_ranges().empty()) return sum_of_squares_full(tp, norm_layout, g);
  // MoE stages are tp = 1 (build_gpt_layout), so every tensor here is whole.
  BRIGADE_CHECK(!tp.active()) << "mixture-of-experts stages do not run under tensor parallelism";
  double dense = 0.0, expert = 0.0;
  for (const ParamSpec& s : norm_layout.specs()) {
    const double sum = sum_squares(g + s.offset, s.numel);
    const int64_t at = base + s.offset;
    const bool is_expert =
        std::any_of(stage.expert_ranges().begin(), stage.expert_ranges().end(),
                    [&](const ParamGroup& r) { return at >= r.begin && at < r.end; });
    (is_expert ? expert : dense) += sum;
  }
  if (ep != nullptr && ep->size() > 1) {
    float e = static_cast<float>(expert);
    ep->all_reduce(&e, 1, ReduceOp::kSum);
    expert = e;
  }
  return dense + expert;
}

}  // namespace brigade
