#include "brigade/parallel/expert/stage_grad_sync.h"

#include <algorithm>

#include "brigade/base/check.h"
#include "brigade/kernels/cpu/optim.h"
#include "brigade/model/gpt_stage.h"
#include "brigade/model/tp/tp_layout.h"

namespace brigade {

namespace {

void average_ranges(float* grads, const std::vector<ParamGroup>& ranges, Communicator& comm,
                    int64_t bucket_floats) {
  if (comm.size() == 1) return;
  for (const ParamGroup& r : ranges) {
    for (int64_t at = r.begin; at < r.end; at += bucket_floats)
      comm.all_reduce(grads + at, std::min(bucket_floats, r.end - at), ReduceOp::kAvg);
  }
}

}  // namespace

void average_stage_grads(GptStage& stage, Communicator& dp, Communicator& replicas,
                         int64_t bucket_floats) {
  BRIGADE_CHECK(bucket_floats > 0) << "bucket_floats " << bucket_floats;
  average_ranges(stage.grads(), stage.expert_ranges(), dp, bucket_floats);
  average_ranges(stage.grads(), stage.dense_ranges(), replicas, bucket_floats);
}

double stage_grad_squares(const GptStage& stage, const ParamLayout& norm_layout,
                          const TpContext& tp, Communicator* ep) {
  if (stage.expert_ranges().empty()) return sum_of_squares_full(tp, norm_layout, stage.grads());
  // MoE stages are tp = 1 (build_gpt_layout), so every tensor here is whole.
  BRIGADE_CHECK(!tp.active()) << "mixture-of-experts stages do not run under tensor parallelism";
  const float* g = stage.grads();
  double dense = 0.0, expert = 0.0;
  for (const ParamSpec& s : norm_layout.specs()) {
    const double sum = sum_squares(g + s.offset, s.numel);
    const bool is_expert =
        std::any_of(stage.expert_ranges().begin(), stage.expert_ranges().end(),
                    [&](const ParamGroup& r) { return s.offset >= r.begin && s.offset < r.end; });
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
