#pragma once
// The data-parallel step engine (train_engine.h): a whole Model on every rank, replicas agreed
// by a DpStrategy — DDP or a ZeRO stage (parallel.zero), or a low-communication method
// (sync.method, sync/replica_sync.h).
#include <memory>

#include "brigade/train/train_engine.h"
#include "brigade/train/training_loop.h"

namespace brigade {

// The data-parallel degree of a job: parallel.dp, which must cover every process (0: all).
// Throws ConfigError otherwise.
int64_t dp_degree(const Config& config, const ProcessGroup& group);

// Builds the model, its strategy and the data loader of this rank's slice; dp = dp_degree().
std::unique_ptr<TrainEngine> make_dp_engine(TrainContext& ctx, int64_t dp);

}  // namespace brigade
