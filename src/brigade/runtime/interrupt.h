#pragma once
// SIGINT and SIGTERM (Ctrl-C; Slurm's and Kubernetes' preemption signal) during training: the
// first one asks the training loop to finish its step, save a checkpoint and exit with
// 128 + the signal's number; a second one exits at once (the default action of that signal).
// The handler only stores the signal's number (async-signal-safe); the loop polls it once per
// step (train/training_loop.cc), and the ranks agree on the step to stop at through the
// straggler exchange (train/straggler_watch.h).
namespace brigade {

// Installs the handlers for the lifetime of the guard and restores the previous ones after.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal that asked this process to stop (SIGINT or SIGTERM), or 0.
int interrupt_signal();

}  // namespace brigade
