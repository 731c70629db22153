#pragma once
// The data-parallel step engine (train_engine.h): a whole Model on every rank, replicas agreed
// by a DpStrategy — DDP or a ZeRO stage (parallel.zero), or a low-communication method
// (sync.method, sync/replica_sync.h).
#include <memory>

#include "brigade/train/train_engine.h"
#include "brigade/train/training_loop.h"

namespace brigade {

// Builds the model, its strategy and the data loader of this rank's slice; dp: the plan's
// (job_plan.h), every trainer of the job.
std::unique_ptr<TrainEngine> make_dp_engine(TrainContext& ctx, int64_t dp);

}  // namespace brigade
