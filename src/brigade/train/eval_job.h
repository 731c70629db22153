#pragma once
// `brigade eval`: a checkpoint's model on a validation set, in any layout and on any number of
// ranks, without training and without writing to the run. The checkpoint's config gives the
// model, the data and the tokenizer; the layout starts as plain data parallelism over the job
// (overrides set parallel.tp, pp, zero, ... for a model too large for one rank); the weights are
// read as train.init_from reads them, into that layout. Every rank evaluates its share of the
// micro-batches and the sums are added in double (train/evaluate.h), so 1, 2 or 4 ranks give the
// same figures.
#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

struct EvalJob {
  std::string checkpoint;              // a checkpoint folder, a run folder or a checkpoints root
  std::string data;                    // data.path to evaluate on; "" = the checkpoint's data
  bool whole = false;                  // every document of data (text, fortunes, jsonl)
  std::vector<std::string> overrides;  // KEY=VALUE on the checkpoint's config
  int64_t batches = 0;                 // micro-batches to evaluate; 0 = the whole set
  std::string json_path;               // rank 0 writes the figures there, or ""
};

// Runs the job on this process's rank (a launch worker, or alone) and prints the figures on rank
// 0's stdout. Returns the exit code; throws brigade::Error (ConfigError for a layout or data that
// does not fit, CheckpointError for an unreadable checkpoint).
int run_eval_job(const EvalJob& job);

// What run_eval_job checks before any process joins: the checkpoint, its config with the job's
// overrides, the layout against world_size processes and the data paths. `brigade launch` calls
// it before starting the workers, so a bad job exits 2 (or 3, 4) at once.
void check_eval_job(const EvalJob& job, int64_t world_size);

}  // namespace brigade
