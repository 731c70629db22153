#pragma once
// The one training loop, for every layout: it drives a TrainEngine (train_engine.h) through
//   resume   the newest valid checkpoint (run.resume = "auto"), every rank reading only the
//            pieces it holds, whatever layout wrote them;
//   steps    gradients, the non-finite decision (train.on_nonfinite), clipping, the update,
//            one metrics record and progress line, straggler detection (straggler_watch.h);
//   schedule evaluation every train.eval_every steps, a checkpoint every train.ckpt_every
//            (asynchronous with train.async_checkpoint);
//   end      run.stop_after: a checkpoint and exit; otherwise a final validation pass, a final
//            checkpoint and the run summary (the last line of metrics.jsonl).
// Every rank runs the same loop; the decisions come from values agreed by collectives.
#include "brigade/monitor/log.h"
#include "brigade/runtime/config.h"
#include "brigade/runtime/process_group.h"
#include "brigade/runtime/run_folder.h"
#include "brigade/train/train_engine.h"
#include "brigade/train/training_data.h"

namespace brigade {

// What the loop and both engines share: the run folder, the rank's log and the data. Creating
// it creates the folder (validate the layout first, so a bad config leaves no folder behind).
struct TrainContext {
  TrainContext(const Config& config, ProcessGroup& group);
  // For work that only reads a run (evaluation): folder is not created or written, the data is
  // given, and the log goes to rank 0's stderr only.
  TrainContext(const Config& config, ProcessGroup& group, RunFolder folder, TrainingData data);

  Config config;
  ProcessGroup& group;
  int rank;
  RunFolder folder;
  Log log;
  TrainingData data;
};

// Runs the whole training with engine (built on ctx); returns the exit code. Throws
// NonFiniteError (train.on_nonfinite = "stop"), and brigade::Error for the environment's
// failures.
int run_training(TrainContext& ctx, TrainEngine& engine);

}  // namespace brigade
