#pragma once
// The checks a config must pass against the job it is about to run in, before any process
// trains: `brigade launch` runs them with the number of workers it is about to start,
// `brigade check-config --nproc N` with N, and the trainer again with the world it joined.
#include <cstdint>

#include "brigade/runtime/config.h"
#include "brigade/train/job_plan.h"

namespace brigade {

// Refuses, with a ConfigError printing every factor, a config its world cannot run: the job's
// plan (job_plan.h: the roles and the hybrid mesh, parameter servers that leave no worker, a
// federation without a coordinator and fed.min_clients clients, a parallel.dp that is not the
// world size), a DiLoCo quorum too small for its aggregator, a resume
// (run.resume = "auto") of a low-communication method's checkpoint under another method or
// number of replicas. Returns the plan it checked.
JobPlan check_world_size(const Config& config, int64_t world_size);

// DiLoCo's quorum mode with Krum or Multi-Krum: every outer step must combine more than
// 2 sync.outer_byzantine + 2 replicas, and sync.quorum of `replicas` must guarantee it.
// ConfigError naming the keys otherwise. Part of check_world_size.
void check_outer_quorum(const SyncConfig& sync, int64_t replicas);

// Whether the data the config names is there: the corpus folder, text or JSONL files (a file, a
// folder or a glob, data/input_files.h), the token-shard folder, the Fashion-MNIST folder.
// IoError naming data.path (or the default location) otherwise; and the folder train.init_from
// names. Only existence: the trainer reads and validates the contents.
void check_data_paths(const Config& config);

// Whether every train.freeze pattern names a tensor of the model and some parameter stays
// trainable (optim/trainable_mask.h); ConfigError naming the pattern otherwise. The engines
// check again against the layout they build.
void check_freeze(const Config& config);

}  // namespace brigade
