#include "brigade/train/engines.h"

#include "brigade/train/dp_engine.h"
#include "brigade/train/model_parallel_engine.h"

namespace brigade {

std::unique_ptr<TrainEngine> make_train_engine(TrainContext& ctx, const JobPlan& plan) {
  if (plan.model_parallel) return make_model_parallel_engine(ctx, plan.mesh);
  return make_dp_engine(ctx, plan.mesh.shape.dp);
}

}  // namespace brigade
