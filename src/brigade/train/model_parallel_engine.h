#pragma once
// The model-parallel step engine (train_engine.h) of runs with parallel.tp * parallel.pp > 1:
// the GPT cut into pipeline stages (model/gpt_stage.h) of tensor-parallel shards, run by the
// pipeline executor, replicated over the dp axis. Layout, order of the parallelisms and what is
// supported: docs/parallelism.md, "Hybrid mesh".
#include <memory>

#include "brigade/train/hybrid_layout.h"
#include "brigade/train/train_engine.h"
#include "brigade/train/training_loop.h"

namespace brigade {

// Builds the mesh (collective), this rank's pipeline chunks, their optimizers and the executor;
// layout: the plan's (job_plan.h).
std::unique_ptr<TrainEngine> make_model_parallel_engine(TrainContext& ctx, HybridLayout layout);

}  // namespace brigade
