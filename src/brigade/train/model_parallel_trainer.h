#pragma once
// The training loop of a model-parallel run (parallel.tp * parallel.pp > 1): the GPT cut into
// pipeline stages (model/gpt_stage.h) of tensor-parallel shards, run by the pipeline executor,
// replicated over the dp axis. train() (trainer.h) hands such runs here. Layout, order of the
// parallelisms and what is supported: docs/parallelism.md, "Hybrid mesh".
#include "brigade/runtime/config.h"
#include "brigade/runtime/process_group.h"

namespace brigade {

// Runs the whole training of config on the joined group; returns the exit code as train() does.
// Throws ConfigError if the layout does not fit the group (resolve_hybrid_layout).
int train_model_parallel(const Config& config, ProcessGroup& group);

}  // namespace brigade
