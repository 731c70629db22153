#pragma once
#include "brigade/runtime/config.h"

namespace brigade {

// Runs the training job that a validated config describes, in its run folder: resumes from
// the run's latest valid checkpoint (run.resume = "auto"), trains, evaluates and checkpoints
// on schedule, and ends with a validation pass and a final checkpoint. Returns the exit code;
// throws brigade::Error for failures of the environment (the CLI prints them).
int train(const Config& config);

// Applies train.kernels (the GEMM backend) and train.blas_threads to this process. train() and
// every other command that runs a model call it before the first kernel.
void configure_kernels(const TrainConfig& train);

}  // namespace brigade
