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

// Checks that config's model-parallel layout fits the joined group, before anything is
// created. Throws ConfigError (one process; a layout that does not divide the world).
HybridLayout model_parallel_layout(const Config& config, const ProcessGroup& group);

// Builds the mesh (collective), this rank's pipeline chunks, their optimizers and the executor.
std::unique_ptr<TrainEngine> make_model_parallel_engine(TrainContext& ctx, HybridLayout layout);

}  // namespace brigade
